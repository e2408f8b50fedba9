"""The policies, on every format: calls in reasoning, rejected calls, runaway calls, special tokens."""

from __future__ import annotations

import logging
import re

import pytest
from conftest import FORMAT_NAMES, assert_stream_matches, fold, ids, run_stream

import streamparse
from streamparse import Message, Token, ToolCall
from streamparse.registry import get_format

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]


def wire(fmt: str, *calls: tuple[str, dict[str, object]], content: str = "", reasoning: str = "") -> str:
    message = Message(content=content, reasoning=reasoning,
                      tool_calls=[ToolCall(f"id{i}", name, args, "") for i, (name, args) in enumerate(calls)])
    return streamparse.render(message, fmt)


def tokens_of(text: str, fmt: str) -> list[Token]:
    """The text as a tokenizer would give it: the format's special delimiters as special tokens."""
    specials = sorted(get_format(fmt).special, key=len, reverse=True)
    pattern = re.compile("|".join(map(re.escape, specials)))
    out, pos = [], 0
    for match in pattern.finditer(text):
        if match.start() > pos:
            out.append(Token(text[pos:match.start()]))
        out.append(Token(match.group(), special=True))
        pos = match.end()
    if pos < len(text):
        out.append(Token(text[pos:]))
    return out


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES
                                 if get_format(f).reasoning and not get_format(f).calls_end_reasoning])
