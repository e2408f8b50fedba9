"""The three ways in: `parse` a finished output, `stream` / `astream` a token stream."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .engine import StreamParser
from .registry import get_format
from .types import Delta, Message, Token

Chunk = str | bytes | bytearray | Token | Sequence[Token]
Tools = Sequence[Mapping[str, Any]] | None


def parse(
    text: str | bytes | Sequence[Token],
    format: str = "hermes",
    tools: Tools = None,
    thinking_forced_open: bool = False,
    *,
    tool_calls_in_reasoning: str = "ignore",
    id_factory: Callable[[int], str] | None = None,
    prompt: str | None = None,
    on_rejected: str = "report",
    max_call_chars: int | None = None,
    special_tokens: str = "ignore",
) -> Message:
    """The message a finished output encodes: the streaming engine fed the whole text at once."""
    if not isinstance(text, (str, bytes, bytearray, list, tuple)):
        raise TypeError(f"parse() takes the output as str, bytes or a list of Tokens, got {type(text).__name__}")
    parser = StreamParser(format, tools, thinking_forced_open, prompt=prompt,
                          tool_calls_in_reasoning=tool_calls_in_reasoning, id_factory=id_factory,
                          on_rejected=on_rejected, max_call_chars=max_call_chars, special_tokens=special_tokens)
    parser.feed(text)
    parser.close()
    return parser.message


def stream(
    chunks: Iterable[Chunk],
    format: str = "hermes",
    tools: Tools = None,
    thinking_forced_open: bool = False,
    *,
    emit_calls: str = "validated",
    tool_calls_in_reasoning: str = "ignore",
    id_factory: Callable[[int], str] | None = None,
    prompt: str | None = None,
    on_rejected: str = "report",
    max_call_chars: int | None = None,
    special_tokens: str = "ignore",
) -> Iterator[Delta]:
    """Deltas for a token stream (str chunks, or bytes decoded incrementally as UTF-8)."""
    parser = StreamParser(format, tools, thinking_forced_open, emit_calls=emit_calls, prompt=prompt,
                          tool_calls_in_reasoning=tool_calls_in_reasoning, id_factory=id_factory,
                          on_rejected=on_rejected, max_call_chars=max_call_chars, special_tokens=special_tokens)
    if isinstance(chunks, (str, bytes)):
        raise TypeError("stream() takes an iterable of chunks; to parse one finished text use parse()")
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()


async def astream(
    chunks: AsyncIterable[Chunk],
    format: str = "hermes",
    tools: Tools = None,
    thinking_forced_open: bool = False,
    *,
    emit_calls: str = "validated",
    tool_calls_in_reasoning: str = "ignore",
    id_factory: Callable[[int], str] | None = None,
    prompt: str | None = None,
    on_rejected: str = "report",
    max_call_chars: int | None = None,
    special_tokens: str = "ignore",
) -> AsyncIterator[Delta]:
    """`stream` for an async iterator of chunks."""
    parser = StreamParser(format, tools, thinking_forced_open, emit_calls=emit_calls, prompt=prompt,
                          tool_calls_in_reasoning=tool_calls_in_reasoning, id_factory=id_factory,
                          on_rejected=on_rejected, max_call_chars=max_call_chars, special_tokens=special_tokens)
    async for chunk in chunks:
        for delta in parser.feed(chunk):
            yield delta
    for delta in parser.close():
        yield delta


def render(message: Message, format: str = "hermes") -> str:
    """The message written in the format's wire text: the inverse of `parse`."""
    if not isinstance(message, Message):
        raise TypeError(f"render() takes a streamparse.Message, got {type(message).__name__}")
    return get_format(format).render(message)
