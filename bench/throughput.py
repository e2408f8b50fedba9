"""Post-processing throughput: completions per second on one worker, on two, and through Ray Data.

`python -m bench.throughput` parses 100,000 realistic completions (mixed lengths from a short answer
to about 10,000 characters; about half with calls; about one in five malformed: cut off inside a
call, or calling a tool that was not offered) of one format (`--format`, repeatable; default hermes)
five ways: `parse_many(workers=1)`, `parse_batch` on one Arrow table in this process,
`parse_many(workers=2)`, and on a local Ray instance of 2 CPUs `map_batches(parse_batch)` as tasks and
`map_batches(ParseBatch)` on an actor pool, and prints rows/s and the scaling factor of each against
one worker. `--rows N` runs a smaller corpus for a quick
check; `--quick` runs 40 rows of every format (what the tests run; its numbers mean nothing).
Wall-clock times include starting the worker processes and Ray's actors: that is what a user waits.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import streamparse
from bench import outputs
from streamparse.batch.workers import every_core
from streamparse.families import FAMILIES
from streamparse.registry import get_format
from streamparse.types import Message, ToolCall

ROWS = 100_000
QUICK_ROWS = 40
WORKERS = 2
# Rows per block handed to Ray (about 29 MB of text: under Ray Data's 128 MB target) and per ParseBatch
# call, one call a block. Measured, warm tasks on 100,000 rows, 2 CPUs: blocks of 2,048 took 6.8 s,
# 4,096 5.4 s (batches of 1,024: 5.6 s), 12,500 4.6 s (batches of 1,024: 5.3 s), 25,000 4.6 s. Ray pays a
# fixed cost for each block and batch it moves; 8 blocks still keep 2 CPUs busy to the end.
RAY_BLOCK_ROWS = 12_500
RAY_BATCH_ROWS = RAY_BLOCK_ROWS
DISTINCT = 60  # distinct outputs per format; the corpus draws from them (parsing caches nothing per text)
SCALES = (0.05, 0.2, 0.4, 0.8, 1.2)  # about 1,600 to 12,000 characters before the mix cuts them down
OPEN_SCHEMA = {"type": "object"}
TOOLS = [{"type": "function", "function": {"name": name, "parameters": OPEN_SCHEMA}}
         for name in ("search_records", "write_file", "run_tests")]


def _output(fmt: str, rng: random.Random) -> str:
    """One completion: an answer, reasoning and an answer, calls, or a malformed call."""
    spec = get_format(fmt)
    whole = outputs._message(spec, rng.choice(SCALES))
    kind = rng.random()
    if kind < 0.3:
        message = Message(content=whole.content)
    elif kind < 0.5:
        message = Message(content=whole.content, reasoning=whole.reasoning)
    else:
        message = Message(content=whole.content, reasoning=whole.reasoning,
                          tool_calls=whole.tool_calls[: rng.randint(1, len(whole.tool_calls))])
    text = streamparse.render(message, fmt)
    if message.tool_calls and kind > 0.9:  # malformed: cut off inside the last call
        return text[: len(text) - rng.randint(20, 200)]
    if message.tool_calls and kind > 0.8:  # malformed: a tool that was not offered
        unknown = ToolCall("call_x", "delete_everything", {"path": "/"}, "")
        return streamparse.render(Message(content=message.content, tool_calls=[unknown]), fmt)
    return text


def corpus(fmt: str, count: int, seed: int = 0) -> list[str]:
    rng = random.Random(f"{fmt}-{seed}")
    distinct = [_output(fmt, rng) for _ in range(min(DISTINCT, count))]
    return [distinct[rng.randrange(len(distinct))] for _ in range(count)]


@dataclass
class Result:
    format: str
    rows: int
    chars: int
    malformed: int
    one_worker: float  # rows/s
    one_cpu: float  # µs of CPU per row in parse_many(workers=1)
    one_batch: float  # parse_batch on one Arrow table in this process
    workers: float
    parent: float  # µs of the parent's CPU per row in parse_many(workers)
    in_workers: float  # µs of the worker processes' CPU per row in parse_many(workers)
    arguments: float  # µs per row the parent spends when every call's arguments are read
    ray: RayResult | None  # map_batches(ParseBatch) on an actor pool
    ray_tasks: RayResult | None  # map_batches(parse_batch) as tasks, on Ray's worker processes as ray.init left them
    ray_warm: RayResult | None  # the same again, the worker processes having imported streamparse and Ray Data


def _rate(rows: int, start: float) -> float:
    return rows / max(time.perf_counter() - start, 1e-9)


def _children_cpu() -> float:
    """Seconds of CPU of this process's ended children (the worker processes), where the OS tells it."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return float("nan")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _table(texts: Sequence[str]) -> object:
    import pyarrow as pa

    return pa.table({"text": pa.array(texts, type=pa.string())})


