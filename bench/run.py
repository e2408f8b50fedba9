"""`python bench/run.py`: the same as `python -m bench`, runnable as a script from anywhere."""

from __future__ import annotations

import sys
from pathlib import Path


def run() -> int:
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from bench.cli import main

    return main()


if __name__ == "__main__":
    raise SystemExit(run())
