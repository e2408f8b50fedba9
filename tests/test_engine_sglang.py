"""streamparse inside SGLang: the detector pair of every format, driven through SGLang's own
`ReasoningParser` and `FunctionCallParser` wrappers chained as its chat serving chains them (the
reasoning parser's normal text goes to the tool parser), on the real-template cases and every format's
fixtures (whole and cut inside the last call), under random chunkings and whole: the message equals
`streamparse.parse` of the text.

Needs SGLang (`.ci/run` builds its venv from pinned versions); skipped, with the reason, without it."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import pytest
from corpus import case_rows, fixture_rows

import streamparse

sglang = pytest.importorskip("sglang.srt.function_call.function_call_parser",
                             reason="SGLang is not installed: .ci/run runs this tier in its own venv")

from sglang.srt.entrypoints.openai.protocol import Tool  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: E402

from streamparse.integrations import sglang as plugin  # noqa: E402

plugin.register()
CASES = [row for row in case_rows() + fixture_rows() if row.tools]  # the real renders, and every format's fixtures


def _expected(row: object) -> tuple[str, str, list[tuple[str, object]]]:
    message = streamparse.parse(row.text, row.format, row.tools,  # type: ignore[attr-defined]
                                row.thinking_forced_open)  # type: ignore[attr-defined]
    return message.content, message.reasoning, [(call.name, call.arguments) for call in message.tool_calls]


def _parsers(row: object) -> tuple[ReasoningParser, FunctionCallParser]:
    name = "streamparse_" + row.format  # type: ignore[attr-defined]
    tools = [Tool(**tool) for tool in row.tools]  # type: ignore[attr-defined]
    return (ReasoningParser(name, stream_reasoning=True, force_reasoning=row.thinking_forced_open),  # type: ignore[attr-defined]
            FunctionCallParser(tools, name))


def _streamed(row: object, chunks: list[str]) -> tuple[str, str, list[tuple[str, object]]]:
    reasoning_parser, tool_parser = _parsers(row)
    content, reasoning, calls = [], [], {}

    def tool_side(normal: str) -> None:
        text, items = tool_parser.parse_stream_chunk(normal)
        content.append(text)
        for item in items:
            name, arguments = calls.get(item.tool_index, (None, ""))
            calls[item.tool_index] = (name or item.name, arguments + item.parameters)

    for chunk in chunks:
        thought, normal = reasoning_parser.parse_stream_chunk(chunk)
        reasoning.append(thought or "")
        tool_side(normal or "")
    thought, normal = reasoning_parser.parse_stream_end()
    reasoning.append(thought or "")
    tool_side(normal or "")
    text, items = tool_parser.parse_stream_end()
    content.append(text)
    for item in items:
        name, arguments = calls.get(item.tool_index, (None, ""))
        calls[item.tool_index] = (name or item.name, arguments + item.parameters)
    return "".join(content), "".join(reasoning), [(name, json.loads(args)) for _, (name, args) in sorted(calls.items())]


def _whole(row: object) -> tuple[str, str, list[tuple[str, object]]]:
    reasoning_parser, tool_parser = _parsers(row)
    reasoning, normal = reasoning_parser.parse_non_stream(row.text)  # type: ignore[attr-defined]
    normal = normal or ""
    calls = []
    if tool_parser.has_tool_call(normal):
        normal, calls = tool_parser.parse_non_stream(normal)
    return normal, reasoning or "", [(call.name, json.loads(call.parameters)) for call in calls]


def _chunks(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, len(text) // 3)))) \
        if len(text) > 1 else []
    edges = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def test_every_format_and_alias_is_registered() -> None:
    for name in streamparse.formats():
        assert f"streamparse_{name}" in FunctionCallParser.ToolCallParserEnum
        assert f"streamparse_{name}" in ReasoningParser.DetectorMap


@pytest.mark.parametrize("row", CASES, ids=[row.label for row in CASES])
def test_sglang_chain_equals_parse(row: object) -> None:
    expected = _expected(row)
    assert _whole(row) == expected
    rng = random.Random(row.label)  # type: ignore[attr-defined]
    text = row.text  # type: ignore[attr-defined]
    assert _streamed(row, list(text)) == expected
    for _ in range(8):
        assert _streamed(row, _chunks(text, rng)) == expected


def test_the_entry_point_registers_the_parsers_in_a_fresh_process() -> None:
    """SGLang's own plugin loader finds the `sglang.srt.plugins` entry point (an installed streamparse)."""
    code = ("from sglang.srt.plugins import load_plugins; load_plugins()\n"
            "from sglang.srt.function_call.function_call_parser import FunctionCallParser\n"
            "print('streamparse_hermes' in FunctionCallParser.ToolCallParserEnum)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_required_calls_are_constrained_by_grammar_for() -> None:
    """`tool_choice: required` goes to SGLang as xgrammar's structural tag of the format's whole output
    (`streamparse.grammar_for`), for every format that has one; a format without one says so."""
    import xgrammar

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    for name in streamparse.formats():
        parser = FunctionCallParser([Tool(**tool) for tool in tools], f"streamparse_{name}")
        try:
            expected = streamparse.grammar_for(name, tools, tool_choice="required")
        except ValueError:
            with pytest.raises(ValueError):
                parser.get_structure_constraint("required")
            continue
        kind, tag = parser.get_structure_constraint("required")
        assert kind == "structural_tag"
        assert tag == xgrammar.StructuralTag.from_json(json.dumps(expected))
