"""`StreamParser.reasoning_end`: where the reasoning ended in the raw text, for engines that split a
reasoning parser from a tool parser (vLLM, SGLang) and hand the tool half the raw text after it.

For every format, on rendered messages, on noise and on the real-template cases, under any chunking:
the offset is the same as the whole text's; it never moves once set; the text before it parses to
exactly the reasoning (and nothing else); and `StreamParser.after_reasoning` reading the text after it
gives exactly the content, calls and rejected calls of the whole text."""

from __future__ import annotations

import pytest
from conftest import FORMAT_NAMES, ids
from corpus import case_rows
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import _noise

import streamparse
from streamparse.registry import get_format
from streamparse.testing import messages, splittings


def _streamed_end(chunks: list[str], fmt: str, forced: bool, tools: object = None) -> int | None:
    parser = streamparse.StreamParser(fmt, tools, forced, id_factory=ids)
    received, end = 0, None
    for chunk in chunks:
        parser.feed(chunk)
        received += len(chunk)
        if end is not None:
            assert parser.reasoning_end == end, "reasoning_end moved after it was set"
        end = parser.reasoning_end
        assert end is None or 0 <= end <= received
    parser.close()
    assert parser.reasoning_end is not None
    assert end is None or parser.reasoning_end == end
    return parser.reasoning_end


def _check_split(text: str, fmt: str, forced: bool, chunks: list[str], tools: object = None) -> None:
    whole = streamparse.StreamParser(fmt, tools, forced, id_factory=ids)
    whole.feed(text)
    whole.close()
    end = whole.reasoning_end
    assert end is not None
    assert _streamed_end(chunks, fmt, forced, tools) == end
    message = whole.message
    before = streamparse.parse(text[:end], fmt, tools, forced, id_factory=ids)
    assert (before.reasoning, before.content, before.tool_calls, before.rejected) == (message.reasoning, "", [], [])
    rest = streamparse.StreamParser.after_reasoning(fmt, tools, id_factory=ids)
    cut = [piece for piece in splittings_of(text[end:], chunks, end) if piece]
    for piece in cut:
        rest.feed(piece)
    rest.close()
    after = rest.message
    assert after.reasoning == ""
    assert after.content == message.content
    assert [call.to_openai() | {"raw": call.raw} for call in after.tool_calls] == \
        [call.to_openai() | {"raw": call.raw} for call in message.tool_calls]
    assert [(r.status, r.raw, r.name) for r in after.rejected] == [(r.status, r.raw, r.name) for r in message.rejected]


def splittings_of(rest: str, chunks: list[str], end: int) -> list[str]:
    """The chunks the tool half is handed: the same cuts as the stream, from `end` on."""
    pieces, at = [], 0
    for chunk in chunks:
        lo, hi = max(at, end), at + len(chunk)
        if hi > lo:
            pieces.append(rest[lo - end: hi - end])
        at = hi
    return pieces


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=40)
@given(data=st.data())
def test_reasoning_end_on_rendered_messages(fmt: str, data: st.DataObject) -> None:
    text = streamparse.render(data.draw(messages(fmt)), fmt)
    _check_split(text, fmt, False, data.draw(splittings(text)))


def _split_is_exact_on_any_text(fmt: str) -> bool:
    """Where the split is exact on any text, not only on what a model of the format writes: not where
    reasoning may come back after it ended (headed messages, `reasoning_reopens`), where forced-open
    reasoning that never closes is the answer as written (`forced_reasoning_needs_closer`: its markers
    and call openers are text, which a reader of the content state would read), or where an answer
    opener is framing only after reasoning (`framing_after_reasoning`: at the very start of an output
    without reasoning it is text). README, "Engines that split reasoning from tool calls"."""
    spec = get_format(fmt)
    return not (spec.messages or spec.reasoning_reopens or spec.forced_reasoning_needs_closer
                or spec.framing_after_reasoning)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=40)
@given(data=st.data())
def test_reasoning_end_on_noise(fmt: str, data: st.DataObject) -> None:
    text = data.draw(_noise(fmt))
    forced = data.draw(st.booleans())
    chunks = data.draw(splittings(text))
    if _split_is_exact_on_any_text(fmt):
        _check_split(text, fmt, forced, chunks)
    else:  # the offset itself is still the same under any chunking
        whole = streamparse.StreamParser(fmt, None, forced, id_factory=ids)
        whole.feed(text)
        whole.close()
        assert _streamed_end(chunks, fmt, forced) == whole.reasoning_end


_CASES = case_rows()


@pytest.mark.parametrize("row", _CASES, ids=[row.label for row in _CASES])
@settings(max_examples=5)
@given(data=st.data())
def test_reasoning_end_on_real_template_cases(row: object, data: st.DataObject) -> None:
    text = row.text  # type: ignore[attr-defined]
    _check_split(text, row.format, row.thinking_forced_open, data.draw(splittings(text)),  # type: ignore[attr-defined]
                 row.tools)  # type: ignore[attr-defined]


def test_reasoning_end_examples() -> None:
    def end(text: str, fmt: str = "hermes", forced: bool = False) -> int | None:
        parser = streamparse.StreamParser(fmt, thinking_forced_open=forced)
        parser.feed(text)
        return parser.reasoning_end

    assert end("<think>why</think>\n\nHi") == len("<think>why</think>")
    assert end("<think>why</thi") is None  # not known yet
    assert end("Hi there") == 0  # no reasoning
    assert end("why</think>Hi", forced=True) == len("why</think>")
    assert end("  ") is None  # whitespace: a reasoning opener may still follow
