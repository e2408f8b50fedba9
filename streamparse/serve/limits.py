"""Bounds on what one request may make the proxy hold, and for how long: its head's bytes and time
(enforced in the HTTP protocol, `connection`), its body's bytes and time, its number of messages.

The body is counted while it arrives, never read whole first: a declared `Content-Length` over the
bound is refused before a byte is read, and one that lies (or a chunked body without one) is still
cut at the bound, so the proxy holds at most `max_body_bytes` of any request. A body whose next
bytes do not come within `body_timeout` seconds (one that stops short of its length) is a 408, as
nginx's `client_body_timeout` answers.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_HEADER_TIMEOUT", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_HEADER_BYTES",
           "DEFAULT_MAX_MESSAGES", "DEFAULT_MAX_PROMPT_CHARS", "DEFAULT_PREPARE_TIMEOUT", "DEFAULT_RENDER_TIMEOUT",
           "Limits", "OverLimit", "check_messages", "read_body"]

DEFAULT_MAX_BODY_BYTES = 8 << 20  # 8 MiB: a long agent conversation is a few hundred KB
DEFAULT_MAX_MESSAGES = 2048
# A chat template is code (in practice from a downloaded model directory), so each render is bounded:
# in time (a template's endless loop) and in the characters it writes or builds (`template._Sandbox`).
DEFAULT_RENDER_TIMEOUT = 10.0        # seconds; a 1,000-message conversation renders in well under 0.1 s
DEFAULT_MAX_PROMPT_CHARS = 16 << 20  # 16 Mi characters: about 4M tokens, past any model's context
# Everything done for a request before it goes upstream: rendering, marking, tokenizing, compiling its
# tools, building its grammar. Each of these is bounded in size; this bounds their sum in time.
DEFAULT_PREPARE_TIMEOUT = 30.0
# The request line and headers: 16 KiB, as h11 (uvicorn's other parser) and common gateways take; an
# API key or a trace header is well under 1 KiB.
DEFAULT_MAX_HEADER_BYTES = 16 << 10
DEFAULT_HEADER_TIMEOUT = 60.0  # seconds for a whole head, as nginx's client_header_timeout
DEFAULT_BODY_TIMEOUT = 60.0    # seconds between two reads of a body, as nginx's client_body_timeout
# After a refusal, this much more of the body is read and dropped (never held) so that the client, still
# sending, reads the answer instead of a reset connection; a client sending more is cut off.
_DRAIN_BYTES = 64 << 20


@dataclass(frozen=True)
class Limits:
    """The bounds of one deployment, each a `streamparse serve` flag."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_messages: int = DEFAULT_MAX_MESSAGES
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError("--max-body-bytes must be at least 1024")
        if self.max_messages < 1:
            raise ValueError("--max-messages must be at least 1")
        if self.max_header_bytes < 1024:
            raise ValueError("--max-header-bytes must be at least 1024")
        if not self.header_timeout > 0 or not self.body_timeout > 0:  # NaN too
            raise ValueError("--header-timeout and --body-timeout must be more than 0 seconds")


class OverLimit(Exception):
    """A request over a bound or with a broken length: answered with `status` (413 or 400)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


async def read_body(chunks: AsyncIterator[bytes], content_length: str | None, limit: int,
                    timeout: float = DEFAULT_BODY_TIMEOUT) -> bytes:
    """The request body from its `chunks` (Starlette's `Request.stream()`), at most `limit` bytes: more,
    declared or sent, is an `OverLimit` 413; a `Content-Length` that is not a number of bytes is a 400;
    no bytes for `timeout` seconds while it is still due is a 408."""
    too_large = OverLimit(413, f"the request body is larger than {limit} bytes: send a smaller one, or start "
                               "streamparse serve with a larger --max-body-bytes")
    if content_length is not None:
        declared = content_length.strip()
        if not declared.isascii() or not declared.isdigit():
            raise OverLimit(400, f"the Content-Length header must be a number of bytes, not {content_length[:40]!r}")
        if int(declared) > limit:
            raise too_large
    body = bytearray()
    try:
        async for chunk in _timed(chunks, timeout):
            if len(body) + len(chunk) > limit:
                await _drain(chunks, _DRAIN_BYTES, timeout)
                raise too_large
            body += chunk
    except TimeoutError:
        raise OverLimit(408, f"the request body stopped: no bytes of it for {timeout:g} s "
                             "(streamparse serve --body-timeout)") from None
    return bytes(body)


async def _timed(chunks: AsyncIterator[bytes], timeout: float) -> AsyncIterator[bytes]:
    """`chunks`, each awaited at most `timeout` seconds (`TimeoutError`): one timer for the whole
    stream, moved on as each chunk comes (three per-chunk timers made a third of a small request's
    reading). Only the awaits of `chunks` are timed, never the consumer's own work between them."""
    if sys.version_info < (3, 11):  # no asyncio.timeout to move: a timer per chunk
        from .http import within  # here: the CLI imports this module for its defaults, not asyncio with it

        while True:
            try:
                chunk = await within(timeout, anext(chunks))
            except StopAsyncIteration:
                return
            yield chunk
    import asyncio

    loop = asyncio.get_running_loop()
    pending = asyncio.timeout(None)
    async with pending:
        while True:
            pending.reschedule(loop.time() + timeout)
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            pending.reschedule(None)  # the consumer's time between chunks is not the client's
            yield chunk


async def _drain(chunks: AsyncIterator[bytes], limit: int, timeout: float) -> None:
    dropped = 0
    try:
        async for chunk in _timed(chunks, timeout):
            dropped += len(chunk)
            if dropped > limit:
                return
    except TimeoutError:  # the client stopped sending: it can read the answer now
        return


def check_messages(body: dict[str, Any], limit: int) -> None:
    """`OverLimit` 400 when a checked request body holds more than `limit` messages."""
    count = len(body["messages"])
    if count > limit:
        raise OverLimit(400, f"the request has {count} messages, more than the {limit} this server takes: "
                             "shorten the conversation, or start streamparse serve with a larger --max-messages",
                        param="messages")
