"""The throughput benchmark keeps running (tiny, untimed); its corpus is what it claims."""

from __future__ import annotations

import io

import pytest
from conftest import FORMAT_NAMES

import streamparse
from bench import throughput


def test_the_quick_run_reports_every_format() -> None:
    out = io.StringIO()
    assert throughput.main(["--quick", "--no-ray", "--workers", "2"], out=out) == 0
    printed = out.getvalue()
    assert "rows/s (scaling against 1 worker)" in printed and "2 workers" in printed
    for fmt in FORMAT_NAMES:
        assert f"\n{fmt} " in printed


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_the_corpus_mixes_lengths_calls_and_malformed_outputs(fmt: str) -> None:
    texts = throughput.corpus(fmt, 400)
    assert len(texts) == 400 and texts == throughput.corpus(fmt, 400)  # reproducible
    messages = [streamparse.parse(text, fmt, tools=throughput.TOOLS) for text in texts]
    with_calls = sum(1 for m in messages if m.tool_calls)
    malformed = {r.status for m in messages for r in m.rejected}
    assert 0.2 < with_calls / len(texts) < 0.7
    assert {"truncated", "unknown_tool"} <= malformed
    assert max(map(len, texts)) > 5 * min(map(len, texts))
