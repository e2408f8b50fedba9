"""What a client connection may cost before its request reaches the app: the bytes and the time of
each request's head (request line and headers), bounded in uvicorn's own HTTP protocol.

uvicorn's httptools protocol hands the parser whatever the socket brought, and the parser holds a
header's value whole until it ends, so a 96 MB `Authorization` header was read, held and answered
(401, after the app saw it) and an idle connection, or a head sent a byte at a time, stayed open for
ever. Here every read that belongs to a head is counted before the parser sees it, and a head not
over within `max_header_bytes` is answered 431 and the connection closed: the proxy holds at most
the bound of any head. A head not over `header_timeout` seconds after the connection opened (or,
on a kept connection, after its first byte) is answered 408 and closed, as nginx's
`client_header_timeout` does; the idle time between two requests on a kept connection stays
uvicorn's (`timeout_keep_alive`, 5 s). A request body is timed where it is read (`limits.read_body`);
one still arriving when its answer was sent (a 401, 408 or 413 answered before the body ended) is
read and dropped for at most `body_timeout` seconds more, then the connection is closed (uvicorn
would drop it for as long as a byte came now and then).

Cost: one length sum per socket read; a read is cut in two only where a head reaches the bound. A
head that begins in the same read as the end of the body before it (a pipelined request) is counted
from the next read on, so it is bounded by `max_header_bytes` plus that one read.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .limits import Limits

__all__ = ["bounded_protocol"]

logger = logging.getLogger("streamparse")


class _BoundedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with each request head bounded in bytes and time (the class
    attributes, set by `bounded_protocol`)."""

    max_header_bytes = Limits().max_header_bytes
    header_timeout = Limits().header_timeout
    body_timeout = Limits().body_timeout

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True   # reading a head, or between requests (the next bytes are a head)
        self._head_bytes = 0   # of the head being read
        self._heads = 0        # heads read so far
        self._head_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None

    # -- the connection -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()  # a connection that never sends a request is timed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        self._stop_linger_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        while self._in_head and self._head_bytes + len(data) > self.max_header_bytes:
            room = self.max_header_bytes - self._head_bytes
            heads = self._heads
            self._head_bytes = self.max_header_bytes
            if room:
                super().data_received(data[:room])
                if self.transport.is_closing():  # the parser refused it (400)
                    return
            if self._in_head and self._heads == heads:  # this head is not over at the bound
                self._refuse(431, f"the request line and headers are larger than {self.max_header_bytes} bytes: "
                                  "send smaller headers, or start streamparse serve with a larger "
                                  "--max-header-bytes")
                return
            data = data[room:]  # the head ended within the bound: the rest is its body, or another request
        if self._in_head:
            self._head_bytes += len(data)
        if data:
            super().data_received(data)

    # -- the parser's callbacks -----------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_head_timer()  # on a kept connection the head's time starts at its first byte

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._heads += 1
        self._stop_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0
        self._stop_linger_timer()  # a body answered before it ended has ended: the next request is timed anew

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self._in_head and self._linger_timer is None and not self.transport.is_closing():
            # answered before its body ended: the rest is dropped as it comes, for a while
            self._linger_timer = self.loop.call_later(self.body_timeout, self._linger_over)

    # -- the bounds -----------------------------------------------------------------------------
    def _start_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False  # an answer is under way: the connection closes once it is sent
            return
        self._refuse(408, f"the request line and headers did not arrive within {self.header_timeout:g} s "
                          "(streamparse serve --header-timeout)")

    def _linger_over(self) -> None:
        self._linger_timer = None
        if not self._in_head:  # the body answered long ago has still not ended
            self.transport.close()

    def _stop_linger_timer(self) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with OpenAI error JSON and close the connection (nothing reaches the app)."""
        self._stop_head_timer()
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        logger.info("refused a request from %s: %d, %s", client, status, message)
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": status}}).encode()
        head = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n".encode()]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        self.transport.close()


def bounded_protocol(limits: Limits) -> type[asyncio.Protocol]:
    """The uvicorn HTTP protocol (`uvicorn.Config(http=...)`) with `limits`' bounds on request heads."""
    return type("BoundedHttp", (_BoundedHttp,), {"max_header_bytes": limits.max_header_bytes,
                                                  "header_timeout": limits.header_timeout,
                                                  "body_timeout": limits.body_timeout})
