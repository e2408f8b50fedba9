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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast, overload

from .engine import StreamParser
from .options import OptionFields, Options, ToolsLike, make_options
from .spec import FormatLike
from .types import Delta, ReasoningField, Token, _reasoning_keys

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["chat_chunks", "chat_completion", "chat_logprobs", "chat_message"]


def _get(obj: Any, key: str) -> Any:
    if type(obj) is dict or isinstance(obj, Mapping):  # a dict first: the ABC check costs more than the get
        return obj.get(key)
    return getattr(obj, key, None)


def _plain(value: Any) -> Any:
    """A JSON-ready copy of an SDK object (pydantic `model_dump`) or the value itself."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


@dataclass
class _Piece:
    """What one upstream chunk says about one choice."""

    index: int
    text: str | bytes | list[Token]  # a list of Tokens: the choice's text as token-aware input
    finish_reason: str | None = None
    logprobs: Any = None


def _json_pieces(chunk: dict[str, Any]) -> tuple[list[_Piece], Any] | None:
    """`_pieces` of a chunk as a JSON reader gives it (dicts, lists, strings), read without the duck
    typing SDK objects need: the per-chunk cost of a server's stream. None for any other shape."""
    choices = chunk.get("choices")
    if type(choices) is not list:
        return None
    pieces = []
    for position, choice in enumerate(choices):
        if type(choice) is not dict:
            return None
        text, index, logprobs = choice.get("text"), choice.get("index", position), choice.get("logprobs")
        if type(text) is not str or type(index) is not int or not (logprobs is None or type(logprobs) is dict):
            return None
        pieces.append(_Piece(index, text, choice.get("finish_reason"), logprobs))
    usage = chunk.get("usage")
    return (pieces, usage) if usage is None or type(usage) is dict else None


def _pieces(chunk: Any) -> tuple[list[_Piece], Any]:
    """The per-choice pieces of one upstream chunk, and the `usage` it carries (or None)."""
    if type(chunk) is dict and (read := _json_pieces(chunk)) is not None:
        return read
    if isinstance(chunk, (str, bytes, bytearray)):
        return [_Piece(0, chunk if isinstance(chunk, str) else bytes(chunk))], None
    usage = _plain(_get(chunk, "usage"))
    choices = _get(chunk, "choices")
    if isinstance(choices, Sequence) and not choices:
        return [], usage  # a usage-only chunk (stream_options.include_usage)
    if choices:
        if not isinstance(choices, Sequence) or isinstance(choices, (str, bytes)):
            raise TypeError(f"a stream chunk's choices must be a list, not {type(choices).__name__}")
        pieces = []
        for position, choice in enumerate(choices):
            text = _get(choice, "text")
            if text is None:  # a chat-shaped upstream chunk
                text = _get(_get(choice, "delta") or _get(choice, "message") or {}, "content")
            if isinstance(text, (list, tuple)) and all(isinstance(token, Token) for token in text):
                text = list(text)
            elif text is not None and not isinstance(text, (str, bytes)):
                raise TypeError(f"choices[{position}].text of a stream chunk must be a string or a list of "
                                f"streamparse.Token, not {type(text).__name__}")
            index = _get(choice, "index")
            pieces.append(_Piece(index if isinstance(index, int) else position, text or "",
                                 _get(choice, "finish_reason"), _plain(_get(choice, "logprobs"))))
        return pieces, usage
    content = _get(chunk, "content")  # llama.cpp's native /completion stream
    if isinstance(content, str):
        stop = _get(chunk, "stop")
        return [_Piece(0, content, "stop" if stop is True else None)], usage
    raise TypeError(f"cannot read text from a stream chunk of type {type(chunk).__name__}: "
                    "expected a string, bytes, or an object/dict with choices[0].text")


def chat_logprobs(logprobs: Any) -> Any:
    """Completions-style logprobs (`tokens`, `token_logprobs`, `top_logprobs`) in the chat shape
    (`{"content": [{"token", "logprob", "bytes", "top_logprobs"}]}`); other shapes pass unchanged."""
    if not isinstance(logprobs, Mapping) or not isinstance(logprobs.get("tokens"), Sequence):
        return logprobs
    tokens = logprobs["tokens"]
    values = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    values, tops = (item if isinstance(item, Sequence) else [] for item in (values, tops))
    content = []
    for i, token in enumerate(tokens):
        top = tops[i] if i < len(tops) and isinstance(tops[i], Mapping) else {}
        content.append({
            "token": token,
            "logprob": values[i] if i < len(values) else None,
            "bytes": list(str(token).encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(str(t).encode())} for t, lp in top.items()],
        })
    return {"content": content}


def _merge_logprobs(held: Any, new: Any) -> Any:
    if held is None:
        return new
    if isinstance(held, Mapping) and isinstance(new, Mapping) and isinstance(held.get("content"), list):
        return {"content": held["content"] + list(new.get("content") or [])}
    return new


