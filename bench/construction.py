"""`python -m bench.construction`: what `tools=` costs a server that builds one parser per request.

Parser construction with 0, 1, 10 and 50 tools, three ways: a fresh list per parser (equal content,
new objects, as each request brings — recognised by content after the first), a `streamparse.Tools`
compiled once, and compiling the list from scratch (what every construction paid before `Tools`).
The fresh list is measured twice: decoded from the request's JSON just before the parser is built
(as a server has it; only construction timed), and taken from a pool of lists decoded long before.
Then `parse()` with the benchmark's tools: a short completion with 2 tools, and the 14K/52K/203K
outputs of every format, next to transformers' `parse_response` when it is installed.
A benchmark, not a test: numbers depend on the machine; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import streamparse
from streamparse.registry import get_format
from streamparse.validation import Tools

from .measure import settle
from .outputs import benchmark_output
from .peer import comparable_formats, load_peer, load_template


def _tool(name: str, i: int) -> dict[str, Any]:
    """A tool shaped like the ones coding agents send: a few typed, described parameters."""
    return {"type": "function", "function": {
        "name": name,
        "description": f"Tool number {i}: does one thing to the workspace and reports what it did.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File or directory, relative to the root."},
                "content": {"type": "string", "description": "Text to write."},
                "recursive": {"type": "boolean", "default": False},
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
                "mode": {"type": "string", "enum": ["read", "write", "append"]},
                "options": {"type": "object", "additionalProperties": {"type": "string"}},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    }}


# The tools the benchmark outputs call (bench/outputs.py `_calls`).
BENCH_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "search_records", "parameters": {
        "type": "object", "properties": {
            "query": {"type": "object", "properties": {
                "text": {"type": "string"},
                "filters": {"type": "array", "items": {"type": "object", "required": ["field", "op"]}},
                "sort": {"type": "array", "items": {"$ref": "#/$defs/sort"}}}},
            "page": {"type": "object", "properties": {"size": {"type": "integer"},
                                                      "cursor": {"type": ["string", "null"]}}}},
        "required": ["query"], "$defs": {"sort": {"type": "object", "properties": {
            "by": {"type": "string"}, "desc": {"type": "boolean"}}}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {
            "path": {"type": "string", "pattern": "^[^\\0]+$"},
            "content": {"type": "string"},
            "options": {"type": "object"}},
        "required": ["path", "content"]}}},
    {"type": "function", "function": {"name": "run_tests", "parameters": {
        "type": "object", "properties": {
            "targets": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "config": {"type": "object"}},
        "required": ["targets"]}}},
]


def tool_list(count: int) -> list[dict[str, Any]]:
    return [_tool(f"tool_{i}", i) for i in range(count)]


def best(run: Callable[[], object], reps: int, rounds: int = 5) -> float:
    """Best mean seconds per call over `rounds` rounds of `reps` calls."""
    return alternated([run], reps, rounds)[0]


def alternated(runs: list[Callable[[], object]], reps: int, rounds: int = 5) -> list[float]:
    """`best` of each of `runs`, their rounds taken in turn (A, B, A, B, ...) so that a change in the
    machine's load falls on every side alike."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for run, seen in zip(runs, times, strict=True):
            start = time.perf_counter()
            for _ in range(reps):
                run()
            seen.append((time.perf_counter() - start) / reps)
    return [min(seen) for seen in times]


def per_request(body: str, build: Callable[[Any], object], reps: int, rounds: int = 5) -> float:
    """Best mean seconds per `build(tools)` over `rounds`, where each request decodes its tools
    from `body` just before (new objects, still in the CPU's cache, as a server has them after
    reading the request), and only the construction is timed."""
    means = []
    for _ in range(rounds):
        total = 0
        for _ in range(reps):
            tools = json.loads(body)
            start = time.perf_counter_ns()
            build(tools)
            total += time.perf_counter_ns() - start
        means.append(total / reps / 1e9)
    return min(means)


