"""Liquid LFM2 / LFM2.5: the format, and the Decisions of FORMATS.md for it (21-24), by example.

`<think>…</think>` reasoning at the start; calls in `<|tool_call_start|>…<|tool_call_end|>` (special
tokens) whose body is a pythonic list (LFM2.5) or JSON call objects (LFM2), chosen by the body's first
characters. Every example is checked with `parse`, and streamed one character at a time in both emit
modes."""

from __future__ import annotations

import json

import pytest
from conftest import CASES, FIXTURES, assert_stream_matches, ids, run_stream

import streamparse
from streamparse import Message, StreamParser, Token, parse
from streamparse.types import Delta

FMT = "lfm2"
OPEN, CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def both_modes(text: str, **options: object) -> Message:
    """parse(), and 1-character streams in both emit modes, agree; the parsed message is returned."""
    parsed = parse(text, FMT, id_factory=ids, **options)  # type: ignore[arg-type]
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(text), format=FMT, emit_calls=emit, id_factory=ids, **options)
        assert streamed == parsed
        assert_stream_matches(folded, parsed)
    return parsed


def calls(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def rejected(message: Message) -> list[tuple[str, str]]:
    return [(r.status, r.raw) for r in message.rejected]


# ----------------------------------------------------------------- real outputs


def test_lfm25_reasoning_content_and_a_pythonic_list() -> None:
    msg = both_modes((FIXTURES / FMT / "lfm25_reasoning_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.reasoning.startswith("The user wants") and msg.reasoning.endswith("C:\\notes\\paris.txt.")
    assert msg.content == "Let me check the weather and save the note."
    # The template writes strings raw in '…': the backslashes, newline and tab are the value's own.
    assert calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                          ("write_file", {"path": "C:\\notes\\paris.txt",
                                          "content": "Weather in Paris:\n\tcheck at 9:00"})]


def test_lfm2_json_calls_between_newlines_then_the_answer() -> None:
    msg = both_modes((FIXTURES / FMT / "lfm2_json_calls.txt").read_text(), tools=TOOLS)
    assert calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                          ("get_time", {"timezone": "Europe/Paris"})]
    assert msg.content == "Checking the weather and the time in Paris." and msg.reasoning == ""


def test_lfm25_values_python_and_json_literals() -> None:
    # Dicts as JSON (tojson), other values by Python's str(): True/False/None, lists as Python reprs.
    text = (f"{OPEN}[create_event(title='Team \"sync\" — Q3', all_day=False, location=None, priority=0.75, "
            "attendees=[{'name': 'Zoë', 'optional': True}], metadata={\"ok\": true, \"n\": null, \"e\": {}})]"
            f"{CLOSE}")
    assert calls(both_modes(text)) == [("create_event", {
        "title": 'Team "sync" — Q3', "all_day": False, "location": None, "priority": 0.75,
        "attendees": [{"name": "Zoë", "optional": True}], "metadata": {"ok": True, "n": None, "e": {}}})]


# ----------------------------------------------------------------- the body: chosen by its first characters


@pytest.mark.parametrize("body", [
    '{"name": "f", "arguments": {"a": 1}}',
    '\n{"name": "f", "arguments": {"a": 1}}\n',
    '[{"name": "f", "arguments": {"a": 1}}]',  # decision 23: `[` then `{` is a JSON list
    '[ \n {"name": "f", "arguments": {"a": 1}}]',
    "[f(a=1)]",
    " [ f(a = 1) ] ",
])
def test_pythonic_or_json_by_the_first_characters(body: str) -> None:
    msg = both_modes(f"{OPEN}{body}{CLOSE}")
    assert calls(msg) == [("f", {"a": 1})] and msg.rejected == [] and msg.content == ""


def test_a_json_list_holds_several_calls_with_lenient_keys() -> None:
    # Decision 24: `parameters` for `arguments`; no arguments key means {}.
    msg = both_modes(f'{OPEN}[{{"name": "f", "parameters": {{"a": 1}}}}, {{"name": "g"}}]{CLOSE}')
    assert calls(msg) == [("f", {"a": 1}), ("g", {})]


def test_an_envelope_holding_an_empty_list_yields_nothing() -> None:
    # Decision 23: no call, no rejection; the text around it is content.
    msg = both_modes(f"Nothing to call.{OPEN}[]{CLOSE} Done.")
    assert (msg.content, msg.tool_calls, msg.rejected) == ("Nothing to call. Done.", [], [])
    assert both_modes(f"{OPEN}[ ]").rejected == []  # its closer missing at the end: tolerated


def test_a_body_that_is_neither_is_rejected() -> None:
    msg = both_modes(f"{OPEN}get_weather(location='Paris'){CLOSE}after")
    assert rejected(msg) == [("invalid_json", f"{OPEN}get_weather(location='Paris'){CLOSE}")]
    assert msg.content == "after"


def test_empty_and_cut_off_envelopes() -> None:
    assert rejected(both_modes(f"{OPEN} {CLOSE}")) == [("invalid_json", f"{OPEN} {CLOSE}")]
    assert rejected(both_modes(f"Hi{OPEN}")) == [("truncated", OPEN)]


# ----------------------------------------------------------------- decision 22: strings


def test_single_quoted_strings_are_raw() -> None:
    text = f"{OPEN}[f(path='C:\\temp\\new', text='line 1\nline 2\tend', esc='\\n is two characters')]{CLOSE}"
    assert calls(both_modes(text)) == [("f", {"path": "C:\\temp\\new", "text": "line 1\nline 2\tend",
                                              "esc": "\\n is two characters"})]


def test_a_backslash_before_the_closing_quote_does_not_escape_it() -> None:
    assert calls(both_modes(f"{OPEN}[f(a='C:\\', b=2)]{CLOSE}")) == [("f", {"a": "C:\\", "b": 2})]


def test_double_quoted_strings_keep_their_escapes() -> None:
    text = f'{OPEN}[f(a="x\\ny\\t\\"q\\"\\u00e9", b={{"k": "v\\\\w"}})]{CLOSE}'
    assert calls(both_modes(text)) == [("f", {"a": 'x\ny\t"q"é', "b": {"k": "v\\w"}})]


def test_an_inner_single_quote_ends_the_string_and_the_call_is_invalid() -> None:
    text = f"{OPEN}[f(a='it's'), g(b=1)]{CLOSE}Done."
    msg = both_modes(text)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == f"{OPEN}[f(a='it's'), g(b=1)]{CLOSE}" and msg.content == "Done."


def test_a_rendered_string_with_a_quote_round_trips_in_double_quotes() -> None:
    call = streamparse.ToolCall("id0", "f", {"a": "it's", "b": ["x'y", "C:\\z"], "c": {"k": "'"}}, "")
    text = streamparse.render(Message(content="", tool_calls=[call]), FMT)
    assert text == f"""{OPEN}[f(a="it's", b=["x'y", 'C:\\z'], c={{"k": "'"}})]{CLOSE}"""
    assert calls(both_modes(text)) == [("f", call.arguments)]


# ----------------------------------------------------------------- decision 21: unclosed lists


def test_a_cut_off_list_keeps_its_complete_calls() -> None:
    msg = both_modes(f"{OPEN}[f(a=1), g(b='x")
    assert calls(msg) == [("f", {"a": 1})] and [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes(f'{OPEN}[{{"name": "f", "arguments": {{}}}}, {{"name": "g", "argu')
    assert calls(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["truncated"]


@pytest.mark.parametrize("text", [f"{OPEN}[f(a=1)]", f"{OPEN}[f(a=1)", f"{OPEN}[f(a=1)]\n",
                                  f'{OPEN}{{"name": "f", "arguments": {{"a": 1}}}}\n'])
def test_a_missing_bracket_or_end_marker_alone_at_the_end_is_tolerated(text: str) -> None:
    msg = both_modes(text)
    assert calls(msg) == [("f", {"a": 1})] and msg.rejected == []


def test_the_next_opener_ends_an_envelope_whose_closer_is_missing() -> None:
    msg = both_modes(f"{OPEN}[f()]\n{OPEN}[g()]{CLOSE}")
    assert calls(msg) == [("f", {}), ("g", {})] and msg.rejected == [] and msg.content == ""


def test_text_after_the_list_inside_the_envelope_is_not_lost() -> None:
    msg = both_modes(f"{OPEN}[f()] and more{CLOSE}")
    assert calls(msg) == [("f", {})]
    assert [(r.status, r.errors) for r in msg.rejected] == [
        ("invalid_json", [f"text after the ']' of {OPEN}: 'and more'"])]


# ----------------------------------------------------------------- content and reasoning


def test_text_before_and_after_the_envelope_is_content() -> None:
    msg = both_modes(f"Checking:{OPEN}[f()]{CLOSE}Done.")
    assert (msg.content, calls(msg)) == ("Checking:Done.", [("f", {})])


def test_reasoning_only_at_the_start_and_calls_inside_it_stay_reasoning() -> None:
    msg = both_modes(f"<think>maybe {OPEN}[f()]{CLOSE}")
    assert (msg.reasoning, msg.tool_calls) == (f"maybe {OPEN}[f()]{CLOSE}", [])
    assert both_modes("Hi <think>x</think>").content == "Hi <think>x</think>"


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
def test_templates_are_detected_and_their_prompts_do_not_force_reasoning_open() -> None:
    templates = CASES.parent
    for name in ("LFM2-8B-A1B.jinja", "LFM2.5-8B-A1B.jinja"):
        template = (templates / name).read_text()
        assert streamparse.detect_format(template) == FMT
        assert streamparse.detect_format({"chat_template": template}) == FMT
    assert streamparse.thinking_forced_open("<|im_start|>assistant\n", FMT) is False
    assert streamparse.thinking_forced_open("<|im_start|>assistant\n<think>", FMT) is True


# ----------------------------------------------------------------- streaming


def test_progressive_mode_streams_each_call_before_the_envelope_ends() -> None:
    # The body kind is chosen by the first characters, then the chosen kind's streamer sends each call.
    for text in (f"{OPEN}[f(a=1), g(b='x')", f'{OPEN}[{{"name": "f", "arguments": {{"a": 1}}}}, {{"name": "g"'):
        parser = StreamParser(FMT, emit_calls="progressive", id_factory=ids)
        deltas: list[Delta] = parser.feed(text)
        sent = [(t.index, t.id, t.name, t.arguments) for d in deltas for t in d.tool_calls or []]
        assert sent[0][:3] == (0, "call_0", "f") and "".join(t[3] or "" for t in sent if t[0] == 0) == '{"a": 1}'
        assert (1, "call_1", "g") in [t[:3] for t in sent]


def test_special_tokens() -> None:
    # Token-aware: the markers count only as tokens; written as text inside a value they are text.
    tokens = [Token(OPEN, special=True), Token("[f(a='see "), Token(CLOSE), Token("')]"),
              Token(CLOSE, special=True), Token(f"Say {OPEN}.")]
    msg = parse(tokens, FMT, special_tokens="require")
    assert calls(msg) == [("f", {"a": f"see {CLOSE}"})] and msg.content == f"Say {OPEN}."
