"""Reading an upstream's answers: a completions stream as checked chunk objects, a socket read at a
time, and the message of an upstream's error answer. Every value read here is checked (`checks`)
before the app acts on it. Cost per read: one `bytes.split` into lines; per event one jiter parse
and a check of its few fields."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .checks import InvalidUpstream, parse_chunk, parse_upstream

__all__ = ["UpstreamEvents", "UpstreamStreamError", "error_message", "joined", "relayed_headers"]

# An upstream's error answer keeps the headers that tell a client when to try again (what OpenAI's SDKs
# read to back off): at most this many, each value at most this long and printable ASCII.
_RELAYED = ("retry-after", "retry-after-ms")
_RELAYED_PREFIX = "x-ratelimit-"
_MAX_RELAYED = 16
_MAX_RELAYED_VALUE = 256


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


def relayed_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of an upstream error answer that go on to the client: `Retry-After`,
    `retry-after-ms` and `x-ratelimit-*` whose values are short printable ASCII (any other is dropped:
    it could not be sent as a header)."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if (name in _RELAYED or name.startswith(_RELAYED_PREFIX)) and len(out) < _MAX_RELAYED \
                and len(value) <= _MAX_RELAYED_VALUE and value.isascii() and value.isprintable():
            out[name] = value
    return out


class UpstreamEvents:
    """An upstream server-sent-event stream read as its bytes arrive: `feed(data)` gives the checked
    chunk objects of the `data:` lines `data` completes (lines end with LF or CRLF), up to `[DONE]`
    (`done`). A bad event, or a line longer than `limit` bytes (found before more than `limit` plus
    one read of it is held), is an `UpstreamStreamError` kept in `error`, raised by `check` once the
    chunks before it are answered."""

    def __init__(self, n: int, limit: int) -> None:
        self.n = n
        self.limit = limit
        self.done = False
        self.error: UpstreamStreamError | None = None
        self._held = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        if self.done or self.error is not None:
            return []
        if self._held:
            data = self._held + data
        lines = data.split(b"\n")
        self._held = lines.pop()
        if len(data) > self.limit and max(len(self._held), *map(len, lines), 0) > self.limit:
            lines = lines[:next(i for i, line in enumerate([*lines, self._held]) if len(line) > self.limit)]
            self.error = UpstreamStreamError(f"the upstream sent an event line longer than {self.limit} bytes "
                                             "(streamparse serve --max-upstream-line)")
        chunks = []
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                break
            try:
                chunk = parse_chunk(payload, self.n)
            except InvalidUpstream as error:
                self.error = UpstreamStreamError(f"{error}; the event was {payload[:200].decode('utf-8', 'replace')!r}")
                break
            if "error" in chunk or chunk.get("object") == "error":
                message, _ = error_message(502, payload)
                self.error = UpstreamStreamError(f"the upstream reported an error mid-stream: {message}")
                break
            chunks.append(chunk)
        if self.done:  # a line after [DONE], however long, is never read
            self.error = None
        return chunks

    def check(self) -> None:
        """Raise the stream's error, if it had one."""
        if self.error is not None:
            raise self.error

    def end(self) -> None:
        """The stream's bytes are over: an error unless it ended with `[DONE]`."""
        self.check()
        if not self.done:
            raise UpstreamStreamError("the upstream stream ended without [DONE]")


def joined(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`chunks` with each run of consecutive chunks that only bring text to one choice (no finish
    reason, logprobs, token ids or usage) as one chunk of their joined text. What arrived in one read
    is then parsed in one feed and answered in one event: the parser's result does not depend on how
    its text is cut, and nothing waits for more than the read brought."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    index = None

    def flush() -> None:
        if texts:
            out.append({"choices": [{"index": index, "text": "".join(texts)}]})
            texts.clear()

    for chunk in chunks:
        choices = chunk["choices"]
        choice = choices[0] if len(choices) == 1 and chunk.get("usage") is None else None
        if (choice is not None and choice.get("finish_reason") is None and choice.get("logprobs") is None
                and "token_ids" not in choice):
            if choice.get("index", 0) != index:
                flush()
                index = choice.get("index", 0)
            texts.append(choice["text"])
            continue
        flush()
        out.append(chunk)
    flush()
    return out
