"""Several processes serving one port: `streamparse serve --workers N`.

The proxy holds no state between requests, so N processes can answer on one port with nothing
shared: the parent forks them after the template, tokenizer and options are loaded (each worker
starts with them ready, and compiles and caches a request's tools itself), and each listens on its
own `SO_REUSEPORT` socket of the same address, among which the Linux kernel spreads new connections
evenly. A request, and so its stream, is served by the process that accepted its connection. The
parent only supervises: SIGTERM or SIGINT is passed to every worker (each finishes as one server
does), a worker that dies is replaced, and one that fails its own start stops them all.

A worker tells the parent it serves by writing one byte to a pipe of its own, at its first tick
(`serve_on`'s `tick`, which uvicorn awaits once it serves and then about every second): a worker
that exits without having written it failed as it started (a bad address, a missing file), which
no replacement would fix; one that dies of a signal (the OOM killer, `kill -9`), or after it
served, is replaced, however soon. A worker never outlives its parent: the kernel sends it SIGTERM
when the parent dies (`PR_SET_PDEATHSIG`, Linux), and each tick checks its parent is still the one
that forked it (as gunicorn's workers do), so no orphan keeps serving the port, with the old API
key, beside a server started after it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from types import FrameType

__all__ = ["Tick", "default_workers", "listening_socket", "run_workers", "workers_supported"]

logger = logging.getLogger("streamparse")
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal the kernel sends this process when its parent ends
_REPLACE_PAUSE = 1.0  # seconds before replacing a worker that died before it served: no fork loop


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


Tick = Callable[[], Awaitable[None]]


class _Watch:
    """A worker's tick: the first says it serves (one byte to the parent's pipe); each checks that the
    parent that forked it still lives, and when it is gone stops the worker as SIGTERM does."""

    def __init__(self, parent: int, ready: int) -> None:
        self.parent = parent
        self.ready: int | None = ready
        self.orphaned = False

    async def __call__(self) -> None:
        if self.ready is not None:
            os.write(self.ready, b"1")
            os.close(self.ready)
            self.ready = None
        if not self.orphaned and os.getppid() != self.parent:
            self.orphaned = True
            logger.error("worker %d: its parent %d ended, stopping", os.getpid(), self.parent)
            os.kill(os.getpid(), signal.SIGTERM)


def _end_with(parent: int) -> None:
    """Ask the kernel for SIGTERM when the parent ends (Linux), and end now if it already has."""
    with contextlib.suppress(OSError, AttributeError):  # no libc prctl: the ticks still check
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
    if os.getppid() != parent:  # it ended before the request above was made
        os._exit(0)


def _was_ready(reader: int) -> bool:
    """Whether an ended worker wrote its byte (its write end is closed everywhere: this never waits)."""
    try:
        return os.read(reader, 1) == b"1"
    finally:
        os.close(reader)


def run_workers(serve_on: Callable[[socket.socket, Tick], bool], host: str, port: int, workers: int) -> int:
    """Run `serve_on(socket, tick)` (True when the server started; it awaits `tick()` once it serves and
    then about every second) in `workers` forked processes, each on its own listening socket of
    host:port, until SIGTERM or SIGINT; the exit status for the command."""
    listening_socket(host, port).close()  # a taken port fails here, once, before any worker starts
    parent = os.getpid()
    children: dict[int, int] = {}  # pid: the read end of its readiness pipe
    state = {"stopping": False, "failed": False}

    def start() -> None:
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            status = 3
            try:
                os.close(reader)
                for other in children.values():  # its siblings' pipes are the parent's to read
                    os.close(other)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _end_with(parent)
                status = 0 if serve_on(listening_socket(host, port), _Watch(parent, writer)) else 3
            except BaseException:  # a worker's last word, then its exit status
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(status)
        os.close(writer)
        children[pid] = reader

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
            reader = children.pop(pid, None)
            if reader is None:
                continue
            served = _was_ready(reader)
            if state["stopping"]:
                continue
            if os.WIFSIGNALED(status):
                logger.error("worker %d was killed by signal %d: starting another", pid, os.WTERMSIG(status))
            elif served:
                logger.error("worker %d ended (status %d): starting another", pid, os.WEXITSTATUS(status))
            else:
                logger.error("worker %d failed as it started (status %d): stopping every worker", pid,
                             os.WEXITSTATUS(status))
                state["failed"] = True
                stop(signal.SIGTERM, None)
                continue
            if not served:
                time.sleep(_REPLACE_PAUSE)
            if not state["stopping"]:
                start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for reader in children.values():
            os.close(reader)
    return 1 if state["failed"] else 0
