"""MiniMax M2 (`minimax_m2`): the format, its typing and streaming, by example.

FORMATS.md, "minimax_m2" and the second-wave decisions (7: a value without its closer loses one
newline before the next element; 8: a missing `</invoke>` at the end is accepted when the last value
is closed; 9: names in double, single or no quotes; text in the block outside calls is content).
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
    fold,
    ids,
    named_calls,
    run_stream,
    shared_cases,
)
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, Token, ToolCall

FORMAT = "minimax_m2"
TOOLS = json.loads((FIXTURES / FORMAT / "tools.json").read_text())
CASES = SHARED / "templates" / "cases_new_families.json"
PROMPT = (FIXTURES / FORMAT / "minimax_reasoning_two_calls.prompt").read_text()


def parse(text: str, **kwargs: Any) -> streamparse.Message:
    return streamparse.parse(text, FORMAT, id_factory=ids, **kwargs)


def invoke(name: str, *pairs: tuple[str, str], quote: str = '"') -> str:
    params = "".join(f"<parameter name={quote}{k}{quote}>{v}</parameter>\n" for k, v in pairs)
    return f"<invoke name={quote}{name}{quote}>\n{params}</invoke>\n"


def block(*invokes: str) -> str:
    return "\n<minimax:tool_call>\n" + "".join(invokes) + "</minimax:tool_call>"


calls_of = named_calls


def real_cases() -> list[dict[str, Any]]:
    return shared_cases(FORMAT)  # type: ignore[return-value]


# ----------------------------------------------------------------- real outputs


def test_the_prompt_opens_reasoning_then_content_and_two_calls_in_one_block() -> None:
    assert streamparse.thinking_forced_open(PROMPT, FORMAT)
    text = (FIXTURES / FORMAT / "minimax_reasoning_two_calls.txt").read_text()
    msg = parse(text, tools=TOOLS, prompt=PROMPT)
    assert msg == parse(text, tools=TOOLS, thinking_forced_open=True)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("in one block.")
    assert msg.content == "I'll look both up."
    assert calls_of(msg) == [
        ("get_weather", {"location": "Paris, France", "days": 3}),
        ("search", {"query": 'packing list | "rain" & <wind>',
                    "filters": {"folder": "travel", "year": 2025, "shared": False}, "tags": ["paris", "weather"]}),
    ]
    assert msg.rejected == []


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("case", real_cases(), ids=lambda c: c["case"])
def test_every_real_render_parses_in_both_modes_and_one_character_chunks(case: dict[str, Any]) -> None:
    expected = case["expected"]
    assert streamparse.thinking_forced_open(case["prompt_tail"], FORMAT) is True
    msg = parse(case["output"], tools=case["tools"], thinking_forced_open=True)
    assert (msg.content, msg.reasoning) == ((expected["content"] or "").strip(), (expected["reasoning"] or "").strip())
    assert calls_of(msg) == [(c["name"], c["arguments"]) for c in expected["tool_calls"] or []]
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(case["output"]), format=FORMAT, tools=case["tools"],
                                      thinking_forced_open=True, emit_calls=emit, id_factory=ids)
        assert streamed == msg
        assert_stream_matches(folded, msg)
    # `render` writes the template's turn; the generation prompt holds its `<think>⏎`.
    message = Message(content=expected["content"] or "", reasoning=expected["reasoning"] or "", tool_calls=[
        ToolCall(f"id{i}", c["name"], c["arguments"], "") for i, c in enumerate(expected["tool_calls"] or [])])
    assert streamparse.render(message, FORMAT) == "<think>\n" + case["output"]


# ----------------------------------------------------------------- names and values


@pytest.mark.parametrize("quote", ['"', "'", ""])
def test_invoke_and_parameter_names_in_double_single_or_no_quotes(quote: str) -> None:
    text = block(invoke("get_weather", ("location", "Paris"), quote=quote))
    assert calls_of(parse(text)) == [("get_weather", {"location": "Paris"})]


def test_values_are_byte_exact_strings_and_typed_by_the_schema() -> None:
    text = block(invoke("search", ("query", "  two words \n"), ("limit", " 5 "), ("exact", "true"),
                        ("filters", '{"a": null}'), ("cursor", "null"), ("note", "7")))
    assert calls_of(parse(text, tools=TOOLS)) == [("search", {
        "query": "  two words \n", "limit": 5, "exact": True, "filters": {"a": None}, "cursor": None, "note": "7"})]
    assert calls_of(parse(text))[0][1]["limit"] == " 5 "  # no tools: strings


def test_a_value_without_its_closer_ends_at_the_next_parameter_or_the_invoke_end() -> None:
    text = ('<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">x\n<parameter name="b">y\r\n</invoke>\n'
            "</minimax:tool_call>")
    assert calls_of(parse(text)) == [("f", {"a": "x", "b": "y"})]


def test_a_repeated_parameter_rejects_the_call() -> None:
    text = block(invoke("f", ("a", "1"), ("a", "2")))
    assert [r.status for r in parse(text).rejected] == ["invalid_json"]


# ----------------------------------------------------------------- blocks, bare calls, the end


def test_a_bare_invoke_is_a_call_and_the_block_closer_after_it_is_its_own() -> None:
    text = 'Checking.\n<invoke name="f">\n<parameter name="a">1</parameter>\n</invoke>\n</minimax:tool_call>'
    msg = parse(text)
    assert calls_of(msg) == [("f", {"a": "1"})] and msg.content == "Checking."


def test_text_in_the_block_outside_calls_is_content_and_whitespace_is_framing() -> None:
    text = ("A\n<minimax:tool_call>\nNote: two calls.\n" + invoke("f", ("a", "1")) + "\n"
            + invoke("g", ("b", "2")) + "</minimax:tool_call>")
    msg = parse(text)
    assert calls_of(msg) == [("f", {"a": "1"}), ("g", {"b": "2"})]
    assert msg.content == "A\n\nNote: two calls." and msg.rejected == []
    assert parse("A<minimax:tool_call>\n</minimax:tool_call>B") == parse("AB")


def test_a_stray_block_closer_is_content() -> None:
    assert parse("Done.</minimax:tool_call>").content == "Done.</minimax:tool_call>"


def test_the_end_tags_are_optional_at_the_end_when_the_last_value_is_closed() -> None:
    assert calls_of(parse('<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n')) \
        == [("f", {"a": "1"})]
    for cut in ('<minimax:tool_call>\n<invoke name="f',
                '<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1'):
        msg = parse(cut)
        assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["truncated"]


def test_a_call_inside_reasoning_stays_reasoning() -> None:
    text = "I could call " + block(invoke("f", ("a", "1"))) + "\n</think>\n\nDone."
    msg = parse(text, thinking_forced_open=True)
    assert msg.tool_calls == [] and "<invoke name=" in msg.reasoning and msg.content == "Done."


# ----------------------------------------------------------------- streaming


def test_string_values_stream_and_typed_values_arrive_when_they_close() -> None:
    text = block(invoke("search", ("query", 'a "b"\n'), ("limit", "5")))
    parser = streamparse.StreamParser(FORMAT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    deltas: list[streamparse.Delta] = []
    for char in text:
        deltas += parser.feed(char)
    deltas += parser.close()
    pieces = [tc.arguments for d in deltas for tc in d.tool_calls if tc.arguments]
    assert len(pieces) > 5 and "".join(pieces) == '{"query": "a \\"b\\"\\n", "limit": 5}'
    assert fold(deltas).calls[0]["name"] == "search"


def test_token_aware_mode_reads_the_block_tokens_only() -> None:
    text = "Hi." + block(invoke("f", ("a", "1")))
    tokens = [Token("Hi.\n"), Token("<minimax:tool_call>", special=True), Token(text[text.index(">\n<invoke") + 1:
                                                                                     text.index("</minimax")]),
              Token("</minimax:tool_call>", special=True)]
    assert calls_of(streamparse.parse(tokens, FORMAT, special_tokens="require")) == [("f", {"a": "1"})]
    assert streamparse.parse(text, FORMAT, special_tokens="require").tool_calls == []


@given(data=st.data(), value=st.text(st.sampled_from(list("ab <>/\n\t\"\\='é")), max_size=12))
def test_any_value_in_both_modes(data: st.DataObject, value: str) -> None:
    if any(tag in value for tag in ("</parameter>", "<parameter name=", "</invoke>")):
        return
    msg = assert_every_mode_agrees(data, "Hi." + block(invoke("f", ("a", value), ("b", "2"))), FORMAT, None)
    assert calls_of(msg) == [("f", {"a": value, "b": "2"})]
