"""`python -m bench`: streamparse against itself at three lengths, against the peer, and in worst cases.

It prints plain tables: streaming cost per chunk and in total, `parse()` time, the growth per 4x
length (4.0 is linear, 16 is quadratic), the most characters held back outside envelopes; the
same outputs through transformers' `ResponseParser` / `parse_response` when it is installed; and
five worst cases at two lengths 4x apart. Then it checks the goals of the performance issue.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TextIO

import streamparse
from streamparse.families import FAMILIES
from streamparse.registry import get_format

from . import measure, outputs, peer, table
from .outputs import Output

EMITS: tuple[str, ...] = ("validated", "progressive")
GROWTH_GOAL = 4.6
SPEEDUP_GOAL = 5.0
ONE_CHAR_CASE = "the message in 1-char chunks"


@dataclass(frozen=True)
class Plan:
    """What to run: which formats, at which lengths."""

    formats: tuple[str, ...]
    sizes: tuple[int, ...] = outputs.SIZES
    worst_sizes: tuple[int, ...] = outputs.WORST_SIZES
    one_char_chunks: tuple[int, ...] = outputs.ONE_CHAR_CHUNKS
    compare: bool = True
    worst: bool = True
    reps: measure.Reps = measure.DEFAULT_REPS
    parse_reps: measure.Reps = measure.PARSE_REPS
    worst_reps: measure.Reps = measure.WORST_REPS

    @classmethod
    def default(cls, formats: tuple[str, ...], quick: bool = False) -> Plan:
        if quick:
            return cls(formats, outputs.QUICK_SIZES, outputs.QUICK_WORST_SIZES, outputs.QUICK_ONE_CHAR_CHUNKS)
        return cls(formats)


@dataclass
class Findings:
    """The numbers the goals are judged on, gathered while the tables print."""

    growths: list[tuple[float, str]] = field(default_factory=list)  # (growth per 4x, where)
    # format -> (size, theirs/ours per chunk for each emit mode), at the largest size, 4-char chunks
    speedups: dict[str, tuple[str, tuple[float, ...]]] = field(default_factory=dict)
    parse_ratios: dict[str, tuple[str, float]] = field(default_factory=dict)  # format -> (size, ours/theirs)
    round_trips: list[str] = field(default_factory=list)  # problems
    compare_skipped: str | None = None
    loads: list[float] = field(default_factory=list)  # load averages seen at the start and the end


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def machine() -> str:
    return (f"streamparse {streamparse.__version__}, Python {platform.python_version()} "
            f"({platform.python_implementation()}), {platform.system()} {platform.machine()}, {cpus()} CPUs")


def load() -> float:
    """The 1-minute load average (0 where the system does not say)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def busy(load_average: float) -> bool:
    """Other processes competed for the CPUs (the benchmark itself counts for one): timings, and
    growths most of all, are noisy."""
    return load_average - 1 > 0.5 * cpus()


# ----------------------------------------------------------------------------- sections

def outputs_section(plan: Plan, out: TextIO, findings: Findings) -> dict[tuple[str, int], Output]:
    built: dict[tuple[str, int], Output] = {}
    rows: list[list[table.Cell]] = []
    for name in plan.formats:
        spec = get_format(name)
        for size in plan.sizes:
            output = outputs.benchmark_output(spec, size)
            built[name, size] = output
            code = output.message.tool_calls[1].arguments["content"]
            rows.append([name, table.size_label(size), len(output.text), len(code), output.round_trip])
            if output.round_trip != "ok":
                findings.round_trips.append(f"{name} {table.size_label(size)}: {output.round_trip}")
    print("Outputs: reasoning + content + 3 calls with nested arguments, one carrying a code string "
          "(rendered with streamparse.render)", file=out)
    print(table.render(["format", "size", "characters", "code string", "parse(render(m)) == m"], rows), file=out)
    return built


def streaming_section(
    plan: Plan, built: dict[tuple[str, int], Output], out: TextIO, findings: Findings
) -> tuple[dict[tuple[str, int, str, str], measure.StreamTiming], dict[tuple[str, int], float]]:
    streams: dict[tuple[str, int, str, str], measure.StreamTiming] = {}
    parses: dict[tuple[str, int], float] = {}
    rows: list[list[table.Cell]] = []
    for name in plan.formats:
        for index, size in enumerate(plan.sizes):
            output = built[name, size]
            parses[name, size] = measure.time_parse(name, output.text, plan.parse_reps)
            parse_growth = None
            if index:
                previous = built[name, plan.sizes[index - 1]]
                parse_growth = measure.growth_per_4x(len(previous.text), parses[name, plan.sizes[index - 1]],
                                                     len(output.text), parses[name, size])
            for chunking, cut in outputs.CHUNKINGS.items():
                chunks = cut(output.text)
                for emit in EMITS:
                    timing = measure.time_stream(name, chunks, emit, plan.reps)
                    streams[name, size, chunking, emit] = timing
                    held = measure.max_held_back(name, chunks, emit)
                    growth = None
                    if index:
                        before = streams[name, plan.sizes[index - 1], chunking, emit]
                        growth = measure.growth_per_4x(len(previous.text), before.seconds, len(output.text),
                                                       timing.seconds)
                        findings.growths.append((growth, f"{name} {chunking}-char chunks {emit}, "
                                                         f"{table.size_label(plan.sizes[index - 1])}->"
                                                         f"{table.size_label(size)}"))
                    rows.append([name, table.size_label(size), chunking, emit, timing.us_per_chunk, timing.ms,
                                 parses[name, size] * 1e3, growth, parse_growth, held])
    print("\nStreaming (best of several runs; growth per 4x length: 4.0 = linear, 16 = quadratic)", file=out)
    print(table.render(["format", "size", "chunks", "emit", "µs/chunk", "total ms", "parse() ms",
                        "growth/4x", "parse growth/4x", "max held back"], rows), file=out)
    return streams, parses


