"""Phi-4-mini-instruct / Firefunction v2 (`phi4_mini`): `functools[…]`, a JSON call list after a plain
word, only at the start of the output or after whitespace (Decision 19)."""

from __future__ import annotations

import json

from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message

FMT = "phi4_mini"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())


def both_modes(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 2, 3, 7), **options)


def test_content_then_a_list_of_two_calls() -> None:
    msg = both_modes((FIXTURES / FMT / "content_two_calls.txt").read_text(), tools=TOOLS)
    assert msg.content == "Let me check both for you."
    assert named_calls(msg) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                                ("get_time", {"timezone": "Europe/Paris"})]


def test_functools_opens_a_list_only_at_the_start_or_after_whitespace() -> None:
    assert named_calls(both_modes('functools[{"name": "f", "arguments": {}}]')) == [("f", {})]
    assert named_calls(both_modes('Sure:\nfunctools[{"name": "f", "arguments": {}}]')) == [("f", {})]
    for text in ('x.functools[{"name": "f", "arguments": {}}]', "import functools\nfunctools.partial(f)",
                 "functools [1]"):
        msg = both_modes(text)
        assert msg.tool_calls == [] and msg.rejected == [] and msg.content == text


def test_an_empty_list_is_no_call_and_text_after_the_list_is_content() -> None:
    msg = both_modes("A functools[] B")  # no call: the text stays content, as written
    assert (msg.content, msg.tool_calls, msg.rejected) == ("A functools[] B", [], [])
    msg = both_modes('functools[{"name": "f", "arguments": {}}] Done.')
    assert (msg.content, named_calls(msg)) == ("Done.", [("f", {})])


def test_cut_off_and_invalid_lists() -> None:
    msg = both_modes('functools[{"name": "f", "arguments": {}}, {"name": "g", "argu')
    assert named_calls(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["truncated"]
    msg = both_modes('functools[{"name": "f", "arguments": {}}, {oops')
    assert named_calls(msg) == [("f", {})] and [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == 'functools[{"name": "f", "arguments": {}}, {oops'


def test_render_reads_back_and_the_template_names_no_format() -> None:
    message = streamparse.parse((FIXTURES / FMT / "content_two_calls.txt").read_text(), FMT)
    again = both_modes(streamparse.render(message, FMT))
    assert (again.content, named_calls(again)) == (message.content, named_calls(message))
