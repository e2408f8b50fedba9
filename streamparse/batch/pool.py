"""The worker processes of `ordered_map`: one socket pair each, driven from the caller's thread alone.

`concurrent.futures.ProcessPoolExecutor` sends work through a queue that a thread of its own feeds
and returns it through futures that a manager thread fills: the parent, whose time the workers
share, paid for those threads, their futures and the GIL passed between them on every chunk. Here
the parent holds one non-blocking socket to each worker and moves whatever bytes can move while it
waits for the next result (`Pool.ordered`); a worker reads a chunk, runs it, writes the results back,
blocking, one chunk after another. The send buffers are made large enough for a chunk where the OS
allows, so a worker finds its next chunk already there and writes its results without waiting for
the parent to read them. (Measured with the messages built cheaper too: the parent's CPU a row of
`parse_many(workers=2)` went from 13.6-16.6 µs to 10.6-11.1; bench.throughput, 100,000 hermes rows.)

A frame is its length (8 bytes, little-endian) and its bytes: a pickled chunk to a worker; from a
worker, a tag byte and either the chunk's results as one `marshal` blob or its error pickled.
"""

from __future__ import annotations

import gc
import marshal
import multiprocessing
import pickle
import selectors
import socket
import struct
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from ..options import Options
from .rows import collector_paused

FRAME = struct.Struct("<Q")  # the length of the frame that follows
RESULTS, FAILED = b"r", b"f"  # the tag of a worker's frame
SEND_BUFFER = 4 << 20  # bytes a socket may hold unread (the OS may cap it): 256 mixed outputs are ~0.6 MB
QUEUED_PER_WORKER = 2  # chunks a worker holds at a time: the one it runs and the next, already sent
STOP_WAITING = 10.0  # seconds a worker that was told to stop has to end before it is terminated

Function = Callable[[Options, Any], Any]
Item = TypeVar("Item")
Result = TypeVar("Result")


class WorkerTraceback(Exception):
    """The traceback of an error raised in a worker process: the `__cause__` of that error here."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


def _enlarge_buffers(sock: socket.socket) -> None:
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        with suppress(OSError):  # an OS that refuses: the socket keeps its own size
            sock.setsockopt(socket.SOL_SOCKET, option, SEND_BUFFER)


# ----------------------------------------------------------------------------- the worker side


def _receive(sock: socket.socket, size: int) -> bytearray | None:
    """Exactly `size` bytes from the parent, or None when it has closed its end (no more work)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = sock.recv_into(view[got:])
        if not count:
            return None
        got += count
    return buffer


def _failure(error: Exception) -> bytes:
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        return pickle.dumps((error, trace))
    except Exception:  # an error that cannot pickle is sent as its text
        return pickle.dumps((RuntimeError(f"{type(error).__name__}: {error}"), trace))


def serve(sock: socket.socket, function: Function, options: Options, inherited: list[socket.socket]) -> None:
    """A worker process: run each chunk the parent sends, send back its results, until the parent closes.

    `inherited`: the parent's ends of the sockets, copied into this process by a fork; closed here, so
    that a worker that ends is seen to end, and a parent that ends is seen by every worker."""
    for other in inherited:
        other.close()
    # A fork copies the parent's objects (its collector paused by parse_many): the collector here
    # leaves them alone, or each of its full passes would walk, and write, every one of them (the
    # caller's earlier results too), a copy of each page made on the way (measured: 100,000 hermes rows
    # on 2 workers, the caller holding an earlier run's results: 26,400 -> 32,600 rows/s).
    gc.freeze()
    gc.enable()
    try:
        while (head := _receive(sock, FRAME.size)) is not None:
            frame = _receive(sock, FRAME.unpack(head)[0])
            if frame is None:
                return
            try:
                tag, reply = RESULTS, marshal.dumps(run_chunk_here(function, pickle.loads(frame), options))
            except Exception as error:
                tag, reply = FAILED, _failure(error)
            sock.sendall(FRAME.pack(len(reply) + 1) + tag)
            sock.sendall(reply)
    except (KeyboardInterrupt, OSError):  # interrupted, or the parent is gone: nothing to report to
        return
    finally:
        sock.close()


def run_chunk_here(function: Callable[[Options, Item], Result], items: list[Item], options: Options) -> list[Result]:
    """`function(options, item)` for a chunk, with automatic collection paused while it runs.

    Parsing leaves a little cyclic garbage, so the collector cannot stay off for a whole input; paused
    per chunk, it runs about once a chunk instead of every 700 allocations, and a long input's results,
    kept by the caller, are rescanned by its older generations that much less often (measured: a
    tenth to a quarter of the CPU of one process parsing and keeping 20,000 outputs)."""
    with collector_paused():
        return [function(options, item) for item in items]


# ----------------------------------------------------------------------------- the caller side


