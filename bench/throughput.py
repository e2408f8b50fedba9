"""Post-processing throughput: completions per second, on one worker, on every core, and through Ray Data.

`python -m bench.throughput` parses 10,000 realistic completions of each format (mixed lengths from a
short answer to about 10,000 characters; about half with calls; about one in five malformed: cut off inside a
call, or calling a tool that was not offered) with `parse_many(workers=1)`, with `parse_many` on every
core, and with `map_batches(ParseBatch)` on a local Ray instance, and prints rows/s, rows/s per core and
the scaling factor. `--quick` runs a tiny corpus (what the tests run; its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import streamparse
from bench import outputs
from streamparse.families import FAMILIES
from streamparse.many import every_core
from streamparse.registry import get_format
from streamparse.types import Message, ToolCall

COMPLETIONS = 10_000
QUICK_COMPLETIONS = 40
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
    all_cores: float
    ray: float | None


def _rate(rows: int, start: float) -> float:
    return rows / max(time.perf_counter() - start, 1e-9)


def through_ray(texts: Sequence[str], fmt: str, cores: int, tools: list[dict[str, object]] | None) -> float:
    import ray

    from streamparse.batch import ParseBatch

    dataset = ray.data.from_items([{"text": text} for text in texts])
    start = time.perf_counter()
    done = dataset.map_batches(ParseBatch, fn_constructor_kwargs={"format": fmt, "tools": tools},
                               concurrency=cores, num_cpus=1, batch_size=256, batch_format="pyarrow").materialize()
    assert done.count() == len(texts)
    return _rate(len(texts), start)


def measure(fmt: str, count: int, cores: int, use_ray: bool, tools: list[dict[str, object]] | None = TOOLS) -> Result:
    texts = corpus(fmt, count)
    start = time.perf_counter()
    serial = streamparse.parse_many(texts, workers=1, format=fmt, tools=tools)
    one = _rate(len(texts), start)
    start = time.perf_counter()
    parallel = streamparse.parse_many(texts, workers=cores, format=fmt, tools=tools)
    every = _rate(len(texts), start)
    assert [(m.content, m.reasoning, len(m.tool_calls), m.rejected) for m in parallel] == [
        (m.content, m.reasoning, len(m.tool_calls), m.rejected) for m in serial]
    malformed = sum(1 for m in serial if m.rejected)
    return Result(fmt, len(texts), sum(map(len, texts)), malformed, one, every,
                  through_ray(texts, fmt, cores, tools) if use_ray else None)


def report(results: list[Result], cores: int, out: TextIO) -> None:
    out.write(f"Post-processing throughput: rows/s (rows/s per core), {cores} cores\n")
    out.write(f"{'format':<15}{'rows':>7}{'avg chars':>10}{'malformed':>10}{'1 worker':>11}"
              f"{'all cores':>18}{'scaling':>9}{'Ray Data local':>22}\n")
    for r in results:
        ray = f"{r.ray:,.0f} ({r.ray / cores:,.0f})" if r.ray is not None else "skipped"
        out.write(f"{r.format:<15}{r.rows:>7,}{r.chars // r.rows:>10,}{r.malformed:>10,}{r.one_worker:>11,.0f}"
                  f"{f'{r.all_cores:,.0f} ({r.all_cores / cores:,.0f})':>18}{r.all_cores / r.one_worker:>8.2f}x"
                  f"{ray:>22}\n")


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    args.add_argument("--quick", action="store_true", help=f"{QUICK_COMPLETIONS} completions a format")
    args.add_argument("--completions", type=int, help=f"completions a format (default {COMPLETIONS:,})")
    args.add_argument("--format", action="append", dest="formats", help="only this format (repeatable)")
    args.add_argument("--workers", type=int, help="processes for 'all cores' (default: every core)")
    args.add_argument("--no-ray", action="store_true", help="skip the Ray Data measurement")
    args.add_argument("--no-tools", action="store_true",
                      help="parse without a tools list (no unknown_tool rows; shows what checking tools costs)")
    opts = args.parse_args(argv)
    count = opts.completions or (QUICK_COMPLETIONS if opts.quick else COMPLETIONS)
    cores = opts.workers or every_core()
    formats = opts.formats or [spec.name for spec in FAMILIES]
    use_ray = not opts.no_ray
    if use_ray:
        try:
            import ray
        except ImportError:
            out.write("Ray Data skipped: ray is not installed (pip install 'streamparse[ray]')\n")
            use_ray = False
        else:
            ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, configure_logging=False)
            ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        tools = None if opts.no_tools else TOOLS
        results = [measure(fmt, count, cores, use_ray, tools) for fmt in formats]
    finally:
        if use_ray:
            ray.shutdown()
    out.write(f"{count:,} completions a format, {'no tools' if opts.no_tools else 'checked against 3 tools'}\n")
    report(results, cores, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