def test_calls_inside_reasoning_stay_reasoning_unless_extracted(fmt: str) -> None:
    spec = get_format(fmt)
    opener, closer = spec.reasoning[0]
    call = wire(fmt, ("lookup", {"q": "x"}))
    if spec.messages is not None:
        # Headed messages (gpt_oss): a call is a message of its own; a header written inside an analysis
        # body, before its terminator, is body text, and there is nothing to extract.
        for terminator in spec.messages.terminators:
            call = call.removesuffix(terminator)
        for mode in ("ignore", "extract"):
            text = f"{opener}plan {call} end{closer}Answer."
            kept = streamparse.parse(text, fmt, tool_calls_in_reasoning=mode)  # type: ignore[arg-type]
            assert kept.tool_calls == [] and call in kept.reasoning and kept.content == "Answer."
            folded, streamed = run_stream(list(text), format=fmt, tool_calls_in_reasoning=mode, id_factory=ids)
            assert streamed == kept and folded.reasoning == kept.reasoning
        return
    text = f"{opener}plan {call} end{closer}Answer."
    kept = streamparse.parse(text, fmt)
    assert kept.tool_calls == [] and call in kept.reasoning and kept.content == "Answer."
    extracted = streamparse.parse(text, fmt, tool_calls_in_reasoning="extract", id_factory=ids)
    if spec.content_or_calls:  # (generic) a call is the whole output's envelope: inside reasoning, text only
        assert extracted == kept
        return
    assert [(c.name, c.arguments) for c in extracted.tool_calls] == [("lookup", {"q": "x"})]
    assert call not in extracted.reasoning and extracted.reasoning.startswith("plan")
    assert extracted.reasoning.endswith("end") and extracted.content == "Answer."
    folded, streamed = run_stream(list(text), format=fmt, tool_calls_in_reasoning="extract", id_factory=ids)
    assert streamed == extracted
    assert_stream_matches(folded, extracted)


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if get_format(f).calls_end_reasoning])
@pytest.mark.parametrize("extract", [False, True])
def test_a_call_token_ends_unclosed_reasoning_where_the_format_says_so(fmt: str, extract: bool) -> None:
    # The format's exception (calls_end_reasoning): the call ends the reasoning for good, and the
    # closer written later has no opener any more, so it is content verbatim.
    opener, closer = get_format(fmt).reasoning[0]
    call = wire(fmt, ("lookup", {"q": "x"}))
    text = f"{opener}plan {call} end{closer}Answer."
    policy = "extract" if extract else "ignore"
    message = streamparse.parse(text, fmt, tool_calls_in_reasoning=policy, id_factory=ids)
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("lookup", {"q": "x"})]
    if get_format(fmt).reasoning_always_open and get_format(fmt).forced_reasoning_needs_closer:
        # Apriel: reasoning is only what its closer ends; ended by a call, the text was the answer.
        assert (message.reasoning, message.content) == ("", text[len(opener):].replace(call.lstrip(), ""))
    elif get_format(fmt).messages is not None:  # (Inkling) the closer is a stray terminator there: framing
        assert (message.reasoning, message.content) == ("plan", "endAnswer.")
    else:
        assert message.reasoning == "plan"
        assert message.content == f"end{closer}Answer."
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(text), format=fmt, tool_calls_in_reasoning=policy, emit_calls=emit,
                                      id_factory=ids)
        assert streamed == message
        assert_stream_matches(folded, message)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_rejected_calls_are_reported_or_put_back_into_content(fmt: str) -> None:
    call = wire(fmt, ("unknown_thing", {"q": "x"}))
    # A call recognised only where the output starts (Llama 3 JSON) follows prose after its marker.
    spec = get_format(fmt)
    if spec.content_or_calls:  # (generic) the output is one envelope or content: nothing beside the call
        reported = streamparse.parse(call, fmt, tools=TOOLS)
        assert reported.content == "" and [r.status for r in reported.rejected] == ["unknown_tool"]
        restored = streamparse.parse(call, fmt, tools=TOOLS, on_rejected="content")
        assert restored.content == reported.rejected[0].raw.strip() == call.strip()
        folded, streamed = run_stream(list(call), format=fmt, tools=TOOLS, on_rejected="content")
        assert streamed == restored and folded.content == restored.content
        return
    lead_in = "" if not spec.anchors or any(a.trigger for a in spec.anchors) else spec.anchors[0].after[0]
    text = "Before. " + lead_in + call
    if spec.messages is not None and spec.messages.opened_by_prompt:  # no text outside messages: a content message
        text = wire(fmt, ("unknown_thing", {"q": "x"}), content="Before. ")
    reported = streamparse.parse(text, fmt, tools=TOOLS)
    assert reported.content == "Before." and [r.status for r in reported.rejected] == ["unknown_tool"]
    restored = streamparse.parse(text, fmt, tools=TOOLS, on_rejected="content")
    # The call's own text goes back at its place (a wrapper around it is a delimiter, not the call).
    assert restored.content.startswith("Before. ") and restored.content.endswith(reported.rejected[0].raw.strip())
    assert [r.status for r in restored.rejected] == ["unknown_tool"]
    folded, streamed = run_stream(list(text), format=fmt, tools=TOOLS, on_rejected="content")
    assert streamed == restored and folded.content == restored.content


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_a_call_longer_than_max_call_chars_is_rejected_and_the_stream_moves_on(fmt: str) -> None:
    big = wire(fmt, ("lookup", {"q": "x" * 5000}))
    small = wire(fmt, ("lookup", {"q": "y"}))
    if get_format(fmt).content_or_calls:  # (generic) one envelope holds every call: it is the unit bounded
        text = wire(fmt, ("lookup", {"q": "x" * 5000}), ("lookup", {"q": "y"}))
        message = streamparse.parse(text, fmt, max_call_chars=1000, id_factory=ids)
        assert [r.status for r in message.rejected] == ["too_long"] and message.tool_calls == []
        assert len(message.rejected[0].raw) <= 1000 and message.content == ""
        folded, streamed = run_stream([text[i:i + 7] for i in range(0, len(text), 7)], format=fmt,
                                      max_call_chars=1000, id_factory=ids)
        assert streamed == message
        return
    messages = get_format(fmt).messages
    # Where the prompt opens the first message (Functionary v3.2), the next one starts with the opener; where
    # the last message has no terminator (the stop token, Muse Glimmer's), one ends it and the next is opened.
    separator = "\n"
    if messages is not None and messages.opened_by_prompt:
        separator = messages.openers[0]
    elif messages is not None and messages.layout is not None and not big.endswith(messages.terminators):
        separator = messages.layout.end + messages.layout.prompt_wrote
    text = big + separator + small
    message = streamparse.parse(text, fmt, max_call_chars=1000, id_factory=ids)
    assert [r.status for r in message.rejected] == ["too_long"]
    # The raw text keeps the opener, the first 1000 characters of the body and the closer (a closer is
    # its opener's name with a `/`: one character longer than the longest delimiter at most).
    assert len(message.rejected[0].raw) <= 1000 + max(40, 2 * max(map(len, get_format(fmt).delimiters)) + 1)
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("lookup", {"q": "y"})]
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream([text[i:i + 7] for i in range(0, len(text), 7)], format=fmt,
                                      max_call_chars=1000, emit_calls=emit, id_factory=ids)
        assert streamed == message
        assert_stream_matches(folded, message)


