"""What `GET /metrics` shows, in Prometheus' text format (`prometheus_client`).

With several worker processes each keeps its own values, so a scrape reaching one worker would see a
part: when `PROMETHEUS_MULTIPROC_DIR` is set (`streamparse serve --workers N` with N > 1 sets it to a
directory of its own for the run, removed at exit) the values go to files there and every scrape sums
every worker's (prometheus_client's multiprocess mode; the open-streams gauge counts live workers only).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

__all__ = ["CONTENT_TYPE", "MULTIPROC_ENV", "Metrics", "shared_between_workers"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_FIRST_TOKEN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_REJECTED = "rejected tool call:"  # how streamparse.engine.settle logs each rejected call (status first)


class Metrics:
    """The proxy's counters, gauge and histograms; one per app. `multiprocess`: values in the files of
    `PROMETHEUS_MULTIPROC_DIR` (default: whether it is set), every worker's summed at each scrape."""

    def __init__(self, format: str, multiprocess_mode: bool | None = None) -> None:
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV)) if multiprocess_mode is None else multiprocess_mode
        if self.multiprocess and os.environ.get(MULTIPROC_ENV):
            # prometheus_client picks file-backed values when it is imported; a worker forked from a parent
            # that imported it before the directory was set picks them here instead.
            values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
        # In multiprocess mode values live in files, not in a registry: a registry is made per scrape.
        self.registry = None if self.multiprocess else CollectorRegistry()
        where: dict[str, Any] = {"registry": self.registry}
        self.format = format
        self.requests = Counter("streamparse_requests", "HTTP requests answered, by path and status",
                                ["path", "status"], **where)
        self.streams_open = Gauge("streamparse_streams_open", "streamed answers being sent now",
                                  multiprocess_mode="livesum", **where)
        self.first_token = Histogram("streamparse_time_to_first_token_seconds",
                                     "from a streamed request's arrival to its first generated text or call",
                                     buckets=_FIRST_TOKEN_BUCKETS, **where)
        self.duration = Histogram("streamparse_request_duration_seconds",
                                  "from a request's arrival to the end of its answer (a stream's last byte)",
                                  buckets=_DURATION_BUCKETS, **where)
        self.upstream_errors = Counter("streamparse_upstream_errors",
                                       "upstream failures: unreachable, an error status, a broken stream or answer",
                                       ["kind"], **where)
        self.rejected_calls = Counter("streamparse_rejected_calls", "tool calls the model wrote that were rejected",
                                      ["status", "format"], **where)
        self.prompt_tokens = Counter("streamparse_prompt_tokens", "prompt tokens, from the upstream's usage", **where)
        self.completion_tokens = Counter("streamparse_completion_tokens",
                                         "completion tokens, from the upstream's usage", **where)
        self.preparations = Counter("streamparse_preparations",
                                    "requests prepared (rendered, tokenized, tools compiled), by where: on the "
                                    "event loop within its 5 ms budget, or in a thread", ["on"], **where)
        self._counter = _RejectedCounter(self)

    def exposition(self) -> bytes:
        """The text a scrape gets."""
        if self.registry is not None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def count_rejected_calls(self, logger: logging.Logger) -> None:
        """Count the rejected calls `logger` (the `streamparse` logger) reports, by status."""
        if self._counter not in logger.handlers:
            logger.addHandler(self._counter)
        if not logger.isEnabledFor(logging.INFO):
            logger.setLevel(logging.INFO)  # the engine only logs a rejected call when INFO is on

    def close(self) -> None:
        """Stop counting; in multiprocess mode, drop this process from the live gauge."""
        logging.getLogger("streamparse").removeHandler(self._counter)
        if self.multiprocess:
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


class _RejectedCounter(logging.Handler):
    """Counts the engine's one log line per rejected call (its first argument is the status)."""

    counts_only = True  # writes nothing: a request's log line is not built for it (`requests._lines_wanted`)

    def __init__(self, metrics: Metrics) -> None:
        super().__init__(logging.INFO)
        self.metrics = metrics

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, str) and record.msg.startswith(_REJECTED) and record.args:
            status = record.args[0] if isinstance(record.args, tuple) else "unknown"
            self.metrics.rejected_calls.labels(str(status), self.metrics.format).inc()


@contextmanager
def shared_between_workers() -> Iterator[str]:
    """The directory of the workers' metrics while the block runs: `PROMETHEUS_MULTIPROC_DIR` when it is
    set (kept), else one of this run's own, set in it (worker processes started in the block inherit
    it) and removed afterwards."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        yield given
        return
    directory = tempfile.mkdtemp(prefix="streamparse-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)
