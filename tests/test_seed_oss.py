"""ByteDance Seed-OSS (`seed_oss`): the format, its typing and streaming, by example.

FORMATS.md, "seed_oss" and the second-wave decisions (7: a value without its closer loses one
newline before the next element; 8: a missing `</function>` at the end is accepted when the last
value is closed; 10: several functions in one block, text in it outside them is content; 11: budget
reflections stay reasoning, verbatim).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import (
    FIXTURES,
    SHARED,
    assert_every_mode_agrees,
    assert_stream_matches,
    ids,
    named_calls,
    run_stream,
    shared_cases,
)
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, Token, ToolCall

FORMAT = "seed_oss"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text())
CASES = SHARED / "templates" / "cases_new_families.json"


def parse(text: str, **kwargs: Any) -> streamparse.Message:
    return streamparse.parse(text, FORMAT, id_factory=ids, **kwargs)


def function(name: str, *pairs: tuple[str, str]) -> str:
    params = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in pairs)
    return f"<function={name}>\n{params}</function>\n"


def block(*functions: str) -> str:
    return "\n<seed:tool_call>\n" + "".join(functions) + "</seed:tool_call>"


calls_of = named_calls


def real_cases() -> list[dict[str, Any]]:
    return shared_cases(FORMAT)  # type: ignore[return-value]


# ----------------------------------------------------------------- real outputs


def test_reasoning_with_a_budget_reflection_content_and_python_literal_values() -> None:
    text = (FIXTURES / FORMAT / "seed_reasoning_two_calls.txt").read_text()
    msg = parse(text, tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("one block each.")
    assert "<seed:cot_budget_reflect>I have used 31 tokens" in msg.reasoning
    assert msg.content == "I'll look both up."
    assert calls_of(msg) == [
        ("get_weather", {"location": "Paris, France", "days": 3}),
        ("search", {"query": 'packing list | "rain" & <wind>', "filters": {"folder": "travel", "year": 2025,
                    "shared": False}, "tags": ["paris", "weather"], "cursor": None}),
    ]
    assert msg.rejected == []


def test_values_have_no_framing_newline() -> None:
    [written] = parse((FIXTURES / FORMAT / "seed_write_file.txt").read_text(), tools=TOOLS).tool_calls
    assert written.arguments["content"] == (
        '\nimport sys\n\n\ndef main() -> int:\n    print("<ok>", file=sys.stderr)\n    return 0\n')


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("case", real_cases(), ids=lambda c: c["case"])
def test_every_real_render_parses_in_both_modes_and_one_character_chunks(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert streamparse.thinking_forced_open(case["prompt_tail"], FORMAT) is False
    msg = parse(case["output"], tools=case["tools"])
    assert (msg.content, msg.reasoning) == ((expected["content"] or "").strip(), (expected["reasoning"] or "").strip())
    assert calls_of(msg) == [(c["name"], c["arguments"]) for c in expected["tool_calls"] or []]
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(case["output"]), format=FORMAT, tools=case["tools"], emit_calls=emit,
                                      id_factory=ids)
        assert streamed == msg
        assert_stream_matches(folded, msg)
    # `render` writes the template's turn after its generation prompt `<seed:bos>assistant⏎`.
    message = Message(content=expected["content"] or "", reasoning=expected["reasoning"] or "", tool_calls=[
        ToolCall(f"id{i}", c["name"], c["arguments"], "") for i, c in enumerate(expected["tool_calls"] or [])])
    assert streamparse.render(message, FORMAT) == case["output"]


# ----------------------------------------------------------------- reasoning


def test_only_seed_think_is_reasoning() -> None:
    assert parse("<think>x</think>Hi.").content == "<think>x</think>Hi."
    assert (parse("<seed:think>x</seed:think>Hi.").reasoning, parse("<seed:think>x</seed:think>Hi.").content) \
        == ("x", "Hi.")


def test_forced_open_inside_a_budget_reflection_keeps_its_lone_closer_verbatim() -> None:
    prompt = "<seed:bos>assistant\n<seed:think><seed:cot_budget_reflect>"
    assert streamparse.thinking_forced_open(prompt, FORMAT)
    msg = parse("Budget is 0.</seed:cot_budget_reflect>\nAnswering.</seed:think>\nParis is sunny.", prompt=prompt)
    assert msg.reasoning == "Budget is 0.</seed:cot_budget_reflect>\nAnswering."
    assert msg.content == "Paris is sunny."


def test_the_budget_zero_prompt_closes_its_reasoning() -> None:
    prompt = ("<seed:bos>assistant\n<seed:think>\n<seed:cot_budget_reflect>The current thinking budget is 0, so I "
              "will directly start answering the question.</seed:cot_budget_reflect>\n</seed:think>")
    assert not streamparse.thinking_forced_open(prompt, FORMAT)


def test_a_call_inside_reasoning_stays_reasoning() -> None:
    msg = parse("<seed:think>Maybe " + block(function("f", ("a", "1"))) + "</seed:think>Done.")
    assert msg.tool_calls == [] and "<function=f>" in msg.reasoning and msg.content == "Done."


# ----------------------------------------------------------------- calls


def test_several_functions_in_one_block_are_several_calls() -> None:
    text = block(function("f", ("a", "1")), function("g"))
    assert calls_of(parse(text)) == [("f", {"a": "1"}), ("g", {})]


def test_text_in_the_block_outside_functions_is_content_whitespace_is_framing() -> None:
    msg = parse("A\n<seed:tool_call>\nI will call f.\n" + function("f", ("a", "1")) + "</seed:tool_call>")
    assert calls_of(msg) == [("f", {"a": "1"})] and msg.content == "A\n\nI will call f." and msg.rejected == []
    assert parse("A<seed:tool_call>\n\n</seed:tool_call>B") == parse("AB")


def test_a_bare_function_is_a_call() -> None:
    msg = parse("Checking.\n" + function("f", ("a", "1")) + "</seed:tool_call>")
    assert calls_of(msg) == [("f", {"a": "1"})] and msg.content == "Checking."


def test_python_literals_and_json_are_typed_by_the_schema() -> None:
    text = block(function("search", ("query", "None"), ("exact", "False"), ("score", "1e3"), ("limit", "5.0"),
                          ("filters", "{'k': [1, None]}"), ("tags", '["a"]'), ("cursor", "None"), ("extra", "True")))
    assert calls_of(parse(text, tools=TOOLS)) == [("search", {
        "query": "None", "exact": False, "score": 1000.0, "limit": 5, "filters": {"k": [1, None]}, "tags": ["a"],
        "cursor": None, "extra": "True"})]


def test_a_value_without_its_closer_ends_at_the_next_parameter_and_loses_one_newline() -> None:
    text = "<seed:tool_call>\n<function=f>\n<parameter=a>x\n<parameter=b>y\n</function>\n</seed:tool_call>"
    assert calls_of(parse(text)) == [("f", {"a": "x", "b": "y"})]


def test_the_end_tags_are_optional_at_the_end_when_the_last_value_is_closed() -> None:
    assert calls_of(parse("<seed:tool_call>\n<function=f>\n<parameter=a>1</parameter>\n")) == [("f", {"a": "1"})]
    assert calls_of(parse("<seed:tool_call>\n<function=f>\n")) == [("f", {})]
    for cut in ("<seed:tool_call>\n<function=f", "<seed:tool_call>\n<function=f>\n<parameter=a>1"):
        msg = parse(cut)
        assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["truncated"]


def test_a_stray_block_closer_is_content() -> None:
    assert parse("Done.</seed:tool_call>").content == "Done.</seed:tool_call>"


def test_token_aware_mode_reads_the_seed_tokens_only() -> None:
    text = block(function("f", ("a", "1")))
    inner = text[len("\n<seed:tool_call>"): -len("</seed:tool_call>")]
    tokens = [Token("<seed:tool_call>", special=True), Token(inner), Token("</seed:tool_call>", special=True)]
    assert calls_of(streamparse.parse(tokens, FORMAT, special_tokens="require")) == [("f", {"a": "1"})]
    assert streamparse.parse(text, FORMAT, special_tokens="require").tool_calls == []


@given(data=st.data(), value=st.text(st.sampled_from(list("ab <>/\n\t\"\\='é")), max_size=12))
def test_any_value_in_both_modes(data: st.DataObject, value: str) -> None:
    if any(tag in value for tag in ("</parameter>", "<parameter=", "</function>")):
        return
    msg = assert_every_mode_agrees(data, "Hi." + block(function("f", ("a", value), ("b", "2"))), FORMAT, TOOLS[:1])
    assert [r.status for r in msg.rejected] == ["unknown_tool"]
    msg = assert_every_mode_agrees(data, "Hi." + block(function("f", ("a", value), ("b", "2"))), FORMAT, None)
    assert calls_of(msg) == [("f", {"a": value, "b": "2"})]
