"""An envelope found whole in the text in view is read at once by its body kind (`spec.WholeBody`:
`JsonCall.whole`), without a scanner: the shortcut `parse()` takes for every complete JSON call, and
a stream for a chunk that holds a whole call. It must give what the scanner and the kind's `parse`
give: here every corpus output is parsed both ways, and the cases where the shortcut must step aside
are written out.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import agreeing, ids
from corpus import Row, case_rows, fixture_rows

import streamparse
from streamparse import Message, StreamParser
from streamparse.bodies.json_call import JsonCall

ROWS = fixture_rows() + case_rows()


def _both_ways(text: str, fmt: str, **options: Any) -> tuple[tuple[Message, list[str], int], ...]:
    """The message (with each call's raw text, which `==` leaves out) and the characters scanned,
    read with the shortcut and without it."""
    made = []
    for whole in (True, False):
        parser = StreamParser(fmt, **options)
        if not whole:
            parser._whole_of = {}
        message = parser._parse(text)
        made.append((message, [call.raw for call in message.tool_calls], parser.scanned))
    return made[0], made[1]


@pytest.mark.parametrize("row", ROWS, ids=[row.label for row in ROWS])
def test_every_corpus_output_reads_the_same_with_and_without_the_shortcut(row: Row) -> None:
    for on_rejected in ("report", "content"):
        shortcut, scanned = _both_ways(row.text, row.format, tools=row.tools,
                                       thinking_forced_open=row.thinking_forced_open, on_rejected=on_rejected,
                                       id_factory=ids)
        assert shortcut == scanned


def test_the_shortcut_is_taken_for_a_whole_call() -> None:
    """(Else the test above compares the general path with itself.)"""
    taken = []
    whole = JsonCall.whole

    def spy(self: JsonCall, text: str, pos: int) -> Any:
        found = whole(self, text, pos)
        taken.append(found is not None)
        return found
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(JsonCall, "whole", spy)
        message = streamparse.parse('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', "hermes")
    assert taken == [True] and message.tool_calls[0].arguments == {"a": 1}


HERMES = [
    # A closer inside a string of the object: the object goes on past it.
    '<tool_call>{"name": "f", "arguments": {"x": "</tool_call>"}}</tool_call> after',
    # Text between the object and the closer, a second object, a doubled closing brace.
    '<tool_call>{"name": "f", "arguments": {}} junk</tool_call>',
    '<tool_call>{"name": "f", "arguments": {}}\n{"name": "g", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "f", "arguments": {"a": 1}}}</tool_call>',
    # Not an object; an object that is not strict JSON; no closer; an empty body.
    '<tool_call>["f"]</tool_call>',
    '<tool_call>{"name": "f", "arguments": {"a": NaN}}</tool_call>',
    '<tool_call>{"name": "f", "arguments": {"a": 1, "a": 2}}</tool_call>',
    '<tool_call>{"name": "f", "arguments": {"a": 1}}',
    "<tool_call>\n</tool_call>",
    # Rejected by the tools: unknown, and against its schema; then a call that is fine.
    '<tool_call>{"name": "nope", "arguments": {}}</tool_call>text<tool_call>{"name": "f", "arguments": {"a": "x"}}'
    '</tool_call><tool_call>{"name": "f", "arguments": {"a": 2}}</tool_call>',
    # In reasoning (extracted), and after it.
    '<think>plan <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call></think>ok',
]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}}}}]


@pytest.mark.parametrize("text", HERMES)
@pytest.mark.parametrize("options", [{}, {"on_rejected": "content"}, {"tool_calls_in_reasoning": "extract"}])
def test_hermes_bodies_the_shortcut_must_read_as_the_scanner_does(text: str, options: dict[str, Any]) -> None:
    shortcut, scanned = _both_ways(text, "hermes", tools=TOOLS, id_factory=ids, **options)
    assert shortcut == scanned
    # Streamed a character at a time (never whole) and in one chunk (whole), both emit modes: parse().
    agreeing(text, "hermes", (1, len(text)), tools=TOOLS, **options)


def test_a_reader_that_fails_leaves_the_envelope_to_the_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    text = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    expected = streamparse.parse(text, "hermes", tools=TOOLS, id_factory=ids)

    def broken(self: JsonCall, text: str, pos: int) -> Any:
        raise RuntimeError("a bug")
    monkeypatch.setattr(JsonCall, "whole", broken)
    assert streamparse.parse(text, "hermes", tools=TOOLS, id_factory=ids) == expected
    assert expected.tool_calls[0].arguments == {"a": 1}


def test_a_stream_whose_chunk_holds_a_whole_call_gives_its_deltas() -> None:
    text = 'Hi.<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    deltas = list(streamparse.stream(["Hi.", text[3:]], "hermes", tools=TOOLS, id_factory=ids))
    calls = [call for delta in deltas for call in delta.tool_calls]
    assert [delta.content for delta in deltas if delta.content] == ["Hi."]
    assert [(call.index, call.id, call.name, call.arguments) for call in calls] == [(0, ids(0), "f", '{"a": 1}')]
