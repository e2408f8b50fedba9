"""The three ways in: `parse` a finished output, `stream` / `astream` a token stream."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .engine import StreamParser
from .options import OptionFields, ToolsLike
from .registry import get_format
from .spec import FormatLike
from .types import Delta, Message, Token

if TYPE_CHECKING:
    from typing_extensions import Unpack

Chunk = str | bytes | bytearray | Token | Sequence[Token]


def parse(
    text: str | bytes | Sequence[Token],
    format: FormatLike = "hermes",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    **options: Unpack[OptionFields],
) -> Message:
    """The message a finished output encodes: the streaming engine fed the whole text at once."""
    if not isinstance(text, (str, bytes, bytearray, list, tuple)):
        raise TypeError(f"parse() takes the output as str, bytes or a list of Tokens, got {type(text).__name__}")
    return StreamParser(format, tools, thinking_forced_open, **options)._parse(text)


def stream(
    chunks: Iterable[Chunk],
    format: FormatLike = "hermes",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    **options: Unpack[OptionFields],
) -> Iterator[Delta]:
    """Deltas for a token stream (str chunks, or bytes decoded incrementally as UTF-8)."""
    parser = StreamParser(format, tools, thinking_forced_open, **options)
    if isinstance(chunks, (str, bytes)):
        raise TypeError("stream() takes an iterable of chunks; to parse one finished text use parse()")
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()


async def astream(
    chunks: AsyncIterable[Chunk],
    format: FormatLike = "hermes",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    **options: Unpack[OptionFields],
) -> AsyncIterator[Delta]:
    """`stream` for an async iterator of chunks."""
    parser = StreamParser(format, tools, thinking_forced_open, **options)
    async for chunk in chunks:
        for delta in parser.feed(chunk):
            yield delta
    for delta in parser.close():
        yield delta


def render(message: Message, format: FormatLike = "hermes") -> str:
    """The message written in the format's wire text: the inverse of `parse`."""
    if not isinstance(message, Message):
        raise TypeError(f"render() takes a streamparse.Message, got {type(message).__name__}")
    return get_format(format).render(message)
