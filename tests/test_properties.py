"""The three promises, checked on every registered format.

1. Any chunking gives the same result: deltas add up to `parse(text)`, for str and UTF-8 bytes.
2. Nothing lost: every character is in content, reasoning, a call's raw text or a delimiter.
3. Nothing raised for anything a model can write.
"""

from __future__ import annotations

import itertools

import pytest
from conftest import FORMAT_NAMES, assert_nothing_lost, assert_stream_matches, ids, run_stream
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse.registry import get_format
from streamparse.testing import messages, splittings

EMIT = ["validated", "progressive"]


@pytest.mark.parametrize("emit", EMIT)
@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(data=st.data())
def test_rendered_messages_round_trip_under_any_chunking(fmt: str, emit: str, data: st.DataObject) -> None:
    message = data.draw(messages(fmt))
    text = streamparse.render(message, fmt)
    parsed = streamparse.parse(text, fmt, id_factory=ids)
    assert parsed.content == message.content
    assert parsed.reasoning == message.reasoning
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(c.name, c.arguments) for c in message.tool_calls]
    assert parsed.rejected == []
    chunks = data.draw(splittings(text))
    folded, streamed = run_stream(chunks, format=fmt, emit_calls=emit, id_factory=ids)
    assert streamed == parsed
    assert_stream_matches(folded, parsed)


def _noise(fmt: str) -> st.SearchStrategy[str]:
    delimiters = list(get_format(fmt).delimiters) + list(get_format(fmt).reserved)
    pieces = st.one_of(
        st.sampled_from(delimiters),
        st.sampled_from([d[:cut] for d in delimiters for cut in range(1, len(d))]),
        st.text(st.sampled_from(list('ab {}[]":,\n\t<>/=|\\é🚀')), max_size=8),
        st.sampled_from(['{"name": "f", "arguments": {"x": 1}}', '{"a": "}"}', '"name"', '"arguments"',
                         "\n\n", "  ", "{{", "}}"]),
    )
    return st.lists(pieces, max_size=14).map("".join)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(data=st.data())
def test_any_text_parses_without_raising_and_loses_nothing(fmt: str, data: st.DataObject) -> None:
    text = data.draw(_noise(fmt))
    forced = data.draw(st.booleans())
    parsed = streamparse.parse(text, fmt, thinking_forced_open=forced, id_factory=ids)
    assert_nothing_lost(text, parsed, fmt)
    for emit in EMIT:
        chunks = data.draw(splittings(text))
        folded, streamed = run_stream(chunks, format=fmt, thinking_forced_open=forced, emit_calls=emit, id_factory=ids)
        assert streamed == parsed
        assert_stream_matches(folded, parsed)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(data=st.data())
def test_bytes_split_inside_utf8_sequences(fmt: str, data: st.DataObject) -> None:
    message = data.draw(messages(fmt))
    text = streamparse.render(message, fmt)
    raw = text.encode("utf-8")
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=12))))
    edges = [0, *cuts, len(raw)]
    chunks = [raw[a:b] for a, b in itertools.pairwise(edges) if b > a]
    folded, streamed = run_stream(chunks, format=fmt, id_factory=ids)
    assert streamed == streamparse.parse(text, fmt, id_factory=ids)
    assert_stream_matches(folded, streamed)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@given(raw=st.binary(max_size=60))
def test_invalid_utf8_becomes_replacement_characters(fmt: str, raw: bytes) -> None:
    folded, streamed = run_stream([raw[i:i + 3] for i in range(0, len(raw), 3)], format=fmt, id_factory=ids)
    assert streamed == streamparse.parse(raw.decode("utf-8", errors="replace"), fmt, id_factory=ids)
    assert_stream_matches(folded, streamed)
