"""`streamparse.response_template(format)` against the reference: transformers' own `parse_response`
with the exported template gives `streamparse.parse`'s message on the format's real-template cases;
a format the template language cannot express is refused naming the construct, as docs/formats.md
lists it."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from conftest import FORMAT_NAMES, ROOT, shared_cases
from transformers.utils.chat_parsing import parse_response
from transformers.utils.chat_parsing.response_templates import load_response_template

import streamparse
from streamparse.families.hermes import HERMES
from streamparse.registry import get_format


def _exported(fmt: str) -> dict[str, Any] | None:
    try:
        return streamparse.response_template(fmt)
    except ValueError:
        return None


EXPORTED = [fmt for fmt in FORMAT_NAMES if _exported(fmt) is not None]
REFUSED = [fmt for fmt in FORMAT_NAMES if fmt not in EXPORTED]
CASES = [(fmt, case) for fmt in EXPORTED for case in shared_cases(fmt)]


def theirs(output: str, template: dict[str, Any], prefix: str, tools: Any) -> tuple[str, str, list[Any]]:
    message = parse_response(output, template, prefix=prefix, tools=tools)
    calls = [(call["function"]["name"], call["function"]["arguments"]) for call in message.get("tool_calls", [])]
    return message.get("content", ""), message.get("reasoning_content", ""), calls


def ours(output: str, fmt: str, case: dict[str, Any]) -> tuple[str, str, list[Any]]:
    message = streamparse.parse(output, fmt, tools=case["tools"], thinking_forced_open=case["thinking_forced_open"])
    assert message.rejected == []
    return message.content, message.reasoning, [(call.name, call.arguments) for call in message.tool_calls]


def test_the_exported_formats_have_real_template_cases() -> None:
    assert {"hermes", "longcat", "command_r7b", "cohere_command"} <= set(EXPORTED)
    for fmt in EXPORTED:
        assert shared_cases(fmt), fmt


@pytest.mark.parametrize(("fmt", "case"), CASES, ids=[f"{fmt}-{c['template']}-{c['case']}" for fmt, c in CASES])
def test_transformers_reads_the_exported_template_as_streamparse_reads_the_format(fmt: str,
                                                                                 case: dict[str, Any]) -> None:
    # The generation prompt is the prefix transformers needs: a prompt that opens reasoning opens the field.
    template = json.loads(json.dumps(streamparse.response_template(fmt)))  # stored as JSON, read back
    assert theirs(case["output"], template, case["generation_prompt"] or "", case["tools"]) \
        == ours(case["output"], fmt, case)


@pytest.mark.parametrize(("fmt", "case"), [(f, c) for f, c in CASES if f == "hermes"][:40])
def test_the_models_own_assistant_header_as_start_anchor(fmt: str, case: dict[str, Any]) -> None:
    template = streamparse.response_template(fmt, start_anchor="<|im_start|>assistant\n")
    assert template["start_anchor"] == "<|im_start|>assistant\n" and "start_anchor_pattern" not in template
    # The whole end of the prompt (the user's turn too) goes in; only what follows the anchor is read.
    assert theirs(case["output"], template, case["prompt_tail"], case["tools"]) == ours(case["output"], fmt, case)


def test_every_template_loads_and_a_registered_format_exports_its_own_delimiters() -> None:
    for fmt in EXPORTED:
        load_response_template(streamparse.response_template(fmt))
    mine = dataclasses.replace(HERMES, name="reflect_export", aliases=(), reasoning=(("<reflect>", "</reflect>"),))
    fields = streamparse.response_template(mine)["fields"]
    assert (fields["reasoning_content"]["open"], fields["reasoning_content"]["close"]) == ("<reflect>", "</reflect>")
    text = '<reflect>r</reflect>Hi<tool_call>{"name": "f", "arguments": {"a": [1]}}</tool_call>'
    assert parse_response(text, streamparse.response_template(mine), prefix="") == {
        "role": "assistant", "reasoning_content": "r", "content": "Hi",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1]}}}]}


def test_content_around_calls_and_framing_joins() -> None:
    template = streamparse.response_template("command_r7b")
    text = ('<|START_RESPONSE|>One<|END_RESPONSE|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", '
            '"parameters": {}}]<|END_ACTION|>')
    assert theirs(text, template, "", None) == ("One", "", [("f", {})])
    assert streamparse.parse(text, "command_r7b").content == "One"


@pytest.mark.parametrize("fmt", REFUSED)
def test_a_format_it_cannot_express_is_refused_naming_the_construct_as_the_docs_list_it(fmt: str) -> None:
    with pytest.raises(ValueError, match=f"format {fmt!r} cannot be written as a transformers response_template: ") \
            as refused:
        streamparse.response_template(fmt)
    why = str(refused.value).split(": ", 1)[1]
    assert re.findall(r"(?:no construct|not written yet): [^;]+\(`[\w.]+`\)", why), why
    row = [line for line in (ROOT / "docs" / "formats.md").read_text().splitlines() if line.startswith(f"| `{fmt}` |")]
    assert row == [f"| `{fmt}` | " + why.replace("|", "\\|") + " |"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown format 'nope'"):
        streamparse.response_template("nope")
    assert get_format("gpt_oss").messages is not None
    with pytest.raises(ValueError, match="headed messages"):
        streamparse.response_template("gpt_oss")
