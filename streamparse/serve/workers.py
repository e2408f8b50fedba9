"""Several processes serving one port: `streamparse serve --workers N`.

The proxy holds no state between requests, so N processes can answer on one port with nothing
shared: the parent forks them after the template, tokenizer and options are loaded (each worker
starts with them ready, and compiles and caches a request's tools itself), and each listens on its
own `SO_REUSEPORT` socket of the same address, among which the Linux kernel spreads new connections
evenly. A request, and so its stream, is served by the process that accepted its connection. The
parent only supervises: SIGTERM or SIGINT is passed to every worker (each finishes as one server
does), a worker that dies is replaced, and one that fails as it starts stops them all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from types import FrameType

__all__ = ["default_workers", "listening_socket", "run_workers", "workers_supported"]

logger = logging.getLogger("streamparse")
_EARLY = 5.0  # seconds: a worker that ends sooner failed as it started (a bad address, a missing file)


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def workers_supported() -> bool:
    """Whether this platform can run several workers on one port (fork and SO_REUSEPORT)."""
    return hasattr(os, "fork") and hasattr(socket, "SO_REUSEPORT") and sys.platform.startswith("linux")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on host:port that other workers' sockets may share (`SO_REUSEPORT`)."""
    family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                            flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def run_workers(serve_on: Callable[[socket.socket], bool], host: str, port: int, workers: int) -> int:
    """Run `serve_on(socket)` (True when the server started) in `workers` forked processes, each on its
    own listening socket of host:port, until SIGTERM or SIGINT; the exit status for the command."""
    listening_socket(host, port).close()  # a taken port fails here, once, before any worker starts
    children: dict[int, float] = {}
    state = {"stopping": False, "failed": False}

    def start() -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            status = 3
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                status = 0 if serve_on(listening_socket(host, port)) else 3
            except BaseException:  # a worker's last word, then its exit status
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(status)
        children[pid] = time.monotonic()

    def stop(signum: int, frame: FrameType | None) -> None:
        state["stopping"] = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for _ in range(workers):
            start()
        print(f"streamparse serve: {workers} workers on {host}:{port} (pids {', '.join(map(str, children))})",
              file=sys.stderr, flush=True)
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            started = children.pop(pid, None)
            if started is None or state["stopping"]:
                continue
            if time.monotonic() - started < _EARLY:
                logger.error("worker %d ended as it started (status %d): stopping every worker", pid, status)
                state["failed"] = True
                stop(signal.SIGTERM, None)
            else:
                logger.error("worker %d ended (status %d): starting another", pid, status)
                start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if state["failed"] else 0
