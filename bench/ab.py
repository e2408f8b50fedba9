"""`python -m bench.ab TREE [TREE ...] --format F ...`: the same benchmark texts streamed by several
checkouts of streamparse (say, `git worktree add ../before <commit>` and this one), alternated.

For each format and tree, in a subprocess run from that tree: µs per 4-character chunk at ~14K,
52K and 203K characters in both emit modes (CPU time, best of 5), growth per 4x length, and
`parse()` at 203K (best of 10), after a warm-up. Rounds alternate the trees, and each cell is the best over rounds,
so a load spike on a shared machine shows as an outlier in one row, not as a trend. A benchmark,
not a test: read ratios between trees of one run.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

SIZES = (14000, 52000, 203000)

_RUN = r'''
import json, sys, time
sys.path.insert(0, ".")
import streamparse
from streamparse.registry import get_format
from bench.outputs import benchmark_output
fmt, out = sys.argv[1], {}
warm = benchmark_output(get_format(fmt), 14000).text
for _ in range(3):  # caches filled and the CPU's clock up before anything is timed
    for emit in ("validated", "progressive"):
        streamparse.StreamParser(format=fmt, emit_calls=emit).feed(warm)
for size in (14000, 52000, 203000):
    text = benchmark_output(get_format(fmt), size).text
    chunks = [text[i:i + 4] for i in range(0, len(text), 4)]
    out[f"L{size}"] = len(text)
    for emit in ("validated", "progressive"):
        best = 1e9
        for _ in range(5):
            parser = streamparse.StreamParser(format=fmt, emit_calls=emit)
            start = time.process_time()
            for chunk in chunks:
                parser.feed(chunk)
            parser.close()
            best = min(best, time.process_time() - start)
        out[f"{emit}{size}"] = best
    if size == 203000:
        best = 1e9
        for _ in range(10):
            start = time.process_time()
            streamparse.parse(text, fmt)
            best = min(best, time.process_time() - start)
        out["parse"] = best
print(json.dumps(out))
'''


def _measure(tree: str, fmt: str) -> dict[str, float] | None:
    done = subprocess.run([sys.executable, "-c", _RUN, fmt], cwd=tree, capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None  # a tree without this format


def _growth(cell: dict[str, float], emit: str, a: int, b: int) -> float:
    ratio = cell[f"L{b}"] / cell[f"L{a}"]
    return float((cell[f"{emit}{b}"] / cell[f"{emit}{a}"]) ** (math.log(4) / math.log(ratio)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("trees", nargs="+", help="checkouts of streamparse to compare")
    parser.add_argument("--format", action="append", required=True, metavar="NAME", help="repeat for several")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    best: dict[tuple[str, str], dict[str, float]] = {}
    for _ in range(args.rounds):
        for fmt in args.format:
            for tree in args.trees:
                cell = _measure(tree, fmt)
                if cell is None:
                    continue
                kept = best.setdefault((fmt, tree), cell)
                for key, value in cell.items():
                    kept[key] = min(kept[key], value)
    print("| format | tree | validated µs/chunk 14K/52K/203K | progressive | growth per 4x, validated | "
          "progressive | parse() 203K ms |")
    print("|---|---|---|---|---|---|---|")
    for fmt in args.format:
        for tree in args.trees:
            cell = best.get((fmt, tree))
            if cell is None:
                continue
            row = [fmt, Path(tree).resolve().name]
            for emit in ("validated", "progressive"):
                row.append("/".join(f"{cell[f'{emit}{s}'] / (cell[f'L{s}'] / 4) * 1e6:.2f}" for s in SIZES))
            for emit in ("validated", "progressive"):
                row.append(f"{_growth(cell, emit, 14000, 52000):.2f}/{_growth(cell, emit, 52000, 203000):.2f}")
            row.append(f"{cell['parse'] * 1e3:.2f}")
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
