"""`python -m bench.server_ab` keeps running: two proxies (here the same checkout twice) in front of one
upstream, a few alternated requests, a line of numbers per proxy."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from conftest import ROOT


def test_two_checkouts_are_measured_side_by_side() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.server_ab", str(ROOT), str(ROOT), "--requests", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if "CPU per request" in line]
    assert [line.split(":", 1)[0] for line in lines] == [f"{ROOT} (a)", f"{ROOT} (b)"]
    for line in lines:
        found = re.search(r"first token median ([\d.]+) ms, .* CPU per request ([\d.]+) ms$", line)
        assert found is not None, line
        assert 0 < float(found[1]) < 10_000 and 0 < float(found[2]) < 10_000
