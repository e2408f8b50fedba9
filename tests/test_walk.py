"""A JSON body is walked once while it streams: in progressive mode the streamer reads the structure
from the marks of the walk that finds the envelope's end (`scanning.Marks`), whatever the chunking.

The marks are checked against a reference walk written here from the JSON grammar, over drawn JSON
values cut at drawn places and given to the scanners as the engine gives them (the held-back text
again, with the next chunk)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, agreeing
from hypothesis import given, settings
from hypothesis import strategies as st

from streamparse import scanning
from streamparse.json_reader import JsonValueScanner
from streamparse.registry import get_format
from streamparse.scanning import MEMBERS, TOP, JsonAwareScanner

_KEYS = st.text(alphabet=st.sampled_from('ab"\\{}[]:, \n\u00e9'), max_size=6)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                     st.floats(allow_nan=False, allow_infinity=False), _KEYS)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=12)
_CONTAINERS = st.one_of(st.lists(_VALUES, max_size=4), st.dictionaries(_KEYS, _VALUES, max_size=4))


def reference_marks(text: str, depth: int) -> list[int]:
    """The positions `Marks` promises, from a plain character walk of one JSON text: brackets that
    open a value at depth <= `depth` and their partners, and quotes, `:` and `,` at depths 1 to `depth`."""
    marks: list[int] = []
    level, in_string, escaped = 0, False, False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if level <= depth:
                    marks.append(at)
        elif char == '"' and level > 0:
            in_string = True
            if level <= depth:
                marks.append(at)
        elif char in "[{":
            if level <= depth:
                marks.append(at)
            level += 1
        elif char in "]}":
            if level <= depth + 1:
                marks.append(at)
            level -= 1
        elif char in ":," and 0 < level <= depth:
            marks.append(at)
    return marks


def streamed_marks(scanner: Any, text: str, cuts: list[int], depth: int) -> list[int]:
    """Give `text` to a recording scanner in pieces, as the engine does, and collect its marks as
    positions in `text`."""
    marks_source = scanner.record(depth)
    found: list[int] = []
    body_at = 0  # where the text the scanner was given starts
    carry = ""
    bounds = [0, *sorted(set(cuts)), len(text)]
    for start, end in itertools.pairwise(bounds):
        view = carry + text[start:end]
        result = scanner.scan(view, 0)
        found += [body_at + at for at in marks_source.take(view[: result.safe])]
        if result.end is not None:
            break
        body_at += result.safe
        carry = view[result.safe:]
    return found


@settings(max_examples=300, deadline=None)
@given(value=_CONTAINERS, indent=st.sampled_from([None, 0, 2]), depth=st.sampled_from([TOP, 1, MEMBERS]),
       data=st.data())
def test_marks_do_not_depend_on_the_chunking(value: Any, indent: int | None, depth: int, data: st.DataObject) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    expected = reference_marks(text, depth)
    assert streamed_marks(JsonAwareScanner(()), text + "</end>", cuts, depth) == expected
    assert streamed_marks(JsonValueScanner(()), text, cuts, depth) == expected


def test_a_complete_top_level_value_is_still_skimmed_when_only_its_brackets_are_recorded() -> None:
    text = '{"a": [1, {"b": "}"}], "c": "x"}'
    assert streamed_marks(JsonAwareScanner(()), text + "</end>", [], TOP) == [0, len(text) - 1]
    assert streamed_marks(JsonAwareScanner(()), text + "</end>", [], MEMBERS) == reference_marks(text, MEMBERS)


# Formats whose envelope scanner walks the JSON body, with a fixture each: in progressive mode the
# streamer must read that walk, never one of its own (`scanning.PieceWalk`).
_RIDING = ["hermes", "mistral", "deepseek_r1", "deepseek_v3_1", "kimi_k2", "gpt_oss", "granite", "nemotron",
           "command_r7b", "apertus", "cohere_command", "longcat", "gigachat3", "apriel", "hunyuan_a13b", "phi4_mini",
           "minimax_m1", "inkling"]


def _fixtures(fmt: str) -> list[Path]:
    return sorted((FIXTURES / fmt).glob("*.txt"))


def own_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The depths of the walks streamers make of their own (`scanning.PieceWalk`), as they are made."""
    made: list[int] = []
    real = scanning.PieceWalk.__init__

    def counted(self: scanning.PieceWalk, depth: int) -> None:
        made.append(depth)
        real(self, depth)

    monkeypatch.setattr(scanning.PieceWalk, "__init__", counted)
    return made


@pytest.mark.parametrize("fmt", _RIDING)
def test_progressive_streamers_read_the_scanners_walk(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    walks = own_walks(monkeypatch)
    tools = json.loads((FIXTURES / fmt / "tools.json").read_text(encoding="utf-8"))
    streamed = 0
    for path in _fixtures(fmt):
        message = agreeing(path.read_text(encoding="utf-8"), fmt, sizes=(1, 7), tools=tools)
        streamed += len(message.tool_calls)
    assert streamed > 0, "the fixtures hold accepted calls"
    assert walks == []


def test_a_streamer_walks_the_body_itself_only_where_the_scanner_does_not_walk_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # LFM2's envelope ends at a special token (`TagScanner`): its JSON choice walks the body once, itself.
    walks = own_walks(monkeypatch)
    text = '<|tool_call_start|>[{"name": "f", "arguments": {"a": [1, {"b": 2}]}}]<|tool_call_end|>'
    assert [(c.name, c.arguments) for c in agreeing(text, "lfm2").tool_calls] == [("f", {"a": [1, {"b": 2}]})]
    assert walks and set(walks) == {MEMBERS}
    assert get_format("lfm2").envelopes[0].body.scanner().__class__ is scanning.TagScanner
