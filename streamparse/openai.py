"""OpenAI-compatible adapters: a raw completion stream in, `chat.completion.chunk` dicts out.

For someone running llama.cpp's or vLLM's raw `/v1/completions`, a transformers
`TextIteratorStreamer`, MLX or their own engine who wants OpenAI chat deltas with reasoning and
tool calls. Duck-typed: OpenAI SDK objects, dicts with `choices[0].text`, llama.cpp's native
`{"content": …}` chunks, or plain strings/bytes. No dependency on the openai package.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from .engine import StreamParser
from .options import OptionFields, ToolsLike
from .types import Delta, Message

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["chat_chunks", "chat_message"]


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _piece(chunk: Any) -> tuple[str | bytes, str | None]:
    """The text of one upstream chunk, and its finish reason if it carries one."""
    if isinstance(chunk, (str, bytes, bytearray)):
        return chunk if isinstance(chunk, str) else bytes(chunk), None
    choices = _get(chunk, "choices")
    if isinstance(choices, Sequence) and not choices:
        return "", None  # a usage-only chunk (stream_options.include_usage)
    if choices:
        choice = choices[0]
        text = _get(choice, "text")
        if text is None:  # a chat-shaped upstream chunk
            text = _get(_get(choice, "delta") or {}, "content")
        return text or "", _get(choice, "finish_reason")
    content = _get(chunk, "content")  # llama.cpp's native /completion stream
    if isinstance(content, str):
        stop = _get(chunk, "stop")
        return content, ("stop" if stop is True else None)
    raise TypeError(f"cannot read text from a stream chunk of type {type(chunk).__name__}: "
                    "expected a string, bytes, or an object/dict with choices[0].text")


class _ChunkMaker:
    """Wraps deltas in the `chat.completion.chunk` envelope."""

    def __init__(self, model: str, completion_id: str | None) -> None:
        self.model = model
        self.id = completion_id or "chatcmpl-" + secrets.token_hex(12)
        self.created = int(time.time())

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def deltas(self, deltas: Sequence[Delta]) -> Iterator[dict[str, Any]]:
        for delta in deltas:
            body = delta.to_openai()
            if body:
                yield self.chunk(body)

    def finish(self, parser: StreamParser, upstream: str | None) -> dict[str, Any]:
        reason = "tool_calls" if parser.message.tool_calls else (upstream or "stop")
        return self.chunk({}, reason)


def _sync(stream: Iterable[Any], parser: StreamParser, maker: _ChunkMaker) -> Iterator[dict[str, Any]]:
    yield maker.chunk({"role": "assistant", "content": ""})
    upstream = None
    for chunk in stream:
        text, reason = _piece(chunk)
        upstream = reason or upstream
        yield from maker.deltas(parser.feed(text))
    yield from maker.deltas(parser.close())
    yield maker.finish(parser, upstream)


async def _async(stream: AsyncIterable[Any], parser: StreamParser, maker: _ChunkMaker) -> AsyncIterator[dict[str, Any]]:
    yield maker.chunk({"role": "assistant", "content": ""})
    upstream = None
    async for chunk in stream:
        text, reason = _piece(chunk)
        upstream = reason or upstream
        for out in maker.deltas(parser.feed(text)):
            yield out
    for out in maker.deltas(parser.close()):
        yield out
    yield maker.finish(parser, upstream)


@overload
def chat_chunks(completion_stream: AsyncIterable[Any], format: str = ..., *, model: str = ...,
                tools: ToolsLike = ..., thinking_forced_open: bool = ..., completion_id: str | None = ...,
                **options: Unpack[OptionFields]) -> AsyncIterator[dict[str, Any]]: ...


@overload
def chat_chunks(completion_stream: Iterable[Any], format: str = ..., *, model: str = ...,
                tools: ToolsLike = ..., thinking_forced_open: bool = ..., completion_id: str | None = ...,
                **options: Unpack[OptionFields]) -> Iterator[dict[str, Any]]: ...


def chat_chunks(
    completion_stream: Iterable[Any] | AsyncIterable[Any],
    format: str = "hermes",
    *,
    model: str = "",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    completion_id: str | None = None,
    **options: Unpack[OptionFields],
) -> Iterator[dict[str, Any]] | AsyncIterator[dict[str, Any]]:
    """`chat.completion.chunk` dicts for a raw completion stream (sync or async iterator).

    First a role delta, then content / `reasoning_content` / `tool_calls` deltas, last an empty
    delta with `finish_reason`: `"tool_calls"` when calls were made, else the upstream reason.
    Takes every parser option (`emit_calls`, `prompt`, `on_rejected`, ...)."""
    parser = StreamParser(format, tools, thinking_forced_open, **options)
    maker = _ChunkMaker(model, completion_id)
    if isinstance(completion_stream, AsyncIterable):
        return _async(completion_stream, parser, maker)
    if isinstance(completion_stream, (str, bytes)) or not isinstance(completion_stream, Iterable):
        raise TypeError("chat_chunks takes an iterator of stream chunks; for a finished text use chat_message")
    return _sync(completion_stream, parser, maker)


def chat_message(
    completion: Any,
    format: str = "hermes",
    *,
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    **options: Unpack[OptionFields],
) -> dict[str, Any]:
    """The OpenAI assistant message for a finished completion (its text, or a completion object/dict).

    Takes every parser option; `emit_calls` makes no difference to a finished message."""
    text, _ = _piece(completion)
    parser = StreamParser(format, tools, thinking_forced_open, **options)
    parser.feed(text)
    parser.close()
    message: Message = parser.message
    return message.to_openai()
