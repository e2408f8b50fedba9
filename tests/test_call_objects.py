"""Call objects as models write them: extra, repeated and reordered members, on every format whose
calls are JSON call objects, in both emit modes (issue: progressive fragments must join to
`arguments_json`, with the ids of `parse()`)."""

from __future__ import annotations

import hypothesis.strategies as st
from conftest import assert_every_mode_agrees
from hypothesis import given

import streamparse

MEMBERS = [("name", '"f"'), ("name", '"g"'), ("arguments", '{"a": 1, "s": "x}y"}'), ("parameters", '{"b": [2]}'),
           ("arguments", '"{\\"c\\": 3}"'), ("id", '"abcdefghi"'), ("type", '"function"'),
           ("extra", '{"k": "</tool_call>"}'), ("arguments", "[1]")]
# Each format's wire shape around one call object.
WRAP = {"hermes": "<tool_call>\n{}\n</tool_call>", "mistral": "[TOOL_CALLS][{}]", "llama3_json": "<|python_tag|>{}",
        "longcat": "<longcat_tool_call>\n{}\n</longcat_tool_call>", "gigachat3": "<|function_call|>{}",
        "minimax_m1": "<tool_calls>\n{}\n{}\n</tool_calls>"}
TOOLS = [{"name": n, "parameters": {"type": "object"}} for n in ("f", "g")]


@st.composite
def call_objects(draw: st.DrawFn) -> str:
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=0, max_size=5))
    spaces = draw(st.sampled_from(["", " ", "\n  "]))
    return "{" + spaces + ("," + spaces).join(f'"{key}": {value}' for key, value in members) + spaces + "}"


@given(st.data(), st.sampled_from(sorted(WRAP)), st.lists(call_objects(), min_size=1, max_size=3),
       st.sampled_from([None, TOOLS]))
def test_every_json_call_object_streams_exactly_what_parse_reads(data: st.DataObject, fmt: str, objects: list[str],
                                                                  tools: object) -> None:
    text = "Calling." + "".join(WRAP[fmt].replace("{}", obj) for obj in objects)
    parsed = assert_every_mode_agrees(data, text, fmt, tools)
    # Every object is a call or a rejection; in llama3_json one with another key is an answer (content).
    answers = [obj for obj in objects if fmt == "llama3_json" and obj in parsed.content]
    assert len(parsed.tool_calls) + len(parsed.rejected) + len(answers) >= 1


def test_the_two_progressive_cases_of_the_issue() -> None:
    both = '<tool_call>{"name": "f", "parameters": {"a": 1}, "arguments": {"b": 2}}</tool_call>'
    late_id = '<tool_call>{"name": "f", "arguments": {"b": 2}, "id": "mine"}</tool_call>'
    for text in (both, late_id):
        parser = streamparse.StreamParser("hermes", emit_calls="progressive", id_factory=lambda n: f"call_{n}")
        deltas = [d for ch in text for d in parser.feed(ch)] + parser.close()
        calls = parser.message.tool_calls
        pieces = [p for d in deltas for p in d.tool_calls]
        started = {p.index: p.id for p in pieces if p.id is not None}
        statuses = {p.index: p.status for p in pieces if p.status is not None}
        accepted = [i for i in sorted(started) if i not in statuses]
        assert [started[i] for i in accepted] == [c.id for c in calls]
        for i, call in zip(accepted, calls, strict=True):
            assert "".join(p.arguments for p in pieces if p.index == i) == call.arguments_json
    assert [r.status for r in streamparse.parse(both).rejected] == ["invalid_json"]
    assert streamparse.parse(late_id, id_factory=lambda n: f"call_{n}").tool_calls[0].id == "call_0"


# Formats whose envelope holds a JSON list of call objects, with their key maps.
LIST_MEMBERS = {
    "granite": MEMBERS,
    "nemotron": MEMBERS,
    "lfm2": MEMBERS,
    "command_r7b": [("tool_name", '"f"'), ("tool_name", '"g"'), ("parameters", '{"a": 1, "s": "x]y"}'),
                    ("arguments", '{"b": [2]}'), ("parameters", '"{\\"c\\": 3}"'), ("tool_call_id", '"0"'),
                    ("tool_call_id", "7"), ("tool_call_id", "null"), ("tool_call_id", '"0"'), ("name", '"h"'),
                    ("parameters", "[1]")],
    "hunyuan_a13b": MEMBERS,
    "apriel": MEMBERS,
    "apertus": [("f", '{"a": 1}'), ("g", '{"s": "}]"}'), ("f", '"{\\"c\\": 3}"'), ("g", "3"), ("f", "{}")],
}
LIST_WRAP = {"granite": ("<|tool_call|>", ""), "nemotron": ("<TOOLCALL>", "</TOOLCALL>"),
             "command_r7b": ("<|START_ACTION|>", "<|END_ACTION|>"), "apertus": ("<|tools_prefix|>", "<|tools_suffix|>"),
             "lfm2": ("<|tool_call_start|>", "<|tool_call_end|>"), "hunyuan_a13b": ("<tool_calls>", "</tool_calls>"),
             "apriel": ("<tool_calls>", "</tool_calls>"), "cohere_command": ("<|START_ACTION|>", "<|END_ACTION|>")}
LIST_MEMBERS["cohere_command"] = LIST_MEMBERS["command_r7b"]


@st.composite
def call_lists(draw: st.DrawFn, fmt: str) -> str:
    opener, closer = LIST_WRAP[fmt]
    objects = []
    for _ in range(draw(st.integers(0, 3))):
        members = draw(st.lists(st.sampled_from(LIST_MEMBERS[fmt]), min_size=0, max_size=4))
        spaces = draw(st.sampled_from(["", " ", "\n    "]))
        objects.append("{" + spaces + ("," + spaces).join(f'"{k}": {v}' for k, v in members) + spaces + "}")
    objects += draw(st.lists(st.sampled_from(['"x"', "[]", "{", "5"]), max_size=1))
    body = draw(st.sampled_from([", ", ",\n    ", " "])).join(objects)
    if draw(st.booleans()) or len(objects) != 1:
        body = "[" + body + draw(st.sampled_from(["]", "]", "", "] tail"]))
    return opener + body + draw(st.sampled_from([closer, closer, "", " after"]))


@given(st.data(), st.sampled_from(sorted(LIST_WRAP)), st.sampled_from([None, TOOLS]))
def test_every_call_list_streams_exactly_what_parse_reads(data: st.DataObject, fmt: str, tools: object) -> None:
    envelopes = data.draw(st.lists(call_lists(fmt), min_size=1, max_size=3))
    text = "Calling." + "\n".join(envelopes)
    assert_every_mode_agrees(data, text, fmt, tools)
