"""The proxy's HTTP/1.1 client for its one upstream: keep-alive connections, a POST, and the answer's
body as it arrives, one piece per socket read.

Why not httpx: an engine sends each stream event as its own HTTP chunk, and httpx (through httpcore
and h11) hands them on one at a time through six layers of async iterators, about a fifth of the
proxy's CPU per event. Here one socket read (often many events when the proxy is busy) is undone
from the chunked coding with a few `bytes.find` calls and handed on whole, so the events it holds
are answered with one write. Cost: O(bytes) per read, a Python step per HTTP chunk, none per byte.
What it does not do, as an engine on the same network does not need it: redirects, proxies from
the environment (`HTTP_PROXY`), HTTP/2, compressed bodies (no `Accept-Encoding` is sent).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TypeVar
from urllib.parse import urlsplit

__all__ = ["HttpClient", "HttpError", "HttpResponse", "split_url", "within"]

_READ = 1 << 16           # bytes asked of the socket per read
_MAX_HEAD = 1 << 16       # bytes of a status line and headers
_MAX_SIZE_LINE = 1024     # bytes of a chunk-size line (with extensions)
_HEX = b"0123456789abcdefABCDEF"
_REST = 1.0               # seconds `HttpResponse.finish` waits for the end of a body
_T = TypeVar("_T")


async def within(seconds: float, awaitable: Awaitable[_T]) -> _T:
    """`await awaitable`, or `TimeoutError` after `seconds` (`asyncio.timeout` where there is one: it
    makes no task, where `wait_for` before Python 3.12 makes one per call)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)