@dataclass
class RayResult:
    rate: float  # rows/s, wall clock from map_batches to the last row, the actors' start included
    started: float  # seconds until the first parsed block came back: the actors' start, mostly
    after_start: float  # rows/s from the first parsed block to the last
    fixed: float  # seconds Ray Data takes for an identity map of 100 rows on the same actor pool


class _Identity:
    """The cheapest map Ray Data can run: what it costs is Ray Data's own, whatever the work."""

    def __call__(self, batch: object) -> object:
        return batch


def _identity(batch: object) -> object:
    return batch


def through_ray(texts: Sequence[str], fmt: str, cores: int, tools: list[dict[str, object]] | None,
                tasks: bool = False) -> RayResult:
    """Ray Data's rate on `texts`: `map_batches(ParseBatch)` on an actor pool of `cores` actors, or
    with `tasks`, `map_batches(parse_batch)` as tasks on Ray's own worker processes."""
    import pyarrow as pa
    import ray

    from streamparse.batch import ParseBatch, parse_batch

    blocks = [pa.table({"text": pa.array(texts[i:i + RAY_BLOCK_ROWS], type=pa.string())})
              for i in range(0, len(texts), RAY_BLOCK_ROWS)]
    options = {"format": fmt, "tools": tools}
    if tasks:
        def mapped(dataset: ray.data.Dataset, identity: bool = False) -> ray.data.Dataset:
            return dataset.map_batches(_identity if identity else parse_batch, fn_kwargs=None if identity else options,
                                       num_cpus=1, batch_size=RAY_BATCH_ROWS, batch_format="pyarrow")
    else:
        def mapped(dataset: ray.data.Dataset, identity: bool = False) -> ray.data.Dataset:
            return dataset.map_batches(_Identity if identity else ParseBatch,
                                       fn_constructor_kwargs=None if identity else options,
                                       compute=ray.data.ActorPoolStrategy(size=cores), num_cpus=1,
                                       batch_size=RAY_BATCH_ROWS, batch_format="pyarrow")
    start = time.perf_counter()
    parsed = mapped(ray.data.from_arrow(blocks))
    rows = 0
    first = first_rows = None
    for block in parsed.iter_batches(batch_size=None, batch_format="pyarrow"):  # each block as it is done
        rows += block.num_rows
        if first is None:
            first, first_rows = time.perf_counter(), block.num_rows
    end = time.perf_counter()
    assert rows == len(texts) and first is not None and first_rows is not None
    fixed = time.perf_counter()
    mapped(ray.data.from_arrow(blocks[0].slice(0, 100)), identity=True).materialize()
    fixed = time.perf_counter() - fixed
    after = (rows - first_rows) / max(end - first, 1e-9) if rows > first_rows else float("nan")  # one block: none
    return RayResult(rows / max(end - start, 1e-9), first - start, after, fixed)


def measure(fmt: str, count: int, workers: int, use_ray: bool,
            tools: list[dict[str, object]] | None = TOOLS) -> Result:
    from streamparse.batch import parse_batch

    texts = corpus(fmt, count)
    start, cpu = time.perf_counter(), time.process_time()
    serial = streamparse.parse_many(texts, workers=1, format=fmt, tools=tools)
    one = _rate(len(texts), start)
    one_cpu = (time.process_time() - cpu) / len(texts) * 1e6
    table = _table(texts)
    start = time.perf_counter()
    parse_batch(table, format=fmt, tools=tools)
    batch = _rate(len(texts), start)
    start, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    parallel = streamparse.parse_many(texts, workers=workers, format=fmt, tools=tools)
    many = _rate(len(texts), start)
    parent = (time.process_time() - cpu) / len(texts) * 1e6
    in_workers = (_children_cpu() - children) / len(texts) * 1e6  # the pool has ended: its CPU is counted
    cpu = time.process_time()
    for message in parallel:  # what a caller that reads every call's arguments pays on top
        for call in message.tool_calls:
            call.arguments  # noqa: B018
    arguments = (time.process_time() - cpu) / len(texts) * 1e6
    assert [(m.content, m.reasoning, [c.arguments for c in m.tool_calls], m.rejected) for m in parallel] == [
        (m.content, m.reasoning, [c.arguments for c in m.tool_calls], m.rejected) for m in serial]  # ids are random
    malformed = sum(1 for m in serial if m.rejected)
    return Result(fmt, len(texts), sum(map(len, texts)), malformed, one, one_cpu, batch, many, parent, in_workers,
                  arguments,
                  *_through_ray_both(texts, fmt, workers, tools, use_ray))


