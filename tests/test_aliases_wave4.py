"""The fourth wave's aliases (FORMATS.md, the family sections' alias lines, and Decisions 19, 20, 21):
each names its format, and each keeps the policy Decision 19 gives it."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import agreeing, named_calls

import streamparse
from streamparse.registry import get_format

ALIASES = {
    "exaone4": "hermes", "exaone_moe": "hermes", "trinity": "hermes", "mirothinker": "hermes",
    "poolside_v1": "glm45", "laguna": "glm45", "spark25": "glm45", "glm5": "glm45", "ring": "glm45",
    "qwen3_6": "qwen3_coder", "qwen3_8": "qwen3_coder", "nemotron3_5": "qwen3_coder", "step3p5": "qwen3_coder",
    "deepseek_v4": "deepseek_v3_2",
    "firefunction_v2": "phi4_mini",
}
HERMES, GLM, QWEN = (sorted(alias for alias, fmt in ALIASES.items() if fmt == name)
                     for name in ("hermes", "glm45", "qwen3_coder"))
TIME = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
    "timezone": {"type": "string"}}}}}]


@pytest.mark.parametrize(("alias", "fmt"), sorted(ALIASES.items()))
def test_every_alias_names_its_format(alias: str, fmt: str) -> None:
    assert alias in streamparse.formats()
    assert get_format(alias) is get_format(fmt)


# ----------------------------------------------------------------- hermes: EXAONE, K-EXAONE, Trinity, MiroThinker


@pytest.mark.parametrize("alias", HERMES)
def test_hermes_aliases_read_calls_with_or_without_inner_newlines(alias: str) -> None:
    # EXAONE 4.0 and K-EXAONE write no newlines inside the tags and join calls with one; MiroThinker writes them.
    text = ('<tool_call>{"name": "get_time", "arguments": {"timezone": "UTC"}}</tool_call>\n'
            '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "CET"}}\n</tool_call>')
    msg = agreeing(text, alias, sizes=(1, 9), tools=TIME)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"}), ("get_time", {"timezone": "CET"})]


@pytest.mark.parametrize("alias", HERMES)
@pytest.mark.parametrize("body", [
    '```json\n{"name": "get_time", "arguments": {"timezone": "UTC"}}\n```',  # a code fence (llamadart's EXAONE)
    '{"function": {"name": "get_time", "arguments": {"timezone": "UTC"}}}',  # a `function` wrapper object
])
def test_hermes_aliases_reject_the_bodies_other_handlers_accept(alias: str, body: str) -> None:
    text = f"<tool_call>{body}</tool_call>"
    msg = streamparse.parse(text, alias, tools=TIME)
    assert msg.tool_calls == []
    assert [(r.status, r.raw) for r in msg.rejected] == [("invalid_json", text)]


def test_trinity_calls_inside_reasoning_stay_reasoning_unless_extracted() -> None:
    call = '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    text = f"<think>I will call {call}</think>Checking."
    kept = streamparse.parse(text, "trinity", tools=TIME)
    assert (kept.reasoning, kept.content, kept.tool_calls) == (f"I will call {call}", "Checking.", [])
    extracted = streamparse.parse(text, "trinity", tools=TIME, tool_calls_in_reasoning="extract")
    assert (extracted.reasoning, named_calls(extracted)) == ("I will call", [("get_time", {})])


def test_mirothinker_mcp_blocks_are_content() -> None:
    text = ("<use_mcp_tool>\n<server_name>clock</server_name>\n<tool_name>get_time</tool_name>\n"
            '<arguments>\n{"timezone": "UTC"}\n</arguments>\n</use_mcp_tool>')
    msg = agreeing(text, "mirothinker", sizes=(1, 5), tools=TIME)
    assert (msg.content, msg.tool_calls, msg.rejected) == (text, [], [])


@pytest.mark.parametrize(("alias", "prompt", "forced"), [
    ("exaone4", "[|assistant|]<think>\n", True),
    ("exaone4", "[|assistant|]<think>\n\n</think>\n\n", False),
    ("exaone_moe", "<|assistant|>\n<think>\n", True),
    ("mirothinker", "<|im_start|>assistant\n", False),
    ("qwen3_6", "<|im_start|>assistant\n<think>\n", True),
    ("qwen3_8", "<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
    ("nemotron3_5", "<|im_start|>assistant\n<think>\n", True),
    ("nemotron3_5", "<|im_start|>assistant\n<think></think>", False),
    ("step3p5", "<|im_start|>assistant\n<think>\n", True),
    ("glm5", "<|assistant|><think>", True),
])
def test_thinking_forced_open_recognises_the_aliases_prompt_ends(alias: str, prompt: str, forced: bool) -> None:
    assert streamparse.thinking_forced_open(prompt, alias) is forced


# ----------------------------------------------------------------- glm45: Laguna, Spark 2.5, GLM-5.x, Ring


@pytest.mark.parametrize("alias", GLM)
def test_glm_aliases_keep_values_byte_exact(alias: str) -> None:
    text = "<tool_call>get_time\n<arg_key>timezone</arg_key>\n<arg_value>\n UTC \n</arg_value>\n</tool_call>"
    msg = agreeing(text, alias, sizes=(1, 4), tools=TIME)
    assert named_calls(msg) == [("get_time", {"timezone": "\n UTC \n"})]  # SGLang strips a newline each side


@pytest.mark.parametrize("alias", GLM)
def test_glm_aliases_read_glm_5_3_flash_s_json_form_by_the_name_rule(alias: str) -> None:
    text = '<tool_call>get_time>{"timezone": "UTC"}</tool_call>'
    msg = agreeing(text, alias, sizes=(1, 6), tools=TIME)
    assert msg.tool_calls == []
    assert [(r.status, r.name, r.raw) for r in msg.rejected] == [("unknown_tool", 'get_time>{"timezone": "UTC"}', text)]


@pytest.mark.parametrize("alias", ["glm5", "ring"])
def test_for_glm5_and_ring_a_call_inside_open_reasoning_stays_reasoning(alias: str) -> None:
    text = "Plan. <tool_call>get_time<arg_key>timezone</arg_key><arg_value>UTC</arg_value></tool_call>"
    msg = streamparse.parse(text, alias, tools=TIME, thinking_forced_open=True)
    assert (msg.reasoning, msg.content, msg.tool_calls) == (text, "", [])


# ----------------------------------------------------------------- qwen3_coder: Qwen3.6, Qwen3.8, Nemotron 3.5


@pytest.mark.parametrize("alias", QWEN)
def test_qwen_aliases_read_the_xml_calls_typed_by_the_schema(alias: str) -> None:
    tools: Any = [{"type": "function", "function": {"name": "count", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "label": {"type": "string"}}}}}]
    text = ("Reasoning.\n</think>\n\n<tool_call>\n<function=count>\n<parameter=n>\n12\n</parameter>\n"
            "<parameter=label>\n007\n</parameter>\n</function>\n</tool_call>")
    msg = agreeing(text, alias, sizes=(1, 7), tools=tools, thinking_forced_open=True)
    assert (msg.reasoning, named_calls(msg)) == ("Reasoning.", [("count", {"n": 12, "label": "007"})])


# ----------------------------------------------------------------- deepseek_v4, firefunction_v2


def test_deepseek_v4_reads_its_tool_calls_block() -> None:
    text = ('</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n'
            '<｜DSML｜parameter name="timezone" string="true">UTC</｜DSML｜parameter>\n'
            '</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    msg = agreeing(text, "deepseek_v4", sizes=(1, 8), tools=TIME, thinking_forced_open=True)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("", "", [("get_time", {"timezone": "UTC"})])


def test_firefunction_v2_keeps_a_model_written_id_and_generates_the_missing_ones() -> None:
    text = (' functools[{"name": "get_time", "arguments": {"timezone": "UTC"}, "id": "call_ff01"}, '
            '{"name": "get_time", "arguments": {"timezone": "CET"}}]')
    msg = agreeing(text, "firefunction_v2", sizes=(1, 5), tools=TIME)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"}), ("get_time", {"timezone": "CET"})]
    assert msg.tool_calls[0].id == "call_ff01"
    assert msg.tool_calls[1].id == "call_1"  # the tests' deterministic factory's id for the second call