class HttpError(Exception):
    """The upstream cannot be reached, broke the protocol, closed early or went silent; `kind` says which
    (`ConnectError`, `ConnectTimeout`, `ReadTimeout`, `WriteError`, `RemoteProtocolError`)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an `http://` or `https://` URL; anything else is a `ValueError`."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the upstream URL must be http://HOST[:PORT]/PATH or https://..., not {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"the upstream URL {url!r} has a port that is not a number from 0 to 65535") from None
    return parts.scheme, parts.hostname, port, parts.path or "/"


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def abort(self) -> None:
        self.writer.transport.abort()  # at once, no lingering: the upstream sees its client go


class _Chunked:
    """The chunked transfer coding undone incrementally: `feed(bytes)` gives the payload so far."""

    def __init__(self) -> None:
        self.held = b""
        self.left = 0          # payload bytes still to come in the current chunk
        self.crlf = False      # the CRLF after a chunk's payload is still to come
        self.trailer = False   # after the last chunk: trailer lines up to an empty one
        self.done = False

    def feed(self, data: bytes) -> bytes:
        held = self.held + data if self.held else data
        out = []
        pos, size = 0, len(held)
        while pos < size and not self.done:
            if self.left:
                piece = held[pos:pos + self.left]
                out.append(piece)
                pos += len(piece)
                self.left -= len(piece)
                if self.left:
                    break
                self.crlf = True
            if self.crlf:
                if size - pos < 2:
                    break
                if held[pos:pos + 2] != b"\r\n":
                    raise HttpError("RemoteProtocolError", "a chunk of the upstream's answer is longer than its size")
                pos += 2
                self.crlf = False
            end = held.find(b"\r\n", pos)
            if end < 0:
                if size - pos > _MAX_SIZE_LINE:
                    raise HttpError("RemoteProtocolError", "the upstream sent a chunk-size line that never ends")
                break
            line, pos = held[pos:end], end + 2
            if self.trailer:
                self.done = not line
                continue
            digits = line.split(b";", 1)[0].strip(b" \t")
            # Hex digits only (RFC 9112 7.1): `int(..., 16)` alone would also take "-5", "+5", "0x5", "5_0".
            if not 0 < len(digits) <= 16 or digits.strip(_HEX):
                raise HttpError("RemoteProtocolError", f"the upstream sent a bad chunk size {line[:40]!r}")
            self.left = int(digits, 16)
            self.trailer = not self.left
        self.held = held[pos:] if pos < size else b""
        return b"".join(out) if len(out) != 1 else out[0]


class HttpResponse:
    """An upstream answer whose head has been read; its body is read with `pieces` or `read`, and
    `aclose` always runs (a body not read to its end closes the connection, cancelling the request)."""

    def __init__(self, client: HttpClient, connection: _Connection, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers
        self._client = client
        self._connection: _Connection | None = connection
        self._chunked = _Chunked() if "chunked" in headers.get("transfer-encoding", "").lower() else None
        length = headers.get("content-length")
        self._left = int(length) if self._chunked is None and length is not None and _is_number(length) else None
        self._keep = headers.get("connection", "").lower() != "close" and (
            self._chunked is not None or self._left is not None)
        self._done = self._left == 0 or status in (204, 304)
        self._draining = False
        self.aborted = False  # by `abort`: the client went away

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives: what one socket read brought (never empty), until the body's end."""
        connection = self._connection
        while connection is not None and not self._done:
            data = await self._client.receive(connection.reader)
            if not data:
                if self._chunked is None and self._left is None:  # a body ended by closing
                    self._done = True
                    return
                raise HttpError("RemoteProtocolError", "the upstream closed the connection before its answer ended")
            if self._chunked is not None:
                data = self._chunked.feed(data)
                self._done = self._chunked.done
            elif self._left is not None:
                data = data[:self._left]
                self._left -= len(data)
                self._done = not self._left
            if data:
                yield data

    async def read(self, limit: int | None = None) -> bytes:
        """The body, or its first `limit` bytes (the rest is not read)."""
        body = bytearray()
        async for data in self.pieces():
            body += data
            if limit is not None and len(body) >= limit:
                return bytes(body[:limit])
        return bytes(body)

    def finish(self) -> None:
        """The caller has read all it needs (a stream's `[DONE]`): what is left of the body (its end
        marker, often in a later read) is read in the background, and the connection kept if the
        body ends within `_REST` seconds. Nothing waits for it; `aclose` then has nothing to do."""
        if self._done or not self._keep or self._connection is None or self._draining:
            return
        self._draining = True
        task = asyncio.get_running_loop().create_task(self._rest())
        self._client.draining.add(task)
        task.add_done_callback(self._client.draining.discard)

    async def _rest(self) -> None:
        try:
            await within(_REST, self.read())
        except (HttpError, TimeoutError):
            pass  # not kept: closed below
        finally:
            self._draining = False
            await self.aclose()

    def abort(self) -> None:
        """Drop the connection at once (the client went away): a read waiting on it ends, and the
        upstream sees its request cancelled."""
        self.aborted = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.abort()

    async def aclose(self) -> None:
        if self._draining:  # `finish` closes it
            return
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._done and self._keep and connection.usable():
            self._client.release(connection)
        else:
            connection.abort()