def _through_ray_both(texts: Sequence[str], fmt: str, cores: int, tools: list[dict[str, object]] | None,
                      use_ray: bool) -> tuple[RayResult | None, RayResult | None, RayResult | None]:
    """(actors, tasks, tasks again); tasks run first, so they, not the actors, meet Ray's worker
    processes cold (a first job after `ray.init`); the second tasks run is a job on a warm instance."""
    if not use_ray:
        return None, None, None
    import ray

    # Ray starts here and ends with this format: its processes (raylet, GCS, idle workers, the
    # driver's threads) share the cores, so the measurements without Ray run without it.
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        tasks = through_ray(texts, fmt, cores, tools, tasks=True)
        warm = through_ray(texts, fmt, cores, tools, tasks=True)
        return through_ray(texts, fmt, cores, tools), tasks, warm
    finally:
        ray.shutdown()


def _scaled(rate: float, base: float) -> str:
    return "one block" if math.isnan(rate) else f"{rate:,.0f} ({rate / base:.2f}x)"


def report(results: list[Result], workers: int, out: TextIO) -> None:
    out.write(f"Post-processing throughput: rows/s (scaling against 1 worker), {workers} workers or Ray CPUs\n")
    out.write(f"{'format':<15}{'rows':>8}{'avg chars':>10}{'malformed':>10}{'1 worker':>10}{'parse_batch':>18}"
              f"{f'{workers} workers':>18}{'CPU us/row':>26}{'ceiling':>9}\n")
    for r in results:
        out.write(f"{r.format:<15}{r.rows:>8,}{r.chars // r.rows:>10,}{r.malformed:>10,}{r.one_worker:>10,.0f}"
                  f"{_scaled(r.one_batch, r.one_worker):>18}{_scaled(r.workers, r.one_worker):>18}"
                  f"{f'{r.one_cpu:.0f} | {r.parent:.1f} +{r.arguments:.1f}, {r.in_workers:.0f}':>26}"
                  f"{f'{workers * r.one_cpu / (r.parent + r.in_workers):.2f}x':>9}\n")
    out.write(f"CPU us/row: 1 worker | with {workers} workers, the parent (+ what reading every call's arguments "
              f"adds), the workers; ceiling: the scaling {workers} busy cores allow at those CPU costs, {workers} x "
              "1 worker / (parent + workers), whatever else shares the machine\n")
    if all(r.ray is None for r in results):
        return
    out.write(f"\nRay Data, {workers} CPUs: rows/s (scaling against 1 worker)\n")
    out.write(f"{'format':<15}{'way':<24}{'Ray Data':>20}{'after start':>20}{'start':>9}{'Ray itself':>12}\n")
    for r in results:
        for way, ray in (("tasks (parse_batch)", r.ray_tasks), ("tasks, warm workers", r.ray_warm),
                         ("actors (ParseBatch)", r.ray)):
            if ray is not None:
                out.write(f"{r.format:<15}{way:<24}{_scaled(ray.rate, r.one_worker):>20}"
                          f"{_scaled(ray.after_start, r.one_worker):>20}{f'{ray.started:.1f} s':>9}"
                          f"{f'{ray.fixed:.1f} s':>12}\n")
    out.write("Ray Data: rows/s from map_batches to the last row, Ray's start included; after start: from the "
              "first parsed block to the last; start: seconds until the first parsed block; Ray itself: seconds "
              "Ray Data takes to map 100 rows through an identity the same way; tasks run first, on the worker "
              "processes as ray.init started them, then again on the same processes (warm: streamparse and Ray "
              "Data imported), then actors\n")


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    args.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS} rows of every format")
    args.add_argument("--rows", type=int, help=f"completions a format (default {ROWS:,})")
    args.add_argument("--format", action="append", dest="formats", help="this format (repeatable; default hermes)")
    args.add_argument("--workers", type=int, default=WORKERS,
                      help=f"processes of parse_many and Ray CPUs (default {WORKERS})")
    args.add_argument("--no-ray", action="store_true", help="skip the Ray Data measurement")
    args.add_argument("--no-tools", action="store_true",
                      help="parse without a tools list (no unknown_tool rows; shows what checking tools costs)")
    opts = args.parse_args(argv)
    count = opts.rows or (QUICK_ROWS if opts.quick else ROWS)
    formats = opts.formats or ([spec.name for spec in FAMILIES] if opts.quick else ["hermes"])
    use_ray = not opts.no_ray
    before = _load()
    if use_ray:
        try:
            import ray  # noqa: F401  # (started per format, after the measurements without it)
        except ImportError:
            out.write("Ray Data skipped: ray is not installed (pip install 'streamparse[ray]')\n")
            use_ray = False
    tools = None if opts.no_tools else TOOLS
    results = [measure(fmt, count, opts.workers, use_ray, tools) for fmt in formats]
    out.write(f"{count:,} completions a format, {'no tools' if opts.no_tools else 'checked against 3 tools'}; "
              f"{every_core()} cores; load average {before:.2f} at the start, {_load():.2f} at the end\n")
    report(results, opts.workers, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
