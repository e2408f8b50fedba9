"""`chat.completion.chunk` objects written as server-sent events, cheaply, and the answer that sends them.

Within one answer `id`, `object`, `created` and `model` never change, so their JSON is written once
per request (`ChunkWriter`); per chunk only the choice is written, and a delta of strings (content,
reasoning, the role) by escaping its strings, without walking a dict. The bytes are those of
`json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))` (tests/test_server_stream.py holds them
to it); a chunk of another shape (usage, an error) is written by `json.dumps` itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["ChunkWriter", "EventStream", "sse"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_escape = json.encoder.encode_basestring  # the C string escaper json.dumps(ensure_ascii=False) uses


def sse(data: Mapping[str, Any]) -> bytes:
    """Any JSON object as one event."""
    return b"data: " + _ENCODER.encode(data).encode() + b"\n\n"


class ChunkWriter:
    """The events of one answer's chunks, its constant fields written once."""

    def __init__(self, completion_id: str, created: int, model: str) -> None:
        self._head = ('data: {"id":' + _escape(completion_id) + ',"object":"chat.completion.chunk","created":'
                      + str(int(created)) + ',"model":' + _escape(model) + ',"choices":[{"index":')
        self._fields = (completion_id, "chat.completion.chunk", created, model)

    def write(self, chunk: Mapping[str, Any]) -> bytes:
        """`chunk` (made for this answer) as one event."""
        choices = chunk.get("choices")
        if len(chunk) != 5 or type(choices) is not list or len(choices) != 1 or (
                chunk["id"], chunk["object"], chunk["created"], chunk["model"]) != self._fields:
            return sse(chunk)
        choice = choices[0]
        index, delta = choice.get("index"), choice.get("delta")
        if (type(index) is not int or type(delta) is not dict or "finish_reason" not in choice
                or len(choice) != 3 + ("logprobs" in choice)):
            return sse(chunk)
        text = self._head + str(index) + ',"delta":' + _delta_json(delta) + ',"finish_reason":'
        reason = choice["finish_reason"]
        text += "null" if reason is None else _ENCODER.encode(reason)
        if "logprobs" in choice:
            text += ',"logprobs":' + _ENCODER.encode(choice["logprobs"])
        return (text + "}]}\n\n").encode()


def _delta_json(delta: dict[str, Any]) -> str:
    """A delta's JSON: of strings only (content, reasoning, the role) by escaping them; else `json.dumps`."""
    parts = []
    for key, value in delta.items():
        if type(value) is not str:
            return _ENCODER.encode(delta)
        parts.append(_escape(key) + ":" + _escape(value))
    return "{" + ",".join(parts) + "}"


class EventStream(StreamingResponse):
    """A `text/event-stream` answer: each piece of `events` is sent as it comes. When the client goes
    away, `on_disconnect` runs at once (the app aborts its upstream read, which ends `events`; what they
    still make is dropped). `close` runs however the answer ends, also when `events` never started.

    Starlette's `StreamingResponse` watches for the disconnect with an anyio task group per answer,
    a tenth of a millisecond on the path to the first token; one asyncio task does the same here.
    """

    def __init__(self, events: AsyncGenerator[bytes, None], headers: Mapping[str, str],
                 on_disconnect: Callable[[], None], close: Callable[[], Awaitable[None]],
                 media_type: str = "text/event-stream") -> None:
        super().__init__(events, headers=headers, media_type=media_type)
        self._events = events
        self._on_disconnect = on_disconnect
        self._close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self._on_disconnect()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for piece in self._events:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            await self._events.aclose()
            await self._close()
