"""One request's record: its id (sent back as `X-Request-Id`), status, times and tokens; one log line
and the metrics when it ends.

`RequestLog` is the outermost ASGI middleware, so every answer, a 401 or a 413 too, gets an id, a log
line and a count. The app adds what only it knows (tokens, first token, upstream errors) to the
`RequestRecord` in `request.state.record`. A stream ends when its last byte is sent or the client left.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.settle import loggable
from .access import ASGIApp, Message, Receive, Scope, Send
from .metrics import Metrics

__all__ = ["RequestLog", "RequestRecord", "configure_logging", "request_id"]

logger = logging.getLogger("streamparse.requests")
# A client's own id is kept when it is short and plain (safe in a log line and a header); else one is made.
_CLIENT_ID = re.compile(rb"[A-Za-z0-9._:/+=-]{1,64}")
_PATHS = frozenset({"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/api/chat",
                    "/api/tags", "/api/show", "/api/version", "/v1/models", "/health", "/metrics",
                    "/apply-template", "/tokenize", "/detokenize"})


def configure_logging(level: str) -> None:
    """The `streamparse` loggers (a line per request, warnings, rejected calls) to stderr at `level`
    (`--log-level`), uvicorn's way of writing them, and not again through the root logger."""
    root = logging.getLogger("streamparse")
    if not any(getattr(handler, "streamparse_serve", False) for handler in root.handlers):
        handler = logging.StreamHandler()
        handler.streamparse_serve = True  # type: ignore[attr-defined]
        handler.setFormatter(_OneLine("%(levelname)s:     %(message)s"))
        root.addHandler(handler)
    for each in root.handlers:
        if getattr(each, "streamparse_serve", False):
            each.setLevel(level.upper())
    root.setLevel(min(logging.INFO, logging.getLevelName(level.upper())))
    root.propagate = False


def _lines_wanted() -> bool:
    """Whether a request's INFO line reaches a handler that writes it. `logger.isEnabledFor` cannot
    say: the rejected-call counter (`Metrics.count_rejected_calls`) keeps the `streamparse` logger at
    INFO for itself, and with `--log-level warning` each request built a line nobody wrote."""
    current: logging.Logger | None = logger
    if not logger.isEnabledFor(logging.INFO):
        return False
    while current is not None:
        for handler in current.handlers:
            if handler.level <= logging.INFO and not getattr(handler, "counts_only", False):
                return True
        current = current.parent if current.propagate else None
    return False  # (without handlers Python writes through `logging.lastResort`, at WARNING)


class _OneLine(logging.Formatter):
    """Each record's line with what is not printable in it escaped (`engine.settle.loggable`): every
    value a request or the model brought (a tool name, an error's words) stays on its one line, so no
    log line can be forged or a terminal restyled. A traceback, added after, keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return loggable(super().formatMessage(record))


def request_id(sent: bytes | None) -> str:
    """The id of a request: the client's `X-Request-Id` when it is 1-64 of `A-Za-z0-9._:/+=-`, else a new one."""
    if sent is not None and _CLIENT_ID.fullmatch(sent):
        return sent.decode("ascii")
    return "req-" + secrets.token_hex(8)


@dataclass
class RequestRecord:
    """What one request did, filled in as it goes."""

    id: str
    started: float = field(default_factory=time.perf_counter)
    status: int = 0
    first_token: float | None = None   # seconds from arrival to the first generated text or call (streams)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    upstream_error: str | None = None  # unreachable, status, stream, answer

    def mark_first_token(self) -> None:
        if self.first_token is None:
            self.first_token = time.perf_counter() - self.started

    def add_usage(self, usage: Any) -> None:
        """Take the token counts of an upstream `usage` object (ignored when it is not one)."""
        if not isinstance(usage, Mapping):
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and not isinstance(prompt, bool):
            self.prompt_tokens = prompt
        if isinstance(completion, int) and not isinstance(completion, bool):
            self.completion_tokens = completion


class RequestLog:
    """ASGI middleware: gives each HTTP request a `RequestRecord` (in `scope["state"]["record"]`), adds
    `X-Request-Id` to its answer, counts open streams, and at the end logs one line and updates `metrics`."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = next((value for name, value in scope["headers"] if name == b"x-request-id"), None)
        record = RequestRecord(request_id(sent))
        scope.setdefault("state", {})["record"] = record
        header = (b"x-request-id", record.id.encode("ascii"))
        streaming = False

        async def send_with_id(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                record.status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
                streaming = any(name == b"content-type" and value.startswith(b"text/event-stream")
                                for name, value in message["headers"])
                if streaming:
                    self.metrics.streams_open.inc()
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if streaming:
                self.metrics.streams_open.dec()
            self._finish(scope, record, streaming)

    def _finish(self, scope: Scope, record: RequestRecord, streaming: bool) -> None:
        duration = time.perf_counter() - record.started
        status = record.status or 500  # the app raised before answering: uvicorn answers 500
        path = scope["path"] if scope["path"] in _PATHS else "other"
        metrics = self.metrics
        metrics.requests.labels(path, str(status)).inc()
        metrics.duration.observe(duration)
        if streaming and record.first_token is not None:
            metrics.first_token.observe(record.first_token)
        if record.prompt_tokens is not None:
            metrics.prompt_tokens.inc(record.prompt_tokens)
        if record.completion_tokens is not None:
            metrics.completion_tokens.inc(record.completion_tokens)
        if record.upstream_error is not None:
            metrics.upstream_errors.labels(record.upstream_error).inc()
        if _lines_wanted():
            parts = [f"request_id={record.id}", f"method={scope.get('method', '')}", f"path={path}",
                     f"status={status}", f"duration_ms={duration * 1000:.1f}"]
            if streaming:
                parts.append("stream=true")
            if record.first_token is not None:
                parts.append(f"first_token_ms={record.first_token * 1000:.1f}")
            if record.prompt_tokens is not None or record.completion_tokens is not None:
                parts.append(f"prompt_tokens={record.prompt_tokens} completion_tokens={record.completion_tokens}")
            if record.upstream_error is not None:
                parts.append(f"upstream_error={record.upstream_error}")
            logger.info(" ".join(parts))
