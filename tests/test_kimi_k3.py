"""Moonshot Kimi K3 "XTML" (`kimi_k3`): the format and its Decisions (FORMATS.md, third wave 1, 5, 6), by example.

Every example goes through `read`: `parse()` checked against streaming it in both emit modes, 1
and 5 characters at a time (chunk splits inside every `<|…|>` marker).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, shared_cases

import streamparse
from streamparse import Message, Token, parse

FMT = "kimi_k3"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
TOOLS_OPEN, TOOLS_CLOSE = "<|open|>tools<|sep|>", "<|close|>tools<|sep|>"
CALL_CLOSE = "<|close|>call<|sep|>"
THINK_CLOSE = "<|close|>think<|sep|>"
RESPONSE = ("<|open|>response<|sep|>", "<|close|>response<|sep|>")
END = "<|close|>message<|sep|>"


def arg(key: str, body: str, kind: str | None = "string") -> str:
    typed = f' type="{kind}"' if kind is not None else ""
    return f'<|open|>argument key="{key}"{typed}<|sep|>{body}<|close|>argument<|sep|>'


def call(name: str, *elements: str, close: str = CALL_CLOSE, index: int = 1) -> str:
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>' + "".join(elements) + close


def answer(*calls: str, content: str = "", reasoning: str | None = None) -> str:
    """An output as the template writes it after the thinking prompt (forced open) or, with
    `reasoning=None`, after the `thinking=false` prompt (inside the response channel)."""
    head = "" if reasoning is None else f"{reasoning}{THINK_CLOSE}{RESPONSE[0]}"
    tools = TOOLS_OPEN + "".join(calls) + TOOLS_CLOSE if calls else ""
    return f"{head}{content}{RESPONSE[1]}{tools}{END}"


def read(text: str, **options: object) -> Message:
    options.setdefault("tools", TOOLS)
    return agreeing(text, FMT, sizes=(1, 5), **options)


def named(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


@pytest.mark.parametrize("case", shared_cases(FMT), ids=lambda c: f"{c['template']}:{c['case']}")
def test_every_real_render_reads_as_the_template_wrote_it(case: dict) -> None:
    message = read(case["output"], tools=case["tools"], thinking_forced_open=case["thinking_forced_open"])
    expected = case["expected"]
    assert message.content == (expected["content"] or "").strip()
    assert message.reasoning == (expected["reasoning"] or "").strip()
    wanted = [(c["name"], c["arguments"] if isinstance(c["arguments"], dict) else json.loads(c["arguments"]))
              for c in expected["tool_calls"]]
    assert named(message) == wanted
    assert message.rejected == []


def test_channels_reasoning_content_and_framing() -> None:
    text = answer(call("get_time", arg("timezone", "Europe/Paris")), content="Checking.", reasoning="Plan.")
    message = read(text, thinking_forced_open=True)
    assert (message.reasoning, message.content) == ("Plan.", "Checking.")
    assert named(message) == [("get_time", {"timezone": "Europe/Paris"})]
    # thinking=false: the output starts inside the response channel; its closer has no opener (framing).
    message = read("Hello there.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")
    assert (message.content, message.reasoning) == ("Hello there.", "")


def test_a_think_element_later_is_content_verbatim() -> None:
    text = f"Answer <|open|>think<|sep|>x{THINK_CLOSE}{RESPONSE[1]}{END}"
    assert read(text).content == f"Answer <|open|>think<|sep|>x{THINK_CLOSE}"


def test_a_tools_channel_inside_unclosed_reasoning_ends_it() -> None:
    text = "Let me look." + TOOLS_OPEN + call("get_time", arg("timezone", "UTC")) + TOOLS_CLOSE
    message = read(text, thinking_forced_open=True)
    assert message.reasoning == "Let me look."
    assert named(message) == [("get_time", {"timezone": "UTC"})]


def test_the_type_attribute_wins_over_the_schema() -> None:
    # The schema types `duration_minutes` as an integer; type="string" with a numeric text is typed
    # by the schema (it allows no string), and type="number" is JSON.
    create = call("create_event", arg("title", "42"), arg("start", "2025-07-01"),
                  arg("duration_minutes", "45"), arg("priority", " 0.5 ", "number"),
                  arg("all_day", "true", "boolean"), arg("location", "null", "null"))
    message = read(answer(create))
    assert named(message) == [("create_event", {"title": "42", "start": "2025-07-01", "duration_minutes": 45,
                                                "priority": 0.5, "all_day": True, "location": None})]
    # A JSON value of another type than the attribute is kept as parsed.
    message = read(answer(call("get_weather", arg("location", "Paris"), arg("unit", '"celsius"', "number"))))
    assert named(message) == [("get_weather", {"location": "Paris", "unit": "celsius"})]


def test_a_non_json_body_of_a_json_type_stays_text_and_the_schema_decides() -> None:
    message = read(answer(call("create_event", arg("title", "T"), arg("start", "s"),
                               arg("duration_minutes", "forty", "number"))))
    assert statuses(message) == ["schema_violation"]
    # Without tools the text is the value.
    message = read(answer(call("f", arg("n", "forty", "number"))), tools=None)
    assert named(message) == [("f", {"n": "forty"})]


def test_string_bodies_are_byte_exact_and_attributes_unescape() -> None:
    body = ' say &quot;hi&quot; \\n & <b> '
    text = answer('<|open|>call tool="f&amp;g" index="1"<|sep|>'
                  + '<|open|>argument key="a&quot;b" type="string"<|sep|>' + body + "<|close|>argument<|sep|>"
                  + CALL_CLOSE)
    message = read(text, tools=None)
    assert named(message) == [("f&g", {'a"b': body})]


def test_no_type_attribute_is_typed_by_the_schema() -> None:
    message = read(answer(call("create_event", arg("title", "T", None), arg("start", "s", None),
                               arg("duration_minutes", "45", None))))
    assert named(message) == [("create_event", {"title": "T", "start": "s", "duration_minutes": 45})]


def test_the_json_element_is_the_whole_arguments_object() -> None:
    json_element = '<|open|>json type="object"<|sep|> {"location": "Paris", "unit": "celsius"} <|close|>json<|sep|>'
    message = read(answer(call("get_weather", json_element)))
    assert named(message) == [("get_weather", {"location": "Paris", "unit": "celsius"})]
    assert message.tool_calls[0].arguments_json == '{"location": "Paris", "unit": "celsius"}'


@pytest.mark.parametrize("elements", [
    ('<|open|>json type="object"<|sep|>[1, 2]<|close|>json<|sep|>',),  # not one object
    ('<|open|>json type="object"<|sep|>{"a": <|close|>json<|sep|>',),  # not JSON
    (arg("location", "Paris"), '<|open|>json type="object"<|sep|>{}<|close|>json<|sep|>'),  # both kinds
    ('<|open|>json type="object"<|sep|>{}<|close|>json<|sep|>', arg("location", "Paris")),
    ("<|open|>note<|sep|>hi<|close|>note<|sep|>",),  # an element that is not argument/json
])
def test_malformed_calls_are_invalid_json_and_the_next_call_stands(elements: tuple[str, ...]) -> None:
    text = answer(call("get_weather", *elements), call("get_time", arg("timezone", "UTC"), index=2))
    message = read(text)
    assert statuses(message) == ["invalid_json"]
    assert named(message) == [("get_time", {"timezone": "UTC"})]
    assert message.content == ""


def test_an_empty_call_is_empty_arguments_and_a_repeated_key_keeps_the_last() -> None:
    assert named(read(answer(call("list_calendars")))) == [("list_calendars", {})]
    message = read(answer(call("get_time", arg("timezone", "UTC"), arg("timezone", "Asia/Tokyo"))))
    assert named(message) == [("get_time", {"timezone": "Asia/Tokyo"})]


def test_partial_calls_at_the_end() -> None:
    first = call("get_time", arg("timezone", "UTC"))
    # Cut inside a value: truncated; the complete call before it stands.
    message = read(TOOLS_OPEN + first + '<|open|>call tool="get_weather" index="2"<|sep|>'
                   + '<|open|>argument key="location" type="string"<|sep|>Par')
    assert named(message) == [("get_time", {"timezone": "UTC"})]
    assert statuses(message) == ["truncated"]
    assert message.rejected[0].raw.endswith("Par")
    # The call's and the channel's closers are optional at the end when the call is complete.
    message = read(TOOLS_OPEN + call("get_time", arg("timezone", "UTC"), close=""))
    assert named(message) == [("get_time", {"timezone": "UTC"})]
    # Cut inside the json element: truncated.
    message = read(TOOLS_OPEN + call("get_weather", '<|open|>json type="object"<|sep|>{"location": "P', close=""))
    assert statuses(message) == ["truncated"]


def test_progressive_mode_starts_the_call_when_its_name_is_read() -> None:
    parser = streamparse.StreamParser(FMT, tools=TOOLS, emit_calls="progressive")
    deltas = parser.feed(TOOLS_OPEN + '<|open|>call tool="get_time" index="1"<|sep|><|open|>argument key="tim')
    started = [tc for d in deltas for tc in d.tool_calls]
    assert [(tc.name, tc.index) for tc in started] == [("get_time", 0)]
    parser.feed('ezone" type="string"<|sep|>UTC<|close|>argument<|sep|>' + CALL_CLOSE + TOOLS_CLOSE)
    parser.close()
    assert named(parser.message) == [("get_time", {"timezone": "UTC"})]


def test_token_aware_mode_reads_markers_only_as_special_tokens() -> None:
    text = answer(call("get_time", arg("timezone", "UTC")), content="Hi.")
    specials = sorted(streamparse.registry.get_format(FMT).special, key=len, reverse=True)
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        found = next((s for s in specials if text.startswith(s, pos)), None)
        if found is None:
            nxt = min((i for i in (text.find(s, pos) for s in specials) if i >= 0), default=len(text))
            tokens.append(Token(text[pos:nxt]))
            pos = nxt
        else:
            tokens.append(Token(found, special=True))
            pos += len(found)
    message = parse(tokens, FMT, tools=TOOLS, special_tokens="require")
    assert named(message) == [("get_time", {"timezone": "UTC"})]
    assert message.content == "Hi."
    # The same text spelled by ordinary tokens is content.
    plain = parse([Token(text)], FMT, tools=TOOLS, special_tokens="require")
    assert plain.tool_calls == []


def test_detected_from_its_template() -> None:
    from conftest import CASES
    template = CASES.parent / "Kimi-K3.jinja"
    if not template.exists():
        pytest.skip("../shared/templates is not beside this checkout")
    assert streamparse.detect_format(template.read_text()) == FMT
