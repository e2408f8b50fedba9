"""The process pool of the batch path: `ordered_map` runs a module-level function over many items on
every core, in input order, in bounded memory.

Work goes to a `ProcessPoolExecutor` in chunks of items, so the cost of moving data between
processes is paid per chunk, not per item. A worker sends a chunk's results back as one `marshal`
blob of plain data (no pickled objects): the parent, whose time the workers share, only decodes it.
At most a few chunks per worker are in flight at any time, so an input of millions of items streams
through. Each worker receives the checked `Options` once, when it starts. The worker count is capped
by the cores and by the work: no more workers than chunks, and one chunk is run in this process.
"""

from __future__ import annotations

import marshal
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from functools import partial
from itertools import islice
from typing import Any, TypeVar

from ..options import Options
from .rows import collector_paused

Item = TypeVar("Item")
Result = TypeVar("Result")

# Items per task, measured (bench.throughput, 2 workers, mixed lengths of 100 to 10,000 characters):
# 64 leaves a fixed cost per task visible, 1,024 leaves a worker idle at the end of a short input.
CHUNK_SIZE = 256
IN_FLIGHT_PER_WORKER = 3  # chunks submitted ahead per worker: keeps every core busy, memory bounded


def every_core() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def check_workers(workers: int | None) -> int:
    """`workers` as a count: None is every core; anything but a positive int is a `ValueError`."""
    if workers is None:
        return every_core()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int or None (every core); got {workers!r}")
    return workers


def check_picklable(options: Options) -> None:
    """Workers in other processes receive the options pickled: say which one cannot be, and what to do."""
    for name in ("id_factory", "tools"):
        value = getattr(options, name)
        try:
            pickle.dumps(value)
        except Exception as error:  # pickle raises PicklingError, AttributeError, TypeError...
            hint = ("pass a function defined at module level (not a lambda or a local function)"
                    if name == "id_factory" else "pass plain JSON-like tool definitions")
            raise ValueError(f"{name} cannot be sent to worker processes ({error}); {hint}, "
                             f"or use workers=1 to parse in this process") from None


def run_chunk_here(function: Callable[[Options, Item], Result], items: list[Item], options: Options) -> list[Result]:
    """`function(options, item)` for a chunk, with automatic collection paused while it runs.

    Parsing leaves a little cyclic garbage, so the collector cannot stay off for a whole input; paused
    per chunk, it runs about once a chunk instead of every 700 allocations, and a long input's results,
    kept by the caller, are rescanned by its older generations that much less often (measured: a
    tenth to a quarter of the CPU of one process parsing and keeping 20,000 outputs)."""
    with collector_paused():
        return [function(options, item) for item in items]


# ----------------------------------------------------------------------------- the worker side

_worker: dict[str, Options] = {}  # this worker process's options, set once when it starts


def _start_worker(options: Options) -> None:
    _worker["options"] = options


def _run_chunk(function: Callable[[Options, Any], Any], items: list[Any]) -> bytes:
    """One chunk's results as one `marshal` blob (plain str/bytes/int/float/None/bool/list/tuple/dict)."""
    options = _worker.get("options")
    if options is None:  # pragma: no cover - only if a pool is built without the initializer
        raise RuntimeError("streamparse worker started without its options")
    return marshal.dumps(run_chunk_here(function, items, options))


# ----------------------------------------------------------------------------- the caller side


def ordered_map(
    function: Callable[[Options, Item], Result],
    items: Iterable[Item],
    options: Options,
    workers: int,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[Result]:
    """`function(options, item)` for every item, in input order; on up to `workers` processes.

    `function` must be defined at module level (it is sent to the workers by reference) and return
    what `marshal` can send: plain data, no objects. The processes started are capped by the cores
    and by the chunks of work there are; one chunk is run in this process."""
    source = iter(items)
    workers = min(workers, every_core())
    ahead: list[list[Item]] = []
    if workers > 1:
        for _ in range(workers):
            chunk = list(islice(source, chunk_size))
            if not chunk:
                break
            ahead.append(chunk)
        workers = min(workers, len(ahead))
    if workers <= 1:
        for chunk in ahead:
            yield from run_chunk_here(function, chunk, options)
        while chunk := list(islice(source, chunk_size)):
            yield from run_chunk_here(function, chunk, options)
        return
    check_picklable(options)
    task = partial(_run_chunk, function)
    pending: deque[Future[bytes]] = deque()
    with ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(options,)) as pool:
        try:
            pending.extend(pool.submit(task, chunk) for chunk in ahead)
            del ahead
            while True:
                while len(pending) < workers * IN_FLIGHT_PER_WORKER:
                    chunk = list(islice(source, chunk_size))
                    if not chunk:
                        break
                    pending.append(pool.submit(task, chunk))
                if not pending:
                    return
                yield from marshal.loads(pending.popleft().result())
        finally:
            for future in pending:
                future.cancel()


