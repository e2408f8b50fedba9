"""inclusionAI Ling 3 (`ling3`, aliases `ling`, `bailing3`): the fourth-wave Decisions for it (17, 21, 22).

glm45's wire in `<role>ASSISTANT</role>` turns that end `<|role_end|>`; a call ends reasoning the prompt
opened, not reasoning the model opened. No template is stored: the wire is FORMATS.md's block and the
peers' (llama.cpp `ling3`, SGLang `Ling3Detector`)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message
from streamparse.registry import get_format

FMT = "ling3"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
PROMPT = "<role>HUMAN</role>Weather?<|role_end|><role>ASSISTANT</role>\n<think>"
CALL = ("<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris, France</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>")
WEATHER = [("get_weather", {"location": "Paris, France", "days": 3})]


def both_modes(text: str, fmt: str = FMT, **options: object) -> Message:
    """parse(), and streams of 1, 3 and 7 characters in both emit modes, agree; the message is returned."""
    return agreeing(text, fmt, sizes=(1, 3, 7), **options)


def test_the_aliases_name_ling3_and_ring_stays_glm45() -> None:
    assert get_format("ling").name == get_format("bailing3").name == FMT
    assert get_format("ring").name == "glm45"


def test_the_wire_block_after_a_thinking_prompt() -> None:
    assert streamparse.thinking_forced_open(PROMPT, FMT)
    msg = both_modes(f"reasoning</think>content{CALL}<|role_end|>", tools=TOOLS, prompt=PROMPT)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("reasoning", "content", WEATHER)


def test_the_real_fixture() -> None:
    text = (FIXTURES / FMT / "ling3_reasoning_two_calls.txt").read_text()
    prompt = (FIXTURES / FMT / "ling3_reasoning_two_calls.prompt").read_text()
    msg = both_modes(text, tools=TOOLS, prompt=prompt)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("The user wants the weather in Paris.", "Checking.",
                                                              WEATHER)


def test_a_call_ends_the_reasoning_the_prompt_opened() -> None:
    # Decision 17: `calls_end_reasoning` for prompt-opened reasoning (llama.cpp treats it as `</think>`).
    msg = both_modes(f"reasoning {CALL}", tools=TOOLS, thinking_forced_open=True)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("reasoning", "", WEATHER)


def test_a_call_in_reasoning_the_model_opened_stays_reasoning() -> None:
    # Decision 17: glm45's rule for reasoning the model opened with <think>.
    text = f"<think>reasoning {CALL}</think>answer"
    msg = both_modes(text, tools=TOOLS)
    assert (msg.reasoning, msg.content, msg.tool_calls) == (f"reasoning {CALL}", "answer", [])
    # ... and so do the glm45 aliases, even after a thinking prompt (second-wave rule).
    msg = both_modes(f"reasoning {CALL}", "ring", tools=TOOLS, thinking_forced_open=True)
    assert (msg.reasoning, msg.tool_calls) == (f"reasoning {CALL}", [])


def test_tool_calls_in_reasoning_extract_still_applies() -> None:
    msg = both_modes(f"<think>reasoning {CALL}</think>answer", tools=TOOLS, tool_calls_in_reasoning="extract")
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("reasoning", "answer", WEATHER)


@pytest.mark.parametrize("lead", ["<role>ASSISTANT</role>", "\n<role>ASSISTANT</role>\n"])
def test_a_leading_role_marker_and_the_trailing_role_end_are_framing(lead: str) -> None:
    msg = both_modes(f"{lead}<think>plan</think>Hi.{CALL}\n<|role_end|>\n", tools=TOOLS)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("plan", "Hi.", WEATHER)
    msg = both_modes(f"{lead}plan</think>Hi.", prompt=PROMPT)
    assert (msg.reasoning, msg.content) == ("plan", "Hi.")
    # Elsewhere both are text.
    msg = both_modes("Hi <role>ASSISTANT</role> and <|role_end|> there")
    assert msg.content == "Hi <role>ASSISTANT</role> and <|role_end|> there"


def test_thinking_off_pre_closes_the_block() -> None:
    prompt = "<role>ASSISTANT</role>\n<think></think>"
    assert not streamparse.thinking_forced_open(prompt, FMT)
    msg = both_modes(f"Hello.{CALL}", tools=TOOLS, prompt=prompt)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("", "Hello.", WEATHER)


def test_glm45_decisions_hold() -> None:
    # A repeated key keeps its last value; an unknown tool is rejected; a cut-off call is truncated.
    msg = both_modes("<tool_call>get_weather<arg_key>location</arg_key><arg_value>A</arg_value>"
                     "<arg_key>location</arg_key><arg_value>B</arg_value></tool_call>"
                     "<tool_call>nope</tool_call><tool_call>get_weather<arg_key>location</arg_key><arg_value>C",
                     tools=TOOLS)
    assert named_calls(msg) == [("get_weather", {"location": "B"})]
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "nope"), ("truncated", None)]


def test_detection_and_grammars() -> None:
    # Decision 22: `<role>ASSISTANT</role>` with glm45's markup; without it the template is glm45's.
    template = ("{%- for m in messages %}<role>{{ m.role | upper }}</role>{{ '<tool_call>' + m.name + "
                "'<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>' }}<|role_end|>{% endfor %}"
                "<role>ASSISTANT</role>")
    assert streamparse.detect_format(template) == FMT
    assert streamparse.detect_format(template.replace("<role>ASSISTANT</role>", "<|assistant|>")) == "glm45"
    for syntax in ("structural_tag", "lark", "gbnf"):
        for forced in (False, True):
            assert streamparse.grammar_for(FMT, TOOLS, tool_choice="required", syntax=syntax,
                                           thinking_forced_open=forced)