def construction(counts: tuple[int, ...], reps: int) -> None:
    """Three ways to bring a tool list, each against construction with no tools measured the same way."""
    base = best(lambda: streamparse.StreamParser(format="hermes"), reps * 10)
    print(f"StreamParser construction, hermes; no tools: {base * 1000:.4f} ms")
    print("  request: tools decoded from the request just before construction, only construction timed,\n"
          "    against no-tools construction timed the same way;\n"
          "  pool: lists decoded long before, taken in turn from a pool of reps lists (out of the CPU's cache)")
    print(f"{'tools':>5}  {'request (seen before)':>22}  {'pool (seen before)':>20}  {'Tools object':>18}  "
          f"{'compiled each time':>20}  {'json.dumps(list)':>16}")
    for count in counts:
        tools = tool_list(count)
        body = json.dumps(tools)
        compiled = Tools(tools)
        streamparse.StreamParser(format="hermes", tools=json.loads(body))  # the first request compiles it
        plain, fresh = (per_request(body, build, reps) for build in (
            lambda _tools: streamparse.StreamParser(format="hermes"),
            lambda tools: streamparse.StreamParser(format="hermes", tools=tools)))
        copies = [json.loads(body) for _ in range(reps)]  # new objects, equal content
        it = iter(copies * 5)
        pooled = best(lambda: streamparse.StreamParser(format="hermes", tools=next(it)), reps)  # noqa: B023
        shared = best(lambda: streamparse.StreamParser(format="hermes", tools=compiled), reps * 10)  # noqa: B023
        scratch = best(lambda: Tools(tools), max(1, reps // 20), rounds=2)  # noqa: B023
        hashing = best(lambda: json.dumps(tools, sort_keys=True), reps)  # noqa: B023
        print(f"{count:>5}  {fresh * 1000:>8.4f} ms = {fresh / plain:>5.1f}x  {pooled * 1000:>8.4f} ms = "
              f"{pooled / base:>5.1f}x  {shared * 1000:>8.4f} ms = {shared / base:>4.1f}x  "
              f"{scratch * 1000:>9.3f} ms = {scratch / base:>6.0f}x  {hashing * 1000:>12.4f} ms")


def short_parse(reps: int) -> None:
    """The common case of an agent loop: a short completion with two calls. Every way is timed in
    turn with transformers' `parse_response` (`alternated`): the load of a shared machine changes
    faster than one way's rounds take, and the ratio is what to read."""
    tools = BENCH_TOOLS[1:]
    text = ('<think>\nThe user wants the file written and tested.\n</think>\n\nWriting it now.\n<tool_call>\n'
            '{"name": "write_file", "arguments": {"path": "a.py", "content": "print(1)\\n"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "run_tests", "arguments": {"targets": ["tests/test_a.py"]}}\n</tool_call>')
    compiled = Tools(tools)
    peer = load_peer()
    template = load_template(peer, "hermes") if peer is not None else None
    runs: list[Callable[[], object]] = [
        lambda: streamparse.parse(text, "hermes"),
        lambda: streamparse.parse(text, "hermes", tools=json.loads(json.dumps(tools))),
        lambda: streamparse.parse(text, "hermes", tools=compiled),
    ]
    if peer is not None and template is not None:
        runs.append(lambda: peer.parse_response(text, template, prefix=""))
    settle()  # as in `outputs`
    none, listed, shared, *theirs = alternated(runs, reps)
    line = (f"parse() of a short hermes completion ({len(text)} chars, 2 calls): no tools {none * 1000:.3f} ms, "
            f"2 tools as a fresh list {listed * 1000:.3f} ms, as Tools {shared * 1000:.3f} ms")
    if theirs:
        line += f"; transformers parse_response {theirs[0] * 1000:.3f} ms = {theirs[0] / shared:.2f}x of Tools"
    print(line)


PYTHON_FORMATS = ("pythonic", "lfm2")  # calls written as Python literals
JSON_FORMATS = ("hermes", "qwen3", "mistral", "llama3_json")  # calls written as JSON


def python_against_json(size: int, reps: int) -> None:
    """`parse()` of the formats whose calls are Python literals against formats whose calls are
    JSON, at one size, with the benchmark's tools, every way timed in turn (`alternated`)."""
    compiled = Tools(BENCH_TOOLS)
    names = (*JSON_FORMATS, *PYTHON_FORMATS)
    texts = {name: benchmark_output(get_format(name), size).text for name in names}

    def run(name: str) -> Callable[[], object]:
        return lambda: streamparse.parse(texts[name], name, tools=compiled)

    runs = [run(name) for name in names]
    settle()
    # Three times the rounds of a cell: six formats share one machine state only round by round.
    times = dict(zip(names, alternated(runs, reps, rounds=15), strict=True))
    json_times = sorted(times[name] for name in JSON_FORMATS)
    middle = (json_times[1] + json_times[2]) / 2
    print(f"parse() at {size} chars, ms, and x the JSON formats' median ({middle * 1000:.2f} ms): " + ", ".join(
        f"{name} {times[name] * 1000:.2f} ({times[name] / middle:.2f}x)" for name in names))


def outputs(formats: list[str], sizes: tuple[int, ...], reps: int) -> None:
    peer = load_peer()
    compiled = Tools(BENCH_TOOLS)
    settle()  # transformers' many objects out of the collector's sight, as in `python -m bench`
    print(f"parse() of the benchmark outputs with the benchmark's tools (Tools), ms"
          f"{'' if peer else ' (transformers not installed: no comparison)'}")
    print(f"{'format':<14} {'size':>7} {'no tools':>9} {'tools':>9} {'transformers':>13} {'ratio':>6}  accepted")
    for name in formats:
        spec = get_format(name)
        template = load_template(peer, name) if peer is not None else None
        for size in sizes:
            output = benchmark_output(spec, size)
            text = output.text
            message = streamparse.parse(text, name, tools=compiled)
            runs: list[Callable[[], object]] = [
                lambda: streamparse.parse(text, name),  # noqa: B023
                lambda: streamparse.parse(text, name, tools=compiled),  # noqa: B023
            ]
            cell, ratio = "-", "-"
            if peer is not None and template is not None:
                try:
                    peer.parse_response(text, template, prefix="")
                    runs.append(lambda: peer.parse_response(text, template, prefix=""))  # noqa: B023
                except Exception as error:
                    cell = type(error).__name__
            plain, ours, *theirs = alternated(runs, reps)
            if theirs:
                cell, ratio = f"{theirs[0] * 1000:.2f}", f"{theirs[0] / ours:.2f}x"
            print(f"{name:<14} {len(text):>7} {plain * 1000:>9.2f} {ours * 1000:>9.2f} {cell:>13} {ratio:>6}  "
                  f"{len(message.tool_calls)}/{len(message.tool_calls) + len(message.rejected)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.construction", description=__doc__)
    parser.add_argument("--reps", type=int, default=200, help="calls per timing round")
    parser.add_argument("--counts", default="0,1,10,50", help="tool list sizes")
    parser.add_argument("--formats", default=",".join(comparable_formats()),
                        help="comma-separated (default: every format with a transformers response template)")
    parser.add_argument("--sizes", default="14000,52000,203000")
    parser.add_argument("--no-outputs", action="store_true", help="skip the 14K/52K/203K outputs")
    args = parser.parse_args(argv)
    construction(tuple(int(c) for c in args.counts.split(",")), args.reps)
    short_parse(args.reps)
    python_against_json(203000, max(3, args.reps // 50))
    if not args.no_outputs:
        outputs(args.formats.split(","), tuple(int(s) for s in args.sizes.split(",")), max(3, args.reps // 50))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