def _calls_follow_special_tokens(fmt: str) -> bool:
    """Whether a rendered call is opened by a special token (pythonic lists are text patterns)."""
    spec = get_format(fmt)
    text = wire(fmt, ("lookup", {"q": "x"}))
    found = sorted((text.find(opener), opener) for opener in spec.call_openers if opener in text)
    opened_by_text = bool(found) and found[0][1] not in spec.special  # Functionary v3.1's `<function=`
    return bool(spec.special) and (bool(spec.envelopes) or all(a.after for a in spec.anchors)) and not opened_by_text


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if _calls_follow_special_tokens(f)])
def test_token_aware_mode_reads_special_tokens_and_ignores_look_alikes(fmt: str) -> None:
    text = wire(fmt, ("lookup", {"q": "x"}), content="Hello.", reasoning="Think.")
    real = streamparse.parse(tokens_of(text, fmt), fmt, special_tokens="require", id_factory=ids)
    assert real == streamparse.parse(text, fmt, id_factory=ids)
    assert [c.name for c in real.tool_calls] == ["lookup"]
    look_alike = streamparse.parse(text, fmt, special_tokens="require")
    assert look_alike.tool_calls == [] and look_alike.rejected == []
    assert "lookup" in look_alike.content + look_alike.reasoning
    tokens = tokens_of(text, fmt)
    groups = [tokens[i:i + 2] for i in range(0, len(tokens), 2)]
    folded, streamed = run_stream(groups, format=fmt, special_tokens="require", id_factory=ids)  # type: ignore[arg-type]
    assert streamed == real
    assert_stream_matches(folded, real)


