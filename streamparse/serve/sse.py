"""`chat.completion.chunk` objects written as server-sent events, cheaply.

Within one answer `id`, `object`, `created` and `model` never change, so their JSON is written once
per request (`ChunkWriter`); per chunk only the choice is written, and a delta of strings (content,
reasoning, the role) by escaping its strings, without walking a dict. The bytes are those of
`json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))` (tests/test_server_sse.py holds them
to it); a chunk of another shape (usage, an error) is written by `json.dumps` itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["ChunkWriter", "sse"]

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