class _Worker:
    """One worker process and this end of its socket: frames go out and come in as far as they can."""

    def __init__(self, process: Any, sock: socket.socket) -> None:
        self.process = process
        self.sock = sock
        self.chunks: deque[tuple[int, list[Any]]] = deque()  # the chunks it holds, numbered, in the order sent
        self.unsent: deque[memoryview] = deque()
        self.head = bytearray(FRAME.size)
        self.frame: bytearray | None = None  # the frame being read, once its length is known
        self.got = 0  # bytes of the head, then of the frame, read so far

    def write(self) -> bool:
        """Send what the socket takes now; True when everything is sent."""
        try:
            while self.unsent:
                view = self.unsent[0]
                sent = self.sock.send(view)
                if sent < len(view):
                    self.unsent[0] = view[sent:]
                    return False
                self.unsent.popleft()
        except BlockingIOError:
            return False
        except OSError:  # the worker's end is closed: it has ended
            self.died()
        return True

    def read(self) -> Iterator[tuple[int, list[Any], bytearray]]:
        """The frames complete now, each after the number and the items of its chunk."""
        while True:
            into = memoryview(self.head if self.frame is None else self.frame)[self.got:]
            try:
                count = self.sock.recv_into(into)
            except BlockingIOError:
                return
            except OSError:
                self.died()
            if not count:
                self.died()
            self.got += count
            if count < len(into):
                continue
            if self.frame is None:
                self.frame, self.got = bytearray(FRAME.unpack(self.head)[0]), 0
                continue
            frame, self.frame, self.got = self.frame, None, 0
            yield *self.chunks.popleft(), frame

    def died(self) -> NoReturn:
        from concurrent.futures.process import BrokenProcessPool  # (what a ProcessPoolExecutor raised)

        self.process.join(1.0)
        raise BrokenProcessPool(f"a worker process ended unexpectedly (exit code {self.process.exitcode}) "
                                "while chunks of work were in it")


def _results(frame: bytearray) -> memoryview:
    """A worker's frame as the results it holds, or its error raised here."""
    if frame[:1] == RESULTS:
        return memoryview(frame)[1:]
    try:
        error, trace = pickle.loads(memoryview(frame)[1:])
    except Exception as unreadable:  # an error that pickles but does not unpickle
        error, trace = RuntimeError(f"a worker's error could not be read here ({unreadable})"), ""
    raise error from WorkerTraceback(trace)


class Pool:
    """`workers` processes running `function(options, item)` over chunks; `ordered` gives the results."""

    def __init__(self, function: Function, options: Options, workers: int) -> None:
        context = multiprocessing.get_context()
        forked = context.get_start_method() == "fork"
        self.selector = selectors.DefaultSelector()
        self.workers: list[_Worker] = []
        try:
            for number in range(workers):
                ours, theirs = socket.socketpair()
                for sock in (ours, theirs):
                    _enlarge_buffers(sock)
                inherited = [ours, *(worker.sock for worker in self.workers)] if forked else []
                process = context.Process(target=serve, args=(theirs, function, options, inherited),
                                          name=f"streamparse-worker-{number}", daemon=True)
                try:
                    process.start()
                except BaseException:
                    ours.close()
                    raise
                finally:
                    theirs.close()
                ours.setblocking(False)
                worker = _Worker(process, ours)
                self.workers.append(worker)
                self.selector.register(ours, selectors.EVENT_READ, worker)
        except BaseException:
            self.close(abandon=True)
            raise

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close(abandon=kind is not None)

    def _send(self, worker: _Worker, number: int, chunk: list[Any]) -> None:
        payload = pickle.dumps(chunk, pickle.HIGHEST_PROTOCOL)
        worker.chunks.append((number, chunk))
        worker.unsent.extend((memoryview(FRAME.pack(len(payload))), memoryview(payload)))
        if not worker.write():
            self.selector.modify(worker.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, worker)

    def _wait(self) -> Iterator[tuple[int, list[Any], bytearray]]:
        """Move bytes until at least one frame is complete; the frames completed."""
        for key, events in self.selector.select():
            worker: _Worker = key.data
            if events & selectors.EVENT_WRITE and worker.write():
                self.selector.modify(worker.sock, selectors.EVENT_READ, worker)
            if events & selectors.EVENT_READ:
                yield from worker.read()

    def ordered(self, chunks: Iterator[list[Item]], ahead: int) -> Iterator[tuple[list[Item], memoryview]]:
        """Each chunk with its results (a `marshal` blob), in the order of `chunks`; at most `ahead`
        chunks are sent or held here at a time, whichever worker holds fewest taking the next."""
        done: dict[int, tuple[list[Item], bytearray]] = {}
        sent = taken = 0
        more = True
        while True:
            while more and sent - taken < ahead:
                worker = min(self.workers, key=lambda worker: len(worker.chunks))
                if len(worker.chunks) >= QUEUED_PER_WORKER:
                    break
                chunk = next(chunks, None)
                if chunk is None:
                    more = False
                    break
                self._send(worker, sent, chunk)
                sent += 1
            if taken in done:
                chunk, frame = done.pop(taken)
                yield chunk, _results(frame)
                taken += 1
            elif taken == sent:
                return
            else:
                for number, chunk, frame in self._wait():
                    done[number] = chunk, frame

    def close(self, abandon: bool = False) -> None:
        """Close the sockets, which tells each worker to stop, and wait for them to end (`abandon`:
        terminate them at once)."""
        for worker in self.workers:
            self.selector.unregister(worker.sock)
            worker.sock.close()
            if abandon:
                worker.process.terminate()
        for worker in self.workers:
            worker.process.join(STOP_WAITING)
            if worker.process.exitcode is None:  # pragma: no cover - a worker that does not stop
                worker.process.terminate()
                worker.process.join()
        self.selector.close()
