"""The upstream client's reading side: an upstream completions stream as checked chunk objects, and
the message of an upstream's error answer. Every value read here is checked (`checks`) before the
app acts on it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from .checks import InvalidUpstream, check_upstream, parse_upstream

__all__ = ["UpstreamStreamError", "error_message", "read_at_most", "upstream_chunks"]


class UpstreamStreamError(Exception):
    """The upstream broke off or reported an error in the middle of a stream."""


def error_message(status: int, raw: bytes) -> tuple[str, Mapping[str, Any] | None]:
    """The upstream's error message, and its body when it already is OpenAI error JSON."""
    try:
        data = parse_upstream(raw)
    except InvalidUpstream:
        text = raw.decode("utf-8", "replace").strip()
        return text or f"upstream answered HTTP {status}", None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message", "")), data
    if isinstance(data, dict) and isinstance(data.get("message"), str):  # vLLM's {"object": "error", ...}
        return data["message"], None
    return json.dumps(data), None


async def _lines(response: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """The lines of a byte stream (ended by LF or CRLF), none longer than `limit` bytes: a longer one is an
    `UpstreamStreamError` before more than `limit` plus one read of it is held (httpx's `aiter_lines`
    would gather a line of any length first)."""
    too_long = UpstreamStreamError(f"the upstream sent an event line longer than {limit} bytes "
                                   "(streamparse serve --max-upstream-line)")
    held = bytearray()
    async for data in response.aiter_bytes():
        start = 0
        end = data.find(b"\n")
        while end >= 0:
            line = bytes(held) + data[start:end] if held else data[start:end]
            held.clear()
            if len(line) > limit:
                raise too_long
            yield line[:-1] if line.endswith(b"\r") else line
            start, end = end + 1, data.find(b"\n", end + 1)
        if len(held) + len(data) - start > limit:
            raise too_long
        held += data[start:]
    if held:
        yield bytes(held)


async def upstream_chunks(response: httpx.Response, n: int, limit: int) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an upstream server-sent-event stream, up to `[DONE]`, each checked
    (`check_upstream`); any other stream is an `UpstreamStreamError`."""
    try:
        async for line in _lines(response, limit):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return
            try:
                chunk = parse_upstream(data)
                if isinstance(chunk, dict) and ("error" in chunk or chunk.get("object") == "error"):
                    message, _ = error_message(502, data)
                    raise UpstreamStreamError(f"the upstream reported an error mid-stream: {message}")
                check_upstream(chunk, n)
            except InvalidUpstream as error:
                raise UpstreamStreamError(f"{error}; the event was {data[:200].decode('utf-8', 'replace')!r}") from None
            yield chunk
    except httpx.HTTPError as error:
        raise UpstreamStreamError(f"the upstream stream broke off: {type(error).__name__}: {error}") from None
    raise UpstreamStreamError("the upstream stream ended without [DONE]")


async def read_at_most(response: httpx.Response, limit: int) -> bytes:
    """The body of `response`, cut at `limit` bytes (an error body is shown, never needed whole)."""
    body = bytearray()
    async for data in response.aiter_bytes():
        body += data[:limit - len(body)]
        if len(body) >= limit:
            break
    return bytes(body)
