"""streamparse inside vLLM: the parser pair of every format, composed by vLLM's own `ParserManager`
into the per-request `Parser` its chat serving holds, driven by `parse_delta` (1, 3 and random 1-8
tokens per step, the prompt's ids on the first step, `finished` on the last) and by `parse` (whole),
on the real-template cases and every format's fixtures: the message equals `streamparse.parse`.

The tokenizer here is one id per character (what vLLM's parsers are given is text and ids; ours read
the text). Needs vLLM (`.ci/run` builds its venv from pinned versions); skipped, with the reason,
without it."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from typing import Any

import pytest
from conftest import FIXTURES
from corpus import case_rows, fixture_rows

import streamparse

pytest.importorskip("vllm.parser.parser_manager",
                    reason="vLLM is not installed: .ci/run runs this tier in its own venv")

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager
from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

from streamparse.integrations import vllm as plugin

plugin.register()
CASES = [row for row in case_rows() + fixture_rows() if row.tools]  # the real renders, and every format's fixtures


class CharTokenizer:
    """One id per character: steps of k tokens are steps of k characters."""

    chat_template = None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(map(chr, ids))

    def get_vocab(self) -> dict[str, int]:
        return {}


def _expected(row: Any) -> tuple[str, str, list[tuple[str, object]]]:
    message = streamparse.parse(row.text, row.format, row.tools, row.thinking_forced_open)
    return message.content, message.reasoning, [(call.name, call.arguments) for call in message.tool_calls]


def _setup(row: Any) -> tuple[Any, ChatCompletionRequest, list[int]]:
    name = "streamparse_" + row.format
    parser_cls = ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True)
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=row.tools,
                                    tool_choice="auto")
    tokenizer = CharTokenizer()
    parser = parser_cls(tokenizer, request.tools)
    request = parser.adjust_request(request)
    prompt = (row.prompt or "") if row.thinking_forced_open else "<|user|>hi<|assistant|>"
    return parser, request, tokenizer.encode(prompt)


def _streamed(row: Any, sizes: list[int]) -> tuple[str, str, list[tuple[str, object]]]:
    parser, request, prompt = _setup(row)
    ids = [ord(c) for c in row.text]
    content, reasoning, calls = [], [], {}
    at, step = 0, 0
    while at < len(ids) or at == 0:
        size = sizes[step % len(sizes)]
        piece = ids[at: at + size]
        at += size
        step += 1
        delta = parser.parse_delta("".join(map(chr, piece)), piece, request,
                                   prompt_token_ids=prompt, finished=at >= len(ids))
        if delta is None:
            continue
        content.append(delta.content or "")
        reasoning.append(delta.reasoning or "")
        for call in delta.tool_calls:
            name, arguments = calls.get(call.index, (None, ""))
            calls[call.index] = (name or (call.function.name if call.function else None),
                                 arguments + ((call.function.arguments or "") if call.function else ""))
    return "".join(content), "".join(reasoning), [(n, json.loads(a)) for _, (n, a) in sorted(calls.items())]


def _whole(row: Any) -> tuple[str, str, list[tuple[str, object]]]:
    parser, request, prompt = _setup(row)
    parser.set_prompt_token_ids(prompt)  # what vLLM's chat serving calls before a whole output
    reasoning, content, calls = parser.parse(row.text, request, enable_auto_tools=True)
    return content or "", reasoning or "", [(call.name, json.loads(call.arguments)) for call in calls or []]


def test_every_format_and_alias_is_registered() -> None:
    for name in [*streamparse.formats(), None]:
        parser_name = f"streamparse_{name}" if name else "streamparse"
        assert parser_name in ToolParserManager.lazy_parsers
        assert parser_name in ReasoningParserManager.lazy_parsers
        assert ToolParserManager.get_tool_parser(parser_name).format_name == name


@pytest.mark.parametrize("row", CASES, ids=[row.label for row in CASES])
def test_vllm_parser_equals_parse(row: Any) -> None:
    expected = _expected(row)
    assert _whole(row) == expected
    rng = random.Random(row.label)
    for sizes in ([1], [3], [rng.randint(1, 8) for _ in range(64)], [len(row.text) or 1]):
        assert _streamed(row, sizes) == expected, sizes[:3]


def test_the_detecting_parser_reads_the_format_from_the_chat_template() -> None:
    tokenizer = CharTokenizer()
    tokenizer.chat_template = (FIXTURES / "hermes" / "chat_template.jinja").read_text(encoding="utf-8")  # type: ignore[assignment]
    parser = ToolParserManager.get_tool_parser("streamparse")(tokenizer)
    assert parser.format == "hermes"


def test_the_entry_point_registers_the_parsers_in_a_fresh_process() -> None:
    """vLLM's own plugin loader finds the `vllm.general_plugins` entry point (an installed streamparse)."""
    code = ("from vllm.plugins import load_general_plugins; load_general_plugins()\n"
            "from vllm.tool_parsers.abstract_tool_parser import ToolParserManager\n"
            "print('streamparse_hermes' in ToolParserManager.lazy_parsers)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"


class CountingTokenizer(CharTokenizer):
    """`CharTokenizer` that counts the ids it is asked to decode."""

    decoded = 0

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        self.decoded += len(ids)
        return super().decode(ids, skip_special_tokens)


@pytest.mark.parametrize("row", CASES[::3], ids=[row.label for row in CASES[::3]])
def test_reasoning_end_on_each_decode_step_reads_each_id_a_bounded_number_of_times(row: Any) -> None:
    """vLLM's structured output asks `is_reasoning_end_streaming` on every step with every id so far:
    the answer is whether a `StreamParser` fed those ids' text knows the reasoning's end, at every step,
    and the ids decoded over the whole output are O(n) (each step's own and the previous step's, and the
    first step's twice), not the n²/2 of reading them all again at each step.
    Taking ids back (speculation) reads again."""
    parser_cls = ReasoningParserManager.get_reasoning_parser("streamparse_" + row.format)
    prompt = (row.prompt or "") if row.thinking_forced_open else "<|user|>hi<|assistant|>"
    ids = [ord(c) for c in prompt + row.text]
    counting = CountingTokenizer()
    stepped = parser_cls(counting)

    def ended(input_ids: list[int]) -> bool:  # the ids read again from the start
        parser = streamparse.StreamParser(row.format)
        parser.feed("".join(map(chr, input_ids)))
        return parser.reasoning_end is not None

    rng = random.Random(row.label)
    at, steps = len(prompt), 0
    while at < len(ids):
        step = rng.randint(1, 8)
        assert stepped.is_reasoning_end_streaming(ids[:at + step], ids[at:at + step]) == ended(ids[:at + step]), at
        at, steps = at + step, steps + 1
    # the first two steps read every id so far (3 in all); each later one its own ids and the previous
    # step's, twice (at most 8 each): 24
    assert counting.decoded <= 3 * len(ids) + 24 * steps
    counting.decoded = 0
    back = max(len(prompt), len(ids) - 5)  # five ids taken back, three others in their place
    other = [*ids[:back], 0x41, 0x42, 0x43]
    assert stepped.is_reasoning_end_streaming(other, other[back:]) == ended(other)


def test_the_prompt_question_is_answered_from_the_prompt_alone() -> None:
    """vLLM asks `is_reasoning_end` of the prompt only: its per-request `Parser` before the output (0.32
    asks before giving the prompt with `set_prompt_token_ids`, 0.34 after), and skips the reasoning half
    on True. True only for a prompt that ends with the format's reasoning closed: otherwise the output's
    own start decides (a prompt that reads as 'no reasoning opened' as output text is not an answer)."""
    parser_cls = ParserManager.get_parser(tool_parser_name="streamparse_hermes",
                                          reasoning_parser_name="streamparse_hermes", enable_auto_tools=True)
    tokenizer = CharTokenizer()
    for prompt, ended in [("<|user|>hi<|assistant|>", False), ("<|user|>hi<|assistant|><think>\n", False),
                          ("<|user|>hi<|assistant|><think>\n\n</think>\n\n", True)]:
        assert parser_cls(tokenizer, None).is_reasoning_end(tokenizer.encode(prompt)) is ended, prompt


@pytest.mark.parametrize("sizes", [[1], [3], [1 << 20]])
def test_an_output_after_a_prompt_that_closed_the_reasoning_is_read_from_its_start(sizes: list[int]) -> None:
    """A prompt that closes an empty reasoning block (Qwen3's template with thinking off): vLLM reads no
    reasoning; the tool half reads the output from its start."""
    row = next(row for row in CASES if row.format == "hermes" and "<think>" not in row.text and row.tools)
    parser, request, _ = _setup(row)
    ids = [ord(c) for c in row.text]
    prompt = [ord(c) for c in "<|user|>hi<|assistant|><think>\n\n</think>\n\n"]
    calls: list[str] = []
    content = []
    for at in range(0, len(ids), sizes[0]):
        piece = ids[at:at + sizes[0]]
        delta = parser.parse_delta("".join(map(chr, piece)), piece, request, prompt_token_ids=prompt,
                                   finished=at + sizes[0] >= len(ids))
        if delta is not None:
            content.append(delta.content or "")
            calls += [call.function.name for call in delta.tool_calls if call.function and call.function.name]
    expected = _expected(row)
    assert ("".join(content), [name for name, _ in expected[2]]) == (expected[0], calls)


def test_a_forced_call_is_constrained_from_the_first_token() -> None:
    """The tool half's `adjust_request` sets streamparse's structural tag for a forced call and tells vLLM
    the grammar covers the reasoning (`_grammar_from_parser`), so vLLM constrains from the first token
    instead of asking `is_reasoning_end` of the prompt; an unforced request is left alone."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    tool_parser = ToolParserManager.get_tool_parser("streamparse_hermes")(CharTokenizer())
    for choice, forced in [("required", True), ({"type": "function", "function": {"name": "f"}}, True),
                           ("auto", False)]:
        request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools,
                                        tool_choice=choice)
        request = tool_parser.adjust_request(request)
        assert request._grammar_from_parser is forced, choice
        assert (request.structured_outputs is not None) is forced, choice
        assert request.resolve_reasoning_ended(None, []) is (True if forced else None), choice