def _parser_for(options: Options, text_fallback: bool, first: str | bytes | list[Token]) -> StreamParser:
    """The parser of one choice. With `text_fallback` and `special_tokens="require"`, a choice whose
    first piece is text, not Tokens (the upstream sent no token ids), is read as text."""
    if text_fallback and options.special_tokens == "require" and not isinstance(first, list):
        options = options.with_changes(special_tokens="ignore")
    return StreamParser.from_options(options)


def _feed(parser: StreamParser, text: str | bytes | list[Token]) -> list[Delta]:
    """Feed a piece in the parser's mode: Tokens to a text-mode parser as their text; text to a
    token-aware parser as ordinary tokens (it can open nothing)."""
    token_aware = parser.options.special_tokens == "require"
    if isinstance(text, list):
        return parser.feed(text if token_aware else "".join(
            token.text if isinstance(token.text, str) else bytes(token.text).decode("utf-8", "replace")
            for token in text))
    # Token.text is typed str; bytes are taken too (decoded incrementally, like a bytes chunk)
    return parser.feed(Token(cast(str, text), False) if token_aware and text else text)


class _Choice:
    """One choice of the stream: its own parser (made at its first piece), the upstream finish
    reason, logprobs not yet sent."""

    def __init__(self) -> None:
        self.parser: StreamParser | None = None
        self.upstream_reason: str | None = None
        self.logprobs: Any = None
        self.closed = False


class _ChunkMaker:
    """Wraps deltas in the `chat.completion.chunk` envelope, one parser per choice index."""

    def __init__(self, options: Options, model: str, completion_id: str | None,
                 reasoning_field: ReasoningField, text_fallback: bool = False) -> None:
        self.options = options
        self.text_fallback = text_fallback
        self.model = model
        self.id = completion_id or "chatcmpl-" + secrets.token_hex(12)
        self.created = int(time.time())
        self.reasoning_field = reasoning_field
        self.choices: dict[int, _Choice] = {}
        self.usage: Any = None

    def chunk(self, index: int, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish_reason}
        state = self.choices.get(index)
        if state is not None and state.logprobs is not None:
            choice["logprobs"], state.logprobs = state.logprobs, None
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }

    def start(self, index: int) -> Iterator[dict[str, Any]]:
        if index not in self.choices:
            self.choices[index] = _Choice()
            yield self.chunk(index, {"role": "assistant", "content": ""})

    def deltas(self, index: int, deltas: Sequence[Delta]) -> Iterator[dict[str, Any]]:
        for delta in deltas:
            body = delta.to_openai(self.reasoning_field)
            if body:
                yield self.chunk(index, body)

    def read(self, chunk: Any) -> Iterator[dict[str, Any]]:
        pieces, usage = _pieces(chunk)
        if usage is not None:
            self.usage = usage
        for piece in pieces:
            yield from self.start(piece.index)
            state = self.choices[piece.index]
            if state.closed:
                continue
            if piece.logprobs is not None:
                state.logprobs = _merge_logprobs(state.logprobs, chat_logprobs(piece.logprobs))
            state.upstream_reason = piece.finish_reason or state.upstream_reason
            if state.parser is None and piece.text == "" and piece.finish_reason is None:
                continue  # nothing to read: the choice's first text (or Tokens) decides how it is read
            if state.parser is None:
                state.parser = _parser_for(self.options, self.text_fallback, piece.text)
            yield from self.deltas(piece.index, _feed(state.parser, piece.text))
            if piece.finish_reason is not None:
                yield from self.finish(piece.index)

    def finish(self, index: int) -> Iterator[dict[str, Any]]:
        state = self.choices[index]
        if state.closed:
            return
        state.closed = True
        if state.parser is None:
            state.parser = _parser_for(self.options, self.text_fallback, "")
        yield from self.deltas(index, state.parser.close())
        reason = "tool_calls" if state.parser.message.tool_calls else (state.upstream_reason or "stop")
        yield self.chunk(index, {}, reason)

    def end(self) -> Iterator[dict[str, Any]]:
        for index in sorted(self.choices):
            yield from self.finish(index)
        if self.usage is not None:
            yield {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                   "choices": [], "usage": self.usage}


def _sync(stream: Iterable[Any], maker: _ChunkMaker) -> Iterator[dict[str, Any]]:
    yield from maker.start(0)
    for chunk in stream:
        yield from maker.read(chunk)
    yield from maker.end()


async def _async(stream: AsyncIterable[Any], maker: _ChunkMaker) -> AsyncIterator[dict[str, Any]]:
    for out in maker.start(0):
        yield out
    async for chunk in stream:
        for out in maker.read(chunk):
            yield out
    for out in maker.end():
        yield out