class HttpClient:
    """Keep-alive HTTP/1.1 connections to the upstream at `base_url` (at most `max_idle` kept idle)."""

    def __init__(self, base_url: str, timeout: float, connect_timeout: float = 10.0,
                 headers: Mapping[str, str] | None = None, max_idle: int = 64) -> None:
        self.scheme, self.host, self.port, self.path = split_url(base_url)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        default_port = 443 if self.scheme == "https" else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        authority = name if self.port == default_port else f"{name}:{self.port}"
        extra = "".join(f"{key}: {value}\r\n" for key, value in (headers or {}).items())
        self._head = f"Host: {authority}\r\nAccept: */*\r\n{extra}Content-Type: application/json\r\n"
        self._ssl = ssl.create_default_context() if self.scheme == "https" else None
        self._idle: list[_Connection] = []
        self.draining: set[asyncio.Task[None]] = set()  # answers read to their end in the background

    async def post(self, path: str, body: bytes) -> HttpResponse:
        """POST `body` (JSON) to `path` (below the base URL's path) and read the answer's head. A kept
        connection that ends before any byte of an answer (the upstream closed it while idle) is
        dropped and the request sent on the next, as HTTP clients do for kept connections."""
        target = self.path.rstrip("/") + "/" + path.lstrip("/")
        request = (f"POST {target} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n").encode() + body
        return await self._send(request)

    async def get(self, path: str) -> HttpResponse:
        """GET `path` (below the base URL's path), on a kept connection as `post` does."""
        target = self.path.rstrip("/") + "/" + path.lstrip("/")
        return await self._send(f"GET {target} HTTP/1.1\r\n{self._head}\r\n".encode())

    async def _send(self, request: bytes) -> HttpResponse:
        while self._idle:  # a kept connection the upstream closed meanwhile fails before any answer: next one
            connection = self._idle.pop()
            if connection.usable():
                try:
                    return await self._exchange(connection, request)
                except _Stale:
                    connection.abort()
        connection = await self._connect()
        try:
            return await self._exchange(connection, request)
        except _Stale:
            connection.abort()
            raise HttpError("RemoteProtocolError", "the upstream closed the connection without answering") from None

    async def receive(self, reader: asyncio.StreamReader) -> bytes:
        """What the socket holds, waiting at most the read timeout for it (b"" at its end)."""
        try:
            return await within(self.timeout, reader.read(_READ))
        except TimeoutError:
            raise HttpError("ReadTimeout", f"no byte from the upstream in {self.timeout:g} s") from None
        except OSError as error:
            raise HttpError("ReadError", f"{type(error).__name__}: {error}") from None

    def release(self, connection: _Connection) -> None:
        if len(self._idle) < self.max_idle:
            self._idle.append(connection)
        else:
            connection.abort()

    async def aclose(self) -> None:
        for task in list(self.draining):
            task.cancel()
        for connection in self._idle:
            connection.abort()
        self._idle.clear()

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await within(self.connect_timeout, asyncio.open_connection(
                self.host, self.port, ssl=self._ssl, limit=_MAX_HEAD, server_hostname=self.host if self._ssl else None))
        except TimeoutError:
            raise HttpError("ConnectTimeout", f"no connection in {self.connect_timeout:g} s") from None
        except OSError as error:  # ssl.SSLError is an OSError
            raise HttpError("ConnectError", str(error) or type(error).__name__) from None
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, request: bytes) -> HttpResponse:
        try:
            connection.writer.write(request)
            return await within(self.timeout, self._answer_head(connection))
        except asyncio.IncompleteReadError as error:
            connection.abort()
            if not error.partial:
                raise _Stale from None
            raise HttpError("RemoteProtocolError", "the upstream closed the connection inside its answer's head") \
                from None
        except asyncio.LimitOverrunError:
            connection.abort()
            raise HttpError("RemoteProtocolError", f"the upstream's answer head is over {_MAX_HEAD} bytes") from None
        except TimeoutError:
            connection.abort()
            raise HttpError("ReadTimeout", f"no answer from the upstream in {self.timeout:g} s") from None
        except (ConnectionResetError, BrokenPipeError):
            connection.abort()
            raise _Stale from None
        except OSError as error:
            connection.abort()
            raise HttpError("WriteError", f"{type(error).__name__}: {error}") from None
        except HttpError:
            connection.abort()
            raise


    async def _answer_head(self, connection: _Connection) -> HttpResponse:
        await connection.writer.drain()
        while True:  # an interim 1xx answer is skipped
            status, headers = _head(await connection.reader.readuntil(b"\r\n\r\n"))
            if not 100 <= status < 200:
                return HttpResponse(self, connection, status, headers)


class _Stale(Exception):
    """A connection closed before any byte of an answer (a kept one the upstream dropped)."""


def _is_number(text: str) -> bool:
    """ASCII digits only: `str.isdigit` also takes "²" (a latin-1 byte of a head), which `int` refuses."""
    return text.isascii() and text.isdigit()


def _head(raw: bytes) -> tuple[int, dict[str, str]]:
    """The status and headers (lower-case names; a repeated one keeps its last value) of an answer head."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not _is_number(code):
        raise HttpError("RemoteProtocolError", f"the upstream's answer starts {lines[0][:60]!r}, not an HTTP/1 status")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    return int(code), headers
