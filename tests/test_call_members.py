"""The per-call pieces of a JSON call's parse, each with a fast path for the common call object
(`{"name": "…", "arguments": {…}}`): the members and their raw texts (`calls.members_of`), the call
they make (`calls.call_from_members`), the objects the engine makes from them (`types.made_*`), and
the parser's starting state, worked out once per `Options` (`engine.parser._fixed_state`).
Each fast path is checked against what the general path gives, on drawn objects and by hand.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import hypothesis.strategies as st
import jiter
import pytest
from hypothesis import given

import streamparse
from streamparse import Message, Options, StreamParser, ToolCall
from streamparse.calls import call_from_members, members_of
from streamparse.engine import parser as engine_parser
from streamparse.spec import ParsedCall, Rejection
from streamparse.types import RejectedCall, made_message, made_tool_call

_SPACE = st.text(" \t\n\r", max_size=3)
_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_STRINGS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | _STRINGS,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
                       max_leaves=6)


def _written(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


_MEMBERS = st.lists(st.tuples(_KEYS, _VALUES, st.booleans()), min_size=1, max_size=4,
                    unique_by=lambda member: member[0])
# The common call object's shape: a string, then any value (`members_of`'s fast path).
_STRING_THEN_VALUE = st.tuples(st.tuples(_KEYS, _STRINGS, st.booleans()),
                               st.tuples(_KEYS, _VALUES, st.booleans())).filter(
    lambda pair: pair[0][0] != pair[1][0]).map(list)


@given(_MEMBERS | _STRING_THEN_VALUE, st.lists(_SPACE, min_size=20, max_size=20), st.text("x ", max_size=3))
def test_members_of_gives_each_key_value_and_raw_text_as_written(
        members: list[tuple[str, Any, bool]], spaces: list[str], before: str) -> None:
    """Whatever the members (strings with quotes, backslashes and escapes, keys with escapes,
    containers, scalars), their spacing and the text before the object."""
    parts, expected = ["{", spaces[0]], []
    for index, (key, value, ascii_only) in enumerate(members):
        raw = _written(value, ascii_only)
        if index:
            parts += [spaces[4 * index], ",", spaces[4 * index + 1]]
        parts += [_written(key, ascii_only), spaces[4 * index + 2], ":", spaces[4 * index + 3], raw]
        expected.append((key, value, raw))
    parts += [spaces[19], "}"]
    text = before + "".join(parts) + " after"
    end = len(text) - len(" after")
    value = jiter.from_json(text[len(before):end].encode())
    assert members_of(text, len(before), end, value) == expected


def test_members_of_a_name_with_escaped_quotes_and_backslashes() -> None:
    text = r'{"name" : "a \"b\" c\\", "arguments":{"x": "}"} }'
    value = jiter.from_json(text.encode())
    assert members_of(text, 0, len(text), value) == [
        ("name", 'a "b" c\\', r'"a \"b\" c\\"'), ("arguments", {"x": "}"}, '{"x": "}"}')]


def test_members_of_two_members_whose_first_is_not_a_string() -> None:
    text = '{"n": 12, "arguments": [1, {"a": 2}]}'
    assert members_of(text, 0, len(text), jiter.from_json(text.encode())) == [
        ("n", 12, "12"), ("arguments", [1, {"a": 2}], '[1, {"a": 2}]')]


def test_members_of_escaped_keys_are_read_by_the_string_scanner() -> None:
    text = '{"na\\u006de": "f", "\\"k\\"": {}}'
    assert members_of(text, 0, len(text), jiter.from_json(text.encode())) == [
        ("name", "f", '"f"'), ('"k"', {}, "{}")]


_CALL = ParsedCall("write_file", {"path": "a"}, '{"path": "a"}')


@pytest.mark.parametrize(("members", "expected"), [
    ([("name", "write_file", '"write_file"'), ("arguments", {"path": "a"}, '{"path": "a"}')], _CALL),
    ([("name", "write_file", '"write_file"'), ("parameters", {"path": "a"}, '{"path": "a"}')], _CALL),
    # The arguments first, the name last: the general path gives the same call.
    ([("arguments", {"path": "a"}, '{"path": "a"}'), ("name", "write_file", '"write_file"')], _CALL),
    # Arguments written as a JSON string holding the object: its text is the arguments JSON.
    ([("name", "write_file", '"write_file"'), ("arguments", '{"path": "a"}', '"{\\"path\\": \\"a\\"}"')], _CALL),
    ([("name", " ", '" "'), ("arguments", {}, "{}")],
     Rejection("invalid_json", ['$.name: the call object has no "name" string'])),
    ([("name", 3, "3"), ("arguments", {}, "{}")],
     Rejection("invalid_json", ['$.name: the call object has no "name" string'])),
    ([("name", "f", '"f"'), ("arguments", [1], "[1]")],
     Rejection("invalid_json", ["$.arguments: arguments must be a JSON object, got list"], name="f")),
    ([("name", "f", '"f"'), ("other", {}, "{}")], ParsedCall("f", {}, "{}")),
    ([("arguments", {}, "{}"), ("parameters", {}, "{}")],
     Rejection("invalid_json", ["$: the call object has both 'arguments' and 'parameters'; "
                                "which one holds the arguments is unclear"])),
    ([("name", "f", '"f"'), ("name", "g", '"g"')],
     Rejection("invalid_json", ["$: the call object has 'name' more than once"])),
])
def test_call_from_members(members: list[tuple[str, Any, str]], expected: object) -> None:
    assert call_from_members(members) == expected


def test_call_from_members_keeps_the_id_and_the_name_as_written() -> None:
    members = [("name", " f ", '" f "'), ("arguments", {}, "{}")]
    assert call_from_members(members, call_id="c1") == ParsedCall(" f ", {}, "{}", "c1")
    # A format whose name key is also an argument key is read by the general path.
    assert call_from_members([("a", "f", '"f"'), ("b", {}, "{}")], ("a",), ("a", "b")) == Rejection(
        "invalid_json", ["$: the call object has both 'a' and 'b'; which one holds the arguments is unclear"])


def test_made_objects_are_the_dataclasses_their_constructors_make() -> None:
    made = made_tool_call("c1", "f", {"a": 1}, '{"a": 1}', "<tool_call>…")
    built = ToolCall("c1", "f", {"a": 1}, '{"a": 1}', "<tool_call>…")
    assert made == built and vars(made) == vars(built) and repr(made) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "g"  # type: ignore[misc]
    rejected = [RejectedCall("invalid_json", ["x"], "raw")]
    message = made_message("hi", "hmm", [made], rejected)
    assert message == Message("hi", "hmm", [built], rejected) and vars(message) == vars(Message("hi", "hmm", [built],
                                                                                                 rejected))
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = ""  # type: ignore[misc]


_TEXT = ('<think>\nplan\n</think>\n\nWriting.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')


def test_parsers_of_one_options_share_no_state() -> None:
    """The options' part is worked out once and shared; each parser's state is its own."""
    options = Options(format="hermes", id_factory=lambda k: f"id{k}")
    first, second = StreamParser.from_options(options), StreamParser.from_options(options)
    for piece in (_TEXT[:30], _TEXT[30:]):
        first.feed(piece)
    second.feed("just text")
    first.close()
    second.close()
    assert first.message == streamparse.parse(_TEXT, "hermes", id_factory=lambda k: f"id{k}")
    assert second.message == Message(content="just text")
    assert len(first.message.tool_calls) == 1 and first._output is not second._output
    assert first._settler is not second._settler


def test_options_that_differ_give_their_own_state() -> None:
    """Forced-open reasoning, then not, then forced again: each parse as its options say."""
    for _ in range(2):
        assert streamparse.parse("a</think>b", "hermes", thinking_forced_open=True) == Message("b", "a")
        assert streamparse.parse("a</think>b", "hermes") == Message("a</think>b")


def test_many_options_evict_the_oldest_state_and_stay_correct() -> None:
    count = 3 * engine_parser._FIXED_SIZE
    made = [Options(format="hermes", id_factory=lambda k, n=n: f"o{n}_{k}") for n in range(count)]
    for n, options in enumerate(made):
        parser = StreamParser.from_options(options)
        parser.feed(_TEXT)
        parser.close()
        assert parser.message.tool_calls[0].id == f"o{n}_0"
    assert len(engine_parser._FIXED) <= engine_parser._FIXED_SIZE
    assert all(id(options) == key for key, (options, _) in engine_parser._FIXED.items())  # each kept with its key


def test_bad_options_raise_every_time() -> None:
    """A check of the options is not skipped for having been made before."""
    options = Options(format="nemotron", special_tokens="require")
    for _ in range(2):
        with pytest.raises(ValueError, match="declares no special tokens"):
            StreamParser.from_options(options)