@overload
def chat_chunks(completion_stream: AsyncIterable[Any], format: FormatLike = ..., *, model: str = ...,
                tools: ToolsLike = ..., thinking_forced_open: bool = ..., completion_id: str | None = ...,
                reasoning_field: ReasoningField = ..., text_fallback: bool = ...,
                **options: Unpack[OptionFields]) -> AsyncIterator[dict[str, Any]]: ...


@overload
def chat_chunks(completion_stream: Iterable[Any], format: FormatLike = ..., *, model: str = ...,
                tools: ToolsLike = ..., thinking_forced_open: bool = ..., completion_id: str | None = ...,
                reasoning_field: ReasoningField = ..., text_fallback: bool = ...,
                **options: Unpack[OptionFields]) -> Iterator[dict[str, Any]]: ...


def chat_chunks(
    completion_stream: Iterable[Any] | AsyncIterable[Any],
    format: FormatLike = "hermes",
    *,
    model: str = "",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    completion_id: str | None = None,
    reasoning_field: ReasoningField = "reasoning_content",
    text_fallback: bool = False,
    **options: Unpack[OptionFields],
) -> Iterator[dict[str, Any]] | AsyncIterator[dict[str, Any]]:
    """`chat.completion.chunk` dicts for a raw completion stream (sync or async iterator).

    Per choice index (an `n>1` stream keeps its choices apart, one parser each): a role delta, then
    content / reasoning / `tool_calls` deltas, last an empty delta with `finish_reason`: `"tool_calls"`
    when calls were accepted, else the upstream reason. Upstream `logprobs` ride on the next chunk of
    their choice (in the chat shape, see `chat_logprobs`); an upstream `usage` is sent last in a chunk
    with no choices. `reasoning_field`: `"reasoning_content"`, `"reasoning"` or `"both"`.
    A choice's `text` may be a list of `streamparse.Token` (read with `special_tokens="require"`).
    `text_fallback`: with `special_tokens="require"`, a choice whose first piece is text, not Tokens,
    is read as text (delimiters count however they were spelled).
    Takes every parser option (`emit_calls`, `prompt`, `on_rejected`, ...)."""
    _reasoning_keys(reasoning_field)
    maker = _ChunkMaker(make_options(format, tools, thinking_forced_open, options), model, completion_id,
                        reasoning_field, text_fallback)
    if isinstance(completion_stream, AsyncIterable):
        return _async(completion_stream, maker)
    if isinstance(completion_stream, (str, bytes)) or not isinstance(completion_stream, Iterable):
        raise TypeError("chat_chunks takes an iterator of stream chunks; for a finished text use chat_message")
    return _sync(completion_stream, maker)


def _finished_choices(completion: Any, options: Options,
                      text_fallback: bool = False) -> tuple[dict[int, tuple[StreamParser, _Piece]], Any]:
    pieces, usage = _pieces(completion)
    if not pieces:
        pieces = [_Piece(0, "")]
    parsed = {}
    for piece in pieces:
        parser = _parser_for(options, text_fallback, piece.text)
        _feed(parser, piece.text)
        parser.close()
        parsed[piece.index] = (parser, piece)
    return parsed, usage


def chat_message(
    completion: Any,
    format: FormatLike = "hermes",
    *,
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    reasoning_field: ReasoningField = "reasoning_content",
    **options: Unpack[OptionFields],
) -> dict[str, Any]:
    """The OpenAI assistant message for a finished completion (its text, or a completion object/dict;
    of several choices, the first). `chat_completion` gives every choice, logprobs and usage.

    Takes every parser option; `emit_calls` makes no difference to a finished message."""
    _reasoning_keys(reasoning_field)
    parsed, _ = _finished_choices(completion, make_options(format, tools, thinking_forced_open, options))
    parser, _piece = parsed[min(parsed)]
    return parser.message.to_openai(reasoning_field)


def chat_completion(
    completion: Any,
    format: FormatLike = "hermes",
    *,
    model: str = "",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    completion_id: str | None = None,
    reasoning_field: ReasoningField = "reasoning_content",
    text_fallback: bool = False,
    **options: Unpack[OptionFields],
) -> dict[str, Any]:
    """The whole `chat.completion` object for a finished completion: every choice (its message,
    `finish_reason` and chat-shaped `logprobs`) and the upstream `usage`. A choice's `text` may be a
    list of `streamparse.Token`; `text_fallback` as in `chat_chunks`."""
    _reasoning_keys(reasoning_field)
    parsed, usage = _finished_choices(completion, make_options(format, tools, thinking_forced_open, options),
                                      text_fallback)
    choices = []
    for index in sorted(parsed):
        parser, piece = parsed[index]
        message = parser.message
        choices.append({
            "index": index,
            "message": message.to_openai(reasoning_field),
            "logprobs": chat_logprobs(piece.logprobs),
            "finish_reason": "tool_calls" if message.tool_calls else (piece.finish_reason or "stop"),
        })
    out: dict[str, Any] = {
        "id": completion_id or "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        out["usage"] = usage
    return out