def compare_section(
    plan: Plan,
    built: dict[tuple[str, int], Output],
    streams: dict[tuple[str, int, str, str], measure.StreamTiming],
    parses: dict[tuple[str, int], float],
    out: TextIO,
    findings: Findings,
    the_peer: peer.Peer | None,
) -> None:
    print("\nSide by side with transformers' ResponseParser (streaming) and parse_response", file=out)
    if the_peer is None:
        findings.compare_skipped = "transformers is not installed"
        print(f"comparison skipped: transformers is not installed ({peer.INSTALL_HINT})", file=out)
        return
    rows: list[list[table.Cell]] = []
    missing = []
    for name in plan.formats:
        template = peer.load_template(the_peer, name)
        if template is None:
            missing.append(name)
            continue
        theirs_before: dict[str, tuple[int, float]] = {}
        for size in plan.sizes:
            output = built[name, size]
            agreement = peer.agreement(the_peer, template, output.text, name)
            if agreement.startswith("peer raised"):
                rows.append([name, table.size_label(size), "-", *[None] * 9, agreement])
                continue
            their_parse = peer.time_parse(the_peer, template, output.text, plan.parse_reps)
            our_parse = parses[name, size]
            for chunking, cut in outputs.CHUNKINGS.items():
                theirs = peer.time_stream(the_peer, template, cut(output.text), plan.reps)
                ours = [streams[name, size, chunking, emit] for emit in EMITS]
                growth = None
                if chunking in theirs_before:
                    before_size, before_seconds = theirs_before[chunking]
                    growth = measure.growth_per_4x(before_size, before_seconds, len(output.text), theirs.seconds)
                theirs_before[chunking] = (len(output.text), theirs.seconds)
                if chunking == "4":
                    findings.speedups[name] = (table.size_label(size),
                                               tuple(theirs.us_per_chunk / t.us_per_chunk for t in ours))
                    findings.parse_ratios[name] = (table.size_label(size), our_parse / their_parse)
                rows.append([name, table.size_label(size), chunking, theirs.us_per_chunk, growth,
                             ours[0].us_per_chunk, ours[0].us_per_chunk / theirs.us_per_chunk,
                             ours[1].us_per_chunk, ours[1].us_per_chunk / theirs.us_per_chunk,
                             their_parse * 1e3, our_parse * 1e3, our_parse / their_parse, agreement])
    print(f"(transformers {the_peer.version}, response templates in bench/templates/; µs per chunk; "
          f"a ratio ours/theirs below 1 means streamparse is faster)", file=out)
    print(table.render(["format", "size", "chunks", "theirs", "their growth/4x", "ours validated", "ours/theirs",
                        "ours progressive", "ours/theirs", "parse_response ms", "parse() ms", "ours/theirs",
                        "same result"], rows), file=out)
    if missing:
        for name in missing:
            print(f"no response template for: {name} ({peer.INEXPRESSIBLE[name]})", file=out)


def worst_section(plan: Plan, out: TextIO, findings: Findings) -> None:
    rows: list[list[table.Cell]] = []
    for name in plan.formats:
        spec = get_format(name)
        measure.settle()
        cases: list[tuple[str, tuple[str, ...], list[list[str]]]] = []
        for case, build in outputs.WORST_CASES.items():
            emits = EMITS if case in outputs.WORST_CASES_IN_CALLS else EMITS[:1]
            cases.append((case, emits, [outputs.fixed_chunks(build(spec, n), 4) for n in plan.worst_sizes]))
        one_char = [list(outputs.benchmark_output(spec, n).text) for n in plan.one_char_chunks]
        cases.append((ONE_CHAR_CASE, EMITS, one_char))
        for label, emits, runs in cases:
            for emit in emits:
                before: tuple[int, float] | None = None
                for chunks in runs:
                    timing = measure.time_stream(name, chunks, emit, plan.worst_reps)
                    # Outside envelopes the emit mode changes nothing: held back is read in one mode.
                    held = measure.max_held_back(name, chunks, emit, samples=200) if emit == EMITS[0] else None
                    length = sum(map(len, chunks))
                    growth = None
                    if before is not None:
                        growth = measure.growth_per_4x(before[0], before[1], length, timing.seconds)
                        findings.growths.append((growth, f"{name} worst case {label} {emit}"))
                    before = (length, timing.seconds)
                    chunking = "1" if label == ONE_CHAR_CASE else "4"
                    rows.append([name, label, table.size_label(length), chunking, emit, timing.ms,
                                 timing.us_per_chunk, growth, held])
    print("\nWorst cases (two lengths 4x apart, best of 2 runs; the near-miss opener is the longest call opener "
          "less two characters, e.g. `<tool_cal`; held back sampled 200 times)", file=out)
    print(table.render(["format", "case", "size", "chunks", "emit", "total ms", "µs/chunk", "growth/4x",
                        "max held back"], rows), file=out)