def test_token_aware_mode_needs_a_format_with_special_tokens() -> None:
    for fmt in FORMAT_NAMES:
        if not get_format(fmt).special:
            with pytest.raises(ValueError, match="declares no special tokens"):
                streamparse.StreamParser(fmt, special_tokens="require")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"on_rejected": "drop"}, "on_rejected"), ({"max_call_chars": 0}, "max_call_chars"),
    ({"special_tokens": "maybe"}, "special_tokens"),
])
def test_policy_misuse(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        streamparse.StreamParser(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_arguments_too_deep_for_a_recursive_schema_are_rejected_not_raised(fmt: str) -> None:
    tools = [{"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}]
    deep: list[object] = []
    for _ in range(180):  # within what every format's reader keeps as JSON data
        deep = [deep]
    text = wire(fmt, ("lookup", {"q": deep}))
    message = streamparse.parse(text, fmt, tools=tools)
    assert len(message.tool_calls) + len(message.rejected) == 1
    deeper = wire(fmt, ("lookup", {"q": "x"})).replace('"x"', "[" * 900 + "]" * 900)
    message = streamparse.parse(deeper, fmt, tools=tools)  # must not raise
    assert len(message.tool_calls) + len(message.rejected) >= 1


def test_each_rejected_call_is_logged_once_with_status_tool_and_position(caplog: pytest.LogCaptureFixture) -> None:
    text = 'Hi <tool_call>{"name": "nope", "arguments": {}}</tool_call> and <tool_call>{"name": "f", "arg'
    with caplog.at_level(logging.INFO, logger="streamparse"):
        streamparse.parse(text, "hermes", tools=[{"name": "f", "parameters": {"type": "object"}}])
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(lines) == 2
    assert lines[0].startswith("rejected tool call: status=unknown_tool tool=nope at character 3:")
    second = text.index("<tool_call>", 5)
    assert lines[1].startswith(f"rejected tool call: status=truncated tool=None at character {second}")
    assert not any("arguments" in line for line in lines)  # the raw text only at DEBUG
    with caplog.at_level(logging.DEBUG, logger="streamparse"):
        caplog.clear()
        streamparse.parse(text, "hermes", tools=[{"name": "f", "parameters": {"type": "object"}}])
    assert any(r.levelno == logging.DEBUG and '"nope"' in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("emit", ["validated", "progressive"])
def test_token_bytes_are_decoded_incrementally_across_tokens(emit: str) -> None:
    """A CJK character split across two byte-level tokens is one character, not two U+FFFD."""
    word = "天气".encode()
    tokens = [Token(b"<think>", True), Token(b"R", False), Token(b"</think>", True), Token(word[:2], False),
              Token(word[2:4], False), Token(word[4:], False), Token("<tool_call>", True),
              Token('{"name": "f", "arguments": {"城": "巴黎"}}'.encode()[:20], False),
              Token('{"name": "f", "arguments": {"城": "巴黎"}}'.encode()[20:], False), Token("</tool_call>", True)]
    parser = streamparse.StreamParser("hermes", special_tokens="require", emit_calls=emit, id_factory=ids)
    deltas = [d for t in tokens for d in parser.feed(t)] + parser.close()
    message = parser.message
    assert (message.reasoning, message.content) == ("R", "天气")
    assert [c.arguments for c in message.tool_calls] == [{"城": "巴黎"}]
    assert_stream_matches(fold(deltas), message)


@pytest.mark.parametrize("fmt", [f for f in FORMAT_NAMES if get_format(f).wrappers])
def test_max_call_chars_bounds_what_a_call_wrapper_holds_before_its_first_call(fmt: str) -> None:
    """A wrapper opener followed by a runaway text with no call keeps at most max_call_chars of it,
    reports it while it waits (held_back), and ends as a rejection or as content."""
    wrapper = get_format(fmt).wrappers[0]
    junk = "a" * 200_000
    parser = streamparse.StreamParser(fmt, max_call_chars=1000)
    held = 0
    for i in range(0, len(junk), 1000):
        parser.feed(junk[i:i + 1000] if i else wrapper.openers[0] + junk[:1000])
        held = max(held, parser.held_back)
    parser.close()
    message = parser.message
    kept = sum(len(r.raw) for r in message.rejected) + len(message.content)
    if wrapper.text_is_content:  # the text is content as it arrives: nothing to hold; the cut-off block is truncated
        assert message.content == junk and [(r.status, r.raw) for r in message.rejected] == [
            ("truncated", wrapper.openers[0])]
    else:
        assert [r.status for r in message.rejected] == ["too_long"] and kept <= 1000 + 40
        assert 1000 <= held <= 1100  # what it holds is reported, and bounded


def test_a_long_run_of_held_whitespace_is_kept_in_few_pieces() -> None:
    """Whitespace whose role is unknown costs about a byte a character, whatever the chunking."""
    parser = streamparse.StreamParser("hermes")
    parser.feed("Hello")
    for _ in range(100_000):
        parser.feed(" ")
    region = parser._output.content
    assert region.pending_length == 100_000 and len(region.pending_ws) <= 17  # O(log n) pieces
    assert parser.held_back == 100_000
    parser.feed("world")
    parser.close()
    assert parser.message.content == "Hello" + " " * 100_000 + "world"
