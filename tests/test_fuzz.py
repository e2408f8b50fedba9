"""Fuzzing every format: arbitrary mixtures of delimiter fragments, special and plain tokens,
unicode and invalid UTF-8, split at random. Nothing raises, nothing is lost, stream == parse, and
the work done is linear in the input (counted by `StreamParser.scanned`, not by a wall clock).

CI runs the `ci` hypothesis profile; `HYPOTHESIS_PROFILE=long pytest tests/test_fuzz.py` runs more.
`fuzz/atheris_target.py` is a coverage-guided target for longer runs."""

from __future__ import annotations

import json

import pytest
from conftest import FORMAT_NAMES, assert_nothing_lost, assert_stream_matches, fold, ids
from hypothesis import given, settings
from hypothesis import strategies as st

import streamparse
from streamparse import Message, StreamParser, Token, ToolCall
from streamparse.grammar import strict_loads
from streamparse.registry import get_format
from streamparse.testing import risky_argument_texts, risky_schemas

# No tools; any arguments; typed and recursive schemas (typing by schema, deep validation).
TOOL_CHOICES = [
    None,
    [{"name": "f", "parameters": {"type": "object"}}],
    [{"name": "f", "parameters": {
        "type": "object", "required": ["a"],
        "properties": {"a": {"type": ["integer", "null"]}, "x": {"type": "boolean"}, "n": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}}}],
]


def _fragments(fmt: str) -> st.SearchStrategy[str]:
    spec = get_format(fmt)
    tags = list(spec.delimiters) + list(spec.reserved)
    return st.one_of(
        st.sampled_from(tags),
        st.sampled_from([t[:cut] for t in tags for cut in range(1, len(t))]
                        + [t[cut:] for t in tags for cut in (1, 2)]),
        st.text(max_size=6),
        st.sampled_from(['{"name": "f", "arguments": {"a": "<x>"}}', '{"a": 1}', '"', "\\", "\n", "  ", "}", "]",
                         '"name"', "f", "\r\n", "🚀", "\ufffd"]),
    )


def _tokens(fmt: str) -> st.SearchStrategy[list[Token]]:
    specials = list(get_format(fmt).special) or ["<none>"]
    plain = _fragments(fmt).map(Token)
    special = st.sampled_from(specials).map(lambda s: Token(s, special=True))
    return st.lists(st.one_of(plain, plain, special), max_size=24)


def _run(chunks: list[object], fmt: str, **kwargs: object) -> tuple[StreamParser, list[streamparse.Delta]]:
    parser = StreamParser(fmt, id_factory=ids, **kwargs)  # type: ignore[arg-type]
    deltas = [d for chunk in chunks for d in parser.feed(chunk)]  # type: ignore[arg-type]
    return parser, deltas + parser.close()


def _linear(parser: StreamParser, length: int, chunks: int, fmt: str) -> None:
    longest = max(map(len, get_format(fmt).delimiters))
    assert parser.scanned <= 3 * length + chunks * 3 * (longest + 1)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(data=st.data())
def test_fuzz_text(fmt: str, data: st.DataObject) -> None:
    text = "".join(data.draw(st.lists(_fragments(fmt), max_size=30)))
    options = {"thinking_forced_open": data.draw(st.booleans()),
               "tool_calls_in_reasoning": data.draw(st.sampled_from(["ignore", "extract"])),
               "tools": data.draw(st.sampled_from(TOOL_CHOICES))}
    whole, _ = _run([text], fmt, **options)
    assert_nothing_lost(text, whole.message, fmt)
    sizes = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=8))
    chunks, pos, k = [], 0, 0
    while pos < len(text):
        chunks.append(text[pos:pos + sizes[k % len(sizes)]])
        pos += sizes[k % len(sizes)]
        k += 1
    for emit in ("validated", "progressive"):
        parser, deltas = _run(chunks, fmt, emit_calls=emit, **options)
        assert parser.message == whole.message
        assert_stream_matches(fold(deltas), whole.message)
        _linear(parser, len(text), len(chunks), fmt)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(raw=st.lists(st.one_of(st.binary(max_size=6), st.sampled_from([b"\xf0\x9f", b"\x9a\x80", b"\xff", b"<", b"["])),
                    max_size=20))
def test_fuzz_bytes(fmt: str, raw: list[bytes]) -> None:
    parser, deltas = _run(list(raw), fmt)
    whole = streamparse.parse(b"".join(raw), fmt, id_factory=ids)
    assert parser.message == whole
    assert_stream_matches(fold(deltas), whole)


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if get_format(f).special])
@given(data=st.data())
def test_fuzz_tokens(fmt: str, data: st.DataObject) -> None:
    tokens = data.draw(_tokens(fmt))
    whole, _ = _run([tokens], fmt, special_tokens="require")
    assert_nothing_lost("".join(t.text for t in tokens), whole.message, fmt, tokens)
    one_by_one, deltas = _run(list(tokens), fmt, special_tokens="require", emit_calls="progressive")
    assert one_by_one.message == whole.message
    assert_stream_matches(fold(deltas), whole.message)
    # Without token-awareness the same tokens read as their text.
    assert streamparse.parse(tokens, fmt, id_factory=ids) == streamparse.parse("".join(t.text for t in tokens), fmt,
                                                                                id_factory=ids)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_work_grows_linearly_with_pathological_inputs(fmt: str) -> None:
    spec = get_format(fmt)
    longest = max(spec.delimiters, key=len)
    # A format whose calls are anchored (no opener) starts them after a marker or at a trigger character.
    opener = spec.call_openers[0] if spec.call_openers else spec.anchors[0].trigger
    anchored = ['{"na', "[f", "[" + " " * 40, '{"name": "f"};'] if spec.anchors else []
    for unit in (longest[:-1], " ", "\n" + longest[:3], opener + "x" * 50, *anchored):
        small, large = unit * 500, unit * 2000
        counts = []
        for text in (small, large):
            parser, _ = _run([text[i:i + 3] for i in range(0, len(text), 3)], fmt)
            counts.append(parser.scanned)
        assert counts[1] <= 4.6 * counts[0], (unit, counts)


_RAW = {"__raw__": 4242}


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if not get_format(f).untyped_values])
@given(data=st.data())
@settings(deadline=None)
def test_fuzz_risky_schemas_and_arguments(fmt: str, data: st.DataObject) -> None:
    """Schemas with the keywords that used to raise or stall, arguments with the values that are not
    strict JSON: nothing raises, stream == parse, accepted arguments are strict JSON."""
    tools = [{"name": "f", "parameters": data.draw(risky_schemas())}]
    arguments = data.draw(risky_argument_texts())
    text = streamparse.render(Message(tool_calls=[ToolCall("c", "f", dict(_RAW), "")]), fmt)
    text = text.replace(json.dumps(_RAW), arguments)
    whole, _ = _run([text], fmt, tools=tools)
    for call in whole.message.tool_calls:
        assert strict_loads(call.arguments_json) == call.arguments
    json.dumps(whole.message.to_openai(), ensure_ascii=False).encode("utf-8")
    parser, _ = _run(list(text), fmt, tools=tools, emit_calls="progressive")
    assert parser.message == whole.message
