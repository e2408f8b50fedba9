"""The process pool of the batch path: `ordered_map` runs a module-level function over many items on
every core, in input order, in bounded memory.

Work goes to the worker processes of `batch.pool` in chunks of items, so the cost of moving data between
processes is paid per chunk, not per item. A worker sends a chunk's results back as one `marshal`
blob of plain data (no pickled objects): the parent, whose time the workers share, only decodes it.
At most a few chunks per worker are in flight at any time, so an input of millions of items streams
through. Each worker receives the checked `Options` once, when it starts. The worker count is capped
by the cores and by the work: no more workers than chunks, and one chunk is run in this process.
"""

from __future__ import annotations

import marshal
import multiprocessing
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import TypeVar

from ..options import Options
from .pool import Pool, run_chunk_here

Item = TypeVar("Item")
Result = TypeVar("Result")

# Items per task, measured (bench.throughput, 2 workers, mixed lengths of 100 to 10,000 characters):
# 64 leaves a fixed cost per task visible, 1,024 leaves a worker idle at the end of a short input.
CHUNK_SIZE = 256
IN_FLIGHT_PER_WORKER = 3  # chunks sent or held ahead per worker: keeps every core busy, memory bounded


def chunks_of(items: Iterator[Item], size: int) -> Iterator[list[Item]]:
    """`items` in lists of `size` (the last one shorter)."""
    while chunk := list(islice(items, size)):
        yield chunk


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


_PICKLE_HINTS = {
    "id_factory": "pass a function defined at module level (not a lambda or a local function)",
    "tools": "pass plain JSON-like tool definitions",
    "format": "register the format with streamparse.register_format in a module the workers import and pass its name",
}


def check_picklable(options: Options) -> None:
    """Workers in other processes receive the options pickled: say which one cannot be, and what to do."""
    # A format passed as a `FormatSpec` is sent too where the workers do not start as forks of this process.
    spawned = not isinstance(options.format, str) and multiprocessing.get_start_method() != "fork"
    for name in ("id_factory", "tools", *(("format",) if spawned else ())):
        value = getattr(options, name)
        try:
            pickle.dumps(value)
        except Exception as error:  # pickle raises PicklingError, AttributeError, TypeError...
            hint = _PICKLE_HINTS[name]
            raise ValueError(f"{name} cannot be sent to worker processes ({error}); {hint}, "
                             f"or use workers=1 to parse in this process") from None


# ----------------------------------------------------------------------------- the caller side


def ordered_chunks(
    function: Callable[[Options, Item], Result],
    items: Iterable[Item],
    options: Options,
    workers: int,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[tuple[list[Item], list[Result]]]:
    """Each chunk of `items` with `function(options, item)` of every item in it, in input order; on up
    to `workers` processes.

    `function` must be defined at module level (it is sent to each worker once, by reference) and
    return what `marshal` can send: plain data, no objects. The processes started are capped by the
    cores and by the chunks of work there are; one chunk is run in this process."""
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
        for chunk in chain(ahead, chunks_of(source, chunk_size)):
            yield chunk, run_chunk_here(function, chunk, options)
        return
    check_picklable(options)
    with Pool(function, options, workers) as pool:
        for chunk, results in pool.ordered(chain(ahead, chunks_of(source, chunk_size)), workers * IN_FLIGHT_PER_WORKER):
            yield chunk, marshal.loads(results)


def ordered_map(
    function: Callable[[Options, Item], Result],
    items: Iterable[Item],
    options: Options,
    workers: int,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[Result]:
    """`function(options, item)` for every item, in input order; on up to `workers` processes, as
    `ordered_chunks` runs it."""
    for _, results in ordered_chunks(function, items, options, workers, chunk_size):
        yield from results
