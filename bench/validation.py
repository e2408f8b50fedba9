"""`python -m bench.validation`: what checking one call's arguments against its tool's schema costs.

µs per `ToolSet.check` (the check every parsed call passes: strict data, tool known, schema) on
the benchmark's five-property tool schema with a typical argument, on the same schema with a
rejected argument (errors and their texts built), and on a large argument (a 2,000-item array of
objects and strings against `search_records`/`run_tests` of `bench.construction`). The arguments'
JSON text is given, as the body kinds give it. A benchmark, not a test: read the ratios between
runs made back to back on one machine.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from streamparse.validation import ToolSet

from .construction import BENCH_TOOLS, _tool, alternated
from .measure import settle

_SMALL = {"path": "src/main.py", "content": "print('hello')\n", "recursive": False, "limit": 20,
          "mode": "write"}
_REJECTED = {"path": 3, "content": "x", "mode": "delete", "limit": 0, "extra": True}
_LARGE_SEARCH = {"query": {"text": "status:open " * 50,
                           "filters": [{"field": f"f{i}", "op": "eq", "value": i} for i in range(2000)],
                           "sort": [{"by": f"k{i}", "desc": i % 2 == 0} for i in range(200)]},
                 "page": {"size": 50, "cursor": None}}
_LARGE_TESTS = {"targets": [f"tests/test_{i}.py::test_case_{i}" for i in range(2000)],
                "env": {f"VAR_{i}": str(i) for i in range(200)}, "config": {"retries": 3}}


def cases() -> list[tuple[str, ToolSet, str, dict[str, Any]]]:
    """(label, tools, tool name, arguments) for each measured check."""
    five = ToolSet([_tool("edit", 0)])
    bench = ToolSet(BENCH_TOOLS)
    return [("five-property schema, accepted", five, "edit", _SMALL),
            ("five-property schema, rejected", five, "edit", _REJECTED),
            ("large argument, 2,000 objects", bench, "search_records", _LARGE_SEARCH),
            ("large argument, 2,000 unique strings", bench, "run_tests", _LARGE_TESTS)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.validation", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    settle()
    for label, tools, name, arguments in cases():
        text = json.dumps(arguments)
        verdict = tools.check(name, arguments, text)
        size = len(text)
        reps = max(5, min(20_000, 2_000_000 // size))
        [seconds] = alternated([lambda t=tools, n=name, a=arguments, s=text: t.check(n, a, s)], reps,
                               args.rounds)
        status = "accepted" if verdict is None else verdict[0]
        print(f"{label:<40} {size:>7} chars  {seconds * 1e6:>10.2f} µs  ({status})")


if __name__ == "__main__":
    main()
