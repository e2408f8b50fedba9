"""gpt-oss (`gpt_oss`, alias `harmony`): OpenAI's harmony messages, by example.

The output is a sequence of messages, each `HEADER<|message|>BODY` ended by `<|end|>`, `<|call|>`,
`<|return|>` or the end of output; the header decides what the body is (FORMATS.md: "gpt_oss",
"Harmony messages", and decisions 1, 2, 4, 5, 6 and 30 of "settled on review").
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, SHARED, assert_every_mode_agrees, assert_stream_matches, fold, ids, run_stream
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, StreamParser, Token, ToolCall, parse
from streamparse.bodies.json_arguments import json_prefix

FMT = "gpt_oss"
TOOLS = json.loads((FIXTURES / "gpt_oss" / "tools.json").read_text())
CASES = SHARED / "templates" / "cases_new_families.json"
SPECIAL = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>", "<|call|>", "<|return|>")
WEATHER = '{"location": "Paris, France", "unit": "celsius"}'
TIME_CALL = "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>"


def check(text: str, tools: object = TOOLS) -> Message:
    """`parse(text)`, which 1-character chunks in both emit modes must add up to exactly."""
    message = parse(text, FMT, tools=tools, id_factory=ids)  # type: ignore[arg-type]
    for emit in ("validated", "progressive"):
        folded, streamed = run_stream(list(text), format=FMT, tools=tools, emit_calls=emit, id_factory=ids)
        assert streamed == message
        assert_stream_matches(folded, message)
    return message


def calls(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def rejected(message: Message) -> list[tuple[str, str | None]]:
    return [(r.status, r.name) for r in message.rejected]


# ----------------------------------------------------------------- real outputs

def test_analysis_preamble_and_two_calls_in_both_header_forms() -> None:
    text = (FIXTURES / "gpt_oss" / "analysis_preamble_two_calls.txt").read_text()
    message = check(text)
    assert message.reasoning.startswith("The user wants") and message.reasoning.endswith("call both tools.")
    assert message.content == "Checking the weather and the local time in Paris…"  # a commentary preamble
    assert calls(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                              ("get_time", {"timezone": "Europe/Paris"})]
    assert message.rejected == []
    assert message.tool_calls[0].raw.startswith("<|start|>assistant<|channel|>commentary to=functions.get_weather")
    assert message.tool_calls[0].id != message.tool_calls[1].id  # no id on the wire: generated


def test_final_answer_after_a_tool_result() -> None:
    text = (FIXTURES / "gpt_oss" / "final_after_tool_result.txt").read_text()
    message = check(text)
    assert message.reasoning.endswith("with a small table.")
    assert message.content.startswith("Right now in **Paris**:\n\n| | |\n|---|---|\n")
    assert message.content.endswith("<after 18:00>.") and message.tool_calls == []


@pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")
def test_render_writes_each_turn_exactly_as_the_real_template_does() -> None:
    """From the turn's `<|start|>assistant` (the generation prompt) to its stop token."""
    cases = [case for case in json.loads(CASES.read_text()) if case["format"] == FMT]
    assert len(cases) == 9
    for case in cases:
        expected = case["expected"]
        message = Message(content=expected["content"] or "", reasoning=expected["reasoning"] or "",
                          tool_calls=[ToolCall("", c["name"], c["arguments"], "") for c in expected["tool_calls"]])
        assert streamparse.render(message, FMT) == "<|start|>assistant" + case["output"] + case["stop"], case["case"]
        parsed = check(case["output"], case["tools"])
        assert (parsed.content, parsed.reasoning, calls(parsed)) == (message.content, message.reasoning, calls(message))


def test_the_alias_and_detection() -> None:
    assert parse("<|channel|>final<|message|>Hi", "harmony").content == "Hi"
    if CASES.exists():
        template = SHARED / "templates" / "gpt-oss-120b.jinja"
        assert streamparse.detect_format(template) == FMT
        assert streamparse.detect_format({"chat_template": template.read_text()}) == FMT


# ----------------------------------------------------------------- channels and recipients

@pytest.mark.parametrize(("text", "content", "reasoning"), [
    ("<|channel|>final<|message|>It is 18°C.", "It is 18°C.", ""),
    ("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Say.", "Say.", "Think."),
    # A commentary message without a recipient is a preamble the user may see: content.
    ("<|channel|>commentary<|message|>Looking it up.<|end|>", "Looking it up.", ""),
    # `to=assistant` is the same as no recipient: the channel decides (decision 5).
    ("<|channel|>analysis to=assistant<|message|>hmm", "", "hmm"),
    ("<|start|>assistant to=assistant<|channel|>final<|message|>ok", "ok", ""),
    # An unknown channel, and a header without <|channel|>, are content (decision 6).
    ("<|channel|>summary<|message|>short", "short", ""),
    ("<|start|>assistant<|message|>no channel", "no channel", ""),
    # Content and reasoning bodies are joined in output order, each then stripped.
    ("<|channel|>analysis<|message|>a1 <|end|><|start|>assistant<|channel|>commentary<|message|>c1<|end|>"
     "<|start|>assistant<|channel|>analysis<|message|>a2<|end|><|start|>assistant<|channel|>final<|message|> c2",
     "c1 c2", "a1 a2"),
])
def test_the_channel_decides_reasoning_and_content(text: str, content: str, reasoning: str) -> None:
    message = check(text)
    assert (message.content, message.reasoning, message.tool_calls, message.rejected) == (content, reasoning, [], [])