def goals_section(out: TextIO, findings: Findings) -> None:
    print("\nGoals", file=out)
    if findings.growths:
        finite = [g for g in findings.growths if not math.isnan(g[0])]
        worst = max(finite) if finite else (float("nan"), "-")
        verdict = "met" if worst[0] <= GROWTH_GOAL else "NOT met"
        print(f"- streaming growth per 4x <= {GROWTH_GOAL}: {verdict}; largest {worst[0]:.2f} ({worst[1]})", file=out)
        over = [g for g in finite if g[0] > GROWTH_GOAL]
        for growth, where in sorted(over, reverse=True):
            print(f"    over the goal: {growth:.2f} {where}", file=out)
    if findings.compare_skipped:
        print(f"- comparison goals not checked: {findings.compare_skipped}", file=out)
    for name, (size, speedups) in findings.speedups.items():
        verdict = "met" if min(speedups) >= SPEEDUP_GOAL else "NOT met"
        modes = ", ".join(f"{emit} {speedup:.2f}x" for emit, speedup in zip(EMITS, speedups, strict=True))
        print(f"- {name}: per chunk, ResponseParser time / ours at {size}, 4-char chunks: {modes} "
              f"(goal >= {SPEEDUP_GOAL}x): {verdict}", file=out)
    for name, (size, ratio) in findings.parse_ratios.items():
        verdict = "met" if ratio <= 1.0 else "NOT met"
        print(f"- {name}: parse() takes {ratio:.2f}x the time of parse_response at {size} "
              f"(goal <= 1.0): {verdict}", file=out)
    for problem in findings.round_trips:
        print(f"- round trip failed: {problem}", file=out)
    if any(busy(value) for value in findings.loads):
        print(f"- note: the machine was busy (load average up to {max(findings.loads):.2f} on {cpus()} CPUs); "
              f"timings are noisy and growths over the goal may be noise: run again on an idle machine", file=out)


def run_plan(plan: Plan, out: TextIO = sys.stdout, the_peer: peer.Peer | None = None) -> Findings:
    """Run every section of `plan`, printing to `out`; the findings are returned for the goals."""
    findings = Findings()
    started = time.perf_counter()
    findings.loads.append(load())
    print(f"streamparse benchmark: {machine()}; load average {findings.loads[0]:.2f}", file=out)
    print(f"formats: {', '.join(plan.formats)}", file=out)
    built = outputs_section(plan, out, findings)
    measure.settle()
    streams, parses = streaming_section(plan, built, out, findings)
    if plan.compare:
        compare_section(plan, built, streams, parses, out, findings, the_peer)
    if plan.worst:
        worst_section(plan, out, findings)
    findings.loads.append(load())
    goals_section(out, findings)
    print(f"\n(ran in {time.perf_counter() - started:.0f} s; load average at the end {findings.loads[-1]:.2f})",
          file=out)
    return findings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller lengths (14K and 52K; worst cases 64K/256K)")
    parser.add_argument("--format", action="append", metavar="NAME",
                        help="only this format (an alias works too); may be repeated")
    parser.add_argument("--no-compare", action="store_true", help="skip the transformers comparison")
    parser.add_argument("--no-worst", action="store_true", help="skip the worst cases")
    parser.add_argument("--profile", action="store_true",
                        help="instead of the tables: cProfile streaming at 203K in 4-character chunks "
                             "(hermes, or the --format given)")
    args = parser.parse_args(argv)
    try:
        names = tuple(dict.fromkeys(get_format(n).name for n in args.format)) if args.format else tuple(
            spec.name for spec in FAMILIES)
    except ValueError as error:
        parser.error(str(error))
    if args.profile:
        from .profiling import profile_streaming

        for name in names if args.format else ("hermes",):
            print(profile_streaming(name))
        return 0
    plan = replace(Plan.default(names, quick=args.quick), compare=not args.no_compare, worst=not args.no_worst)
    run_plan(plan, the_peer=peer.load_peer() if plan.compare else None)
    return 0
