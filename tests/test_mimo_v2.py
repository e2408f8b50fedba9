"""Xiaomi MiMo-V2-Flash (`mimo_v2`): Qwen3-Coder's tags, values without the framing newline (no
template stored: vLLM's and SGLang's fixtures)."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "mimo_v2"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


def test_reasoning_content_and_two_calls_typed_by_the_schema() -> None:
    msg = both_modes((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.content == "Let me look."
    assert named_calls(msg) == [("execute_bash", {"command": "pwd && ls", "timeout": 30}),
                                ("list_files", {"path": "src/", "recursive": True})]


def test_values_are_byte_exact_and_never_unescaped() -> None:
    # Decision 12: SGLang's html.unescape is not followed.
    msg = both_modes("<tool_call>\n<function=execute_bash>\n<parameter=command>\n echo &amp; \n</parameter>\n"
                     "</function>\n</tool_call>", tools=TOOLS)
    assert named_calls(msg) == [("execute_bash", {"command": "\n echo &amp; \n"})]


def test_a_parameter_before_the_function_rejects_the_call() -> None:
    # Decision 12 (vLLM reports a call named list_files: conflict).
    text = ("<tool_call>\n<parameter=path>src</parameter>\n<function=list_files>\n</function>\n</tool_call>")
    msg = both_modes(text, tools=TOOLS)
    assert msg.tool_calls == [] and [(r.status, r.raw) for r in msg.rejected] == [("invalid_json", text)]


def test_a_bare_function_is_a_call_and_cut_off_calls_are_truncated() -> None:
    msg = both_modes("<function=list_files><parameter=path>a</parameter></function> done", tools=TOOLS)
    assert named_calls(msg) == [("list_files", {"path": "a"})] and msg.content == "done"
    msg = both_modes("<tool_call>\n<function=list_files>\n<parameter=path>sr", tools=TOOLS)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["truncated"]


def test_render_reads_back() -> None:
    message = streamparse.parse((FIXTURES / FMT / "reasoning_two_calls.txt").read_text(), FMT, tools=TOOLS)
    again = both_modes(streamparse.render(message, FMT), tools=TOOLS)
    assert (again.reasoning, again.content, named_calls(again)) == (
        message.reasoning, message.content, named_calls(message))