@pytest.mark.parametrize("header", [
    " to=functions.get_weather<|channel|>commentary json",  # the first message, role header (the template's)
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json",
    "<|channel|>commentary to=functions.get_weather <|constrain|>json",  # channel header (harmony's docs)
    "<|channel|>commentary to=functions.get_weather<|constrain|>json",  # no space (SGLang's tests)
    "<|channel|>commentary to=functions.get_weather json",
    "<|channel|>commentary to=functions.get_weather",
    # The recipient decides, whatever the channel (decision 4); a header without a channel too.
    "<|channel|>analysis to=functions.get_weather <|constrain|>json",
    "<|start|>assistant to=functions.get_weather<|channel|>final",
    "<|start|>assistant to=functions.get_weather",
    # A bare recipient names the tool (vLLM accepts these too).
    "<|start|>assistant to=get_weather<|channel|>commentary json",
])
def test_a_message_to_a_function_is_a_call_in_every_header_form(header: str) -> None:
    for terminator in ("<|call|>", "<|end|>", "<|return|>", ""):
        message = check(f"{header}<|message|>{WEATHER}{terminator}")
        assert calls(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"})]
        assert message.content == message.reasoning == "" and message.rejected == []


def test_several_call_messages_are_several_calls_with_generated_ids() -> None:
    call = TIME_CALL + '{{"timezone": "{}"}}<|call|>'
    text = call.format("Europe/Paris") + "\n" + call.format("Asia/Tokyo")
    message = check(text)
    assert calls(message) == [("get_time", {"timezone": "Europe/Paris"}), ("get_time", {"timezone": "Asia/Tokyo"})]
    assert [c.id for c in message.tool_calls] == ["call_0", "call_1"]
    assert len({c.id for c in parse(text, FMT).tool_calls}) == 2  # default ids: OpenAI's shape, unique
    assert all(c.id.startswith("call_") for c in parse(text, FMT).tool_calls)


# ----------------------------------------------------------------- call bodies

def test_a_json_string_holding_the_arguments_object_is_accepted() -> None:
    message = check('<|channel|>commentary to=functions.get_time<|message|>"{\\"timezone\\": \\"UTC\\"}"')
    assert calls(message) == [("get_time", {"timezone": "UTC"})]


@pytest.mark.parametrize(("body", "status"), [
    ('{"timezone": "UTC"} and more', "invalid_json"),  # text after the object
    ("[1, 2]", "invalid_json"),  # not an object (decision 3)
    ('"just a string"', "invalid_json"),
    ("", "invalid_json"),  # an empty body
    ('{"timezone": NaN}', "invalid_json"),  # not strict JSON
])
def test_a_call_body_must_be_one_json_object(body: str, status: str) -> None:
    message = check(f"<|channel|>commentary to=functions.get_time<|message|>{body}<|call|>")
    assert rejected(message) == [(status, "get_time")] and message.tool_calls == []


@pytest.mark.parametrize(("body", "status"), [
    ('{"timezone": "Eur', "truncated"),  # an incomplete JSON prefix at the end
    ('{"timezone": "Europe/Paris", ', "truncated"),
    ('{"a": [1, {"b": tr', "truncated"),
    ("", "truncated"),  # the output ended right after <|message|>
    ('{"timezone": "UTC"} trailing', "invalid_json"),  # anything else that is not JSON
    ("print('hi')", "invalid_json"),
])
def test_a_body_cut_off_by_the_end_is_truncated_when_it_is_a_json_prefix(body: str, status: str) -> None:
    message = check(f"<|channel|>commentary to=functions.get_time<|message|>{body}")
    assert rejected(message) == [(status, "get_time")]


def test_the_body_ends_at_a_terminator_outside_json_strings() -> None:
    text = '<|channel|>commentary to=functions.get_time<|message|>{"timezone": "<|call|>"}<|call|>after'
    message = check(text, None)
    assert calls(message) == [("get_time", {"timezone": "<|call|>"})] and message.content == "after"


def test_built_in_recipients_not_in_tools_are_unknown_tool_even_when_not_json() -> None:
    """Decision 2: `unknown_tool` wins over `invalid_json` for a recipient not in `tools`."""
    python = "<|start|>assistant to=python<|channel|>analysis code<|message|>print(2 + 2)<|call|>"
    search = "<|start|>assistant to=browser.search<|channel|>analysis <|constrain|>json<|message|>"
    search += '{"query": "x"}<|call|>'
    message = check(python + search)
    assert rejected(message) == [("unknown_tool", "python"), ("unknown_tool", "browser.search")]
    assert message.rejected[0].raw == python
    # Without tools, a built-in with a JSON body is a call named by the whole recipient; code is invalid_json.
    message = check(python + search, None)
    assert calls(message) == [("browser.search", {"query": "x"})]
    assert rejected(message) == [("invalid_json", "python")]


def test_a_rejected_call_can_go_back_into_the_content() -> None:
    call = '<|start|>assistant to=functions.nope<|channel|>commentary json<|message|>{"a": 1}<|call|>'
    text = "<|channel|>final<|message|>Before.<|end|>" + call
    message = parse(text, FMT, tools=TOOLS, on_rejected="content")
    assert message.content == "Before." + call and rejected(message) == [("unknown_tool", "nope")]


def test_max_call_chars_counts_the_header_and_the_stream_moves_on() -> None:
    big = TIME_CALL + f'{{"timezone": "{"x" * 500}"}}<|call|>'
    small = TIME_CALL + '{"timezone": "UTC"}<|call|>'
    message = parse(big + small, FMT, tools=TOOLS, max_call_chars=200)
    assert rejected(message) == [("too_long", None)] and len(message.rejected[0].raw) <= 200 + len("<|call|>")
    assert calls(message) == [("get_time", {"timezone": "UTC"})]


# ----------------------------------------------------------------- framing

def test_a_leading_generation_prompt_is_framing() -> None:
    assert check("<|start|>assistant<|channel|>final<|message|>Hi").content == "Hi"


def test_whitespace_between_a_terminator_and_the_next_header_is_framing() -> None:
    """Decision 1; other text outside a message is content, joined in output order."""
    text = "<|channel|>final<|message|>A<|end|>\n\n<|start|>assistant<|channel|>final<|message|>B"
    assert check(text).content == "AB"
    text = "Intro <|channel|>final<|message|>A<|end|> then <|start|>assistant<|channel|>final<|message|>B"
    assert check(text).content == "Intro A then B"
    assert check("No harmony markup at all.").content == "No harmony markup at all."


def test_stray_terminators_between_messages_are_framing() -> None:
    text = "<|end|><|channel|>final<|message|>A<|end|><|return|><|call|> B<|end|>"
    assert check(text).content == "A B"


@pytest.mark.parametrize("glitch", ["<|channel|>commentary", "<|channel|>commentary to=assistant",
                                    "<|start|>assistant<|channel|>commentary"])
def test_a_commentary_header_followed_by_another_channel_is_framing(glitch: str) -> None:
    """The known gpt-oss-20b glitch (llama.cpp drops it too): the header is cut off by the next one."""
    message = check(glitch + "<|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final<|message|>C")
    assert (message.content, message.reasoning, message.rejected) == ("C", "R", [])


def test_a_header_cut_off_by_the_end_is_held_then_framing_or_a_truncated_call() -> None:
    parser = StreamParser(FMT, tools=TOOLS)
    deltas = parser.feed("<|channel|>final<|message|>Done.<|end|><|start|>assistant<|channel|>fin")
    assert fold(deltas).content == "Done."  # the header is held back, not shown
    parser.close()
    assert parser.message.content == "Done." and parser.message.rejected == []
    message = check("<|channel|>analysis<|message|>R<|end|><|start|>assistant to=functions.get_weather<|chan")
    assert rejected(message) == [("truncated", "get_weather")]
    assert message.rejected[0].raw == "<|start|>assistant to=functions.get_weather<|chan"
    assert check(" to=functions.get_weather").rejected[0].status == "truncated"
    assert check("<|start|>assistant to=python<|channel|>analy").rejected == []  # not a functions. recipient


def test_a_body_cut_off_by_the_end_is_what_its_channel_makes_it() -> None:
    assert check("<|channel|>analysis<|message|>Still thinking").reasoning == "Still thinking"
    assert check("<|channel|>final<|message|>Half an ans").content == "Half an ans"


def test_text_that_only_starts_like_the_lead_is_content() -> None:
    assert check(" to=me, he said.").content == "to=me, he said."
    assert check(" t").content == "t"
    assert check("x to=functions.f<|channel|>final<|message|>A").content == "x to=functions.fA"


def test_a_header_longer_than_the_limit_is_not_a_header_but_content() -> None:
    text = "<|channel|>final " + "word " * 200 + "end"
    assert check(text).content == text


def test_a_header_opener_inside_a_body_is_body_text() -> None:
    text = "<|channel|>analysis<|message|>I could write <|start|>assistant<|channel|>final here<|end|>"
    assert check(text).reasoning == "I could write <|start|>assistant<|channel|>final here"


def test_thinking_forced_open_is_ignored() -> None:
    """Decision 30: the flag, or a prompt, changes nothing for gpt_oss."""
    text = "<|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final<|message|>C"
    plain = parse(text, FMT, id_factory=ids)
    assert parse(text, FMT, thinking_forced_open=True, id_factory=ids) == plain
    assert parse(text, FMT, prompt="<|start|>user<|message|>Hi<|end|><|start|>assistant", id_factory=ids) == plain
    assert parse("Plain text.", FMT, thinking_forced_open=True).content == "Plain text."
    assert not streamparse.thinking_forced_open("<|channel|>analysis<|message|>", FMT)


# ----------------------------------------------------------------- streaming

def test_reasoning_and_content_stream_before_their_terminator() -> None:
    parser = StreamParser(FMT)
    out = fold(parser.feed("<|channel|>analysis<|message|>Let me th"))
    assert out.reasoning == "Let me th"
    out = fold(parser.feed("ink<|end|><|start|>assistant<|channel|>final<|message|>The ans"))
    assert out.reasoning == "ink" and out.content == "The ans"


def test_progressive_mode_sends_the_name_at_the_header_end_then_argument_fragments() -> None:
    parser = StreamParser(FMT, tools=TOOLS, emit_calls="progressive", id_factory=ids)
    assert parser.feed(" to=functions.get_weather<|channel|>commentary json<|message|>") == []
    first = parser.feed('{"location": "Pa')
    assert [(d.index, d.id, d.name, d.arguments) for delta in first for d in delta.tool_calls] == [
        (0, "call_0", "get_weather", ""), (0, None, None, '{"location": "Pa')]
    rest = parser.feed('ris"}') + parser.close()
    assert "".join(d.arguments for delta in rest for d in delta.tool_calls) == 'ris"}'


def test_token_aware_mode_reads_the_special_tokens_and_takes_look_alikes_as_text() -> None:
    text = (FIXTURES / "gpt_oss" / "analysis_preamble_two_calls.txt").read_text()
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        special = next((s for s in SPECIAL if text.startswith(s, pos)), None)
        if special is not None:
            tokens.append(Token(special, special=True))
            pos += len(special)
        else:
            end = min([i for i in (text.find(s, pos) for s in SPECIAL) if i != -1] or [len(text)])
            tokens += [Token(text[i:min(i + 3, end)]) for i in range(pos, end, 3)]  # ` to=functions.…`: text
            pos = end
    expected = parse(text, FMT, tools=TOOLS, id_factory=ids)
    for emit in ("validated", "progressive"):
        parser = StreamParser(FMT, tools=TOOLS, special_tokens="require", emit_calls=emit, id_factory=ids)
        deltas = [d for token in tokens for d in parser.feed(token)] + parser.close()
        assert parser.message == expected
        assert_stream_matches(fold(deltas), expected)
    look_alike = parse(text, FMT, tools=TOOLS, special_tokens="require")
    assert look_alike.tool_calls == [] and look_alike.content == text


@given(data=st.data())
def test_any_chunking_of_the_decisions_agrees(data: st.DataObject) -> None:
    pieces = ["<|start|>assistant", "<|channel|>analysis", "<|channel|>final", "<|channel|>commentary",
              " to=functions.get_time", " to=python", " to=assistant", " json", " <|constrain|>json",
              "<|message|>", "<|end|>", "<|call|>", "<|return|>", '{"timezone": "UTC"}', '{"timezone": "',
              "text", " ", "\n\n", "print(1)"]
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=16)))
    assert_every_mode_agrees(data, text, FMT, data.draw(st.sampled_from([None, TOOLS])))


# ----------------------------------------------------------------- an incomplete JSON value

@pytest.mark.parametrize(("text", "prefix"), [
    ("{", True), ('{"a', True), ('{"a"', True), ('{"a":', True), ('{"a": 1', True), ('{"a": 1.', True),
    ('{"a": 1e', True), ('{"a": -', True), ('{"a": [1, {"b": n', True), ('{"a": "x\\', True), ('{"a": "\\u00', True),
    ('{"a": 1,', True), ("[", True), ('"abc', True), ("  {  ", True),
    ('{"a": 1}', False), ('{"a": 1} x', False), ("{]", False), ('{"a" 1', False), ("print(1)", False),
    ('{"a": tx', False), ("{,", False), ('{"a": 1,}', False), ('{"a": 01', False), ("", True),
])
def test_json_prefix(text: str, prefix: bool) -> None:
    assert json_prefix(text) is prefix
