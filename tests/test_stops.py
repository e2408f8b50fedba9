"""Each format's declared `stops` (issue #42): the stop strings `streamparse serve` sends an engine beyond the
tokenizer's EOS. An engine cuts a stop off; one that leaves it in must not change the message: at the end of
any output of the format (its real-template cases, plain text, text after a call) the parse frames it, so
the message equals the one read without it, in one piece and streamed in every chunking."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FORMAT_NAMES, assert_stream_matches, ids, run_stream, shared_cases

import streamparse
from streamparse.registry import get_format

STOPPING = [name for name in FORMAT_NAMES if get_format(name).stops]


def test_the_formats_that_need_stops_declare_them() -> None:
    declared = {name: get_format(name).stops for name in STOPPING}
    assert declared == {
        "function_gemma": ("<start_function_response>",), "functionary_v3_1": ("<|eom_id|>",),
        "gemma4": ("<|tool_response>",), "gigachat3": ("<|message_sep|>",), "gigachat3_5": ("<|message_sep|>",),
        "gpt_oss": ("<|call|>",), "iquest_q1": ("<|iquest_end|>",), "kimi_k3": ("<|end_of_msg|>",),
        "llama3_json": ("<|eom_id|>",), "minimax_m1": ("<end_of_sentence>",), "muse_glimmer": ("<|eot|>",),
        "solar_open": ("<|calls|>",),
    }


def _outputs(fmt: str) -> list[tuple[str, Any, bool]]:
    """(output, tools, thinking_forced_open): the format's real cases, and plain text."""
    found = [(str(case["output"]), case["tools"], bool(case["thinking_forced_open"])) for case in shared_cases(fmt)]
    return [*found, ("It is 18°C in Paris.", None, False), ("line one\n\nline two\n", None, False)]


def _read(text: str, fmt: str, tools: Any, forced: bool) -> streamparse.Message:
    return streamparse.parse(text, fmt, tools=tools, thinking_forced_open=forced, id_factory=ids)


def _streamed(text: str, fmt: str, tools: Any, forced: bool, size: int) -> streamparse.Message:
    chunks = [text[start:start + size] for start in range(0, len(text), size)]
    folded, message = run_stream(chunks, format=fmt, tools=tools, thinking_forced_open=forced, id_factory=ids)
    assert_stream_matches(folded, message)
    return message


@pytest.mark.parametrize("fmt", STOPPING)
def test_a_declared_stop_left_at_the_end_of_an_output_changes_nothing(fmt: str) -> None:
    checked = 0
    for output, tools, forced in _outputs(fmt):
        expected = _read(output, fmt, tools, forced)
        for stop in get_format(fmt).stops:
            for tail in (stop, stop + "\n"):
                text = output + tail
                assert _read(text, fmt, tools, forced) == expected, (output, tail)
                for size in (1, 3, 7):
                    assert _streamed(text, fmt, tools, forced, size) == expected, (output, tail, size)
                checked += 1
        assert stop not in (expected.content or "") + (expected.reasoning or "")
    assert checked >= 4
