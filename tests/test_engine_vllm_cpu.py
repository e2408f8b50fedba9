"""streamparse inside the real vLLM server (`vllm-cpu`), end to end: a tiny random-weight model written by
the test (tests/vllm_cpu.py) from a real tokenizer.json and Qwen3-8B's real chat template, served by
`python -m vllm.entrypoints.openai.api_server` with `--tool-call-parser streamparse_hermes
--reasoning-parser streamparse_hermes` (the names registered by the `vllm.general_plugins` entry point
of the installed streamparse), driven by the `openai` SDK.

Each answer, streamed and whole, is compared with `streamparse.parse` of what the model wrote: the
generated token ids (`return_token_ids`) decoded with the model's tokenizer. With `tool_choice`
"required" or a named tool, vLLM enforces streamparse's structural tag of the format (the tool parser's
`adjust_request`), so even random weights write a call in hermes' own `<tool_call>` syntax that parses
as an accepted call whose arguments the tool's schema takes.

Sampling: whitespace-only tokens get a logit bias of -100, so random weights do not spend the tokens
on the whitespace JSON allows between its tokens; a forced request also gets +100 on the end of turn,
so the answer ends wherever the grammar lets it (after the forced call), and -100 on `<think>`, so the
random weights do not spend the tokens on the reasoning the tag allows before the call. The grammar
alone decides what may be written: a bias only orders what it allows.

Needs `vllm-cpu` (`.ci/run` builds its venv from `.ci/vllm-cpu-<version>.txt`); skipped, with the
reason, without it. One server for the module (~40 s to start on an idle machine), few short requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

try:
    metadata.distribution("vllm-cpu")
except metadata.PackageNotFoundError:
    pytest.skip("vllm-cpu is not installed: .ci/run runs this tier in its own venv", allow_module_level=True)

import jsonschema
import openai
import tokenizers
from conftest import SHARED
from vllm_cpu import MESSAGES, SCHEMAS, TOOLS, VllmServer, generated_tokens, whitespace_bias, write_model

import streamparse
from streamparse import Token
from streamparse.registry import get_format

FORMAT = "hermes"
TEMPLATE = SHARED / "templates" / "Qwen3-8B.jinja"
EOS = "<|im_end|>"


class Engine:
    """The served model: its client, tokenizer and the sampling biases above."""

    def __init__(self, server: VllmServer, model: Path) -> None:
        self.server = server
        self.client = openai.OpenAI(base_url=server.url, api_key="x", timeout=300, max_retries=0)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
        self.eos = self.tokenizer.token_to_id(EOS)
        self.whitespace = whitespace_bias(self.tokenizer)

    def raw(self, ids: list[int]) -> str:
        """What the model wrote: its generated ids decoded, less the end of turn that stopped it."""
        return "".join(str(token.text) for token in self.tokens(ids))

    def tokens(self, ids: list[int]) -> list[Token]:
        """What the model wrote as `Token`s, less the end of turn that stopped it."""
        return generated_tokens(self.tokenizer, ids, self.eos)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp("vllm_cpu")
    model = write_model(folder / "model", TEMPLATE.read_text(encoding="utf-8"),
                        ["<|im_start|>", *get_format(FORMAT).special], EOS)
    name = f"streamparse_{FORMAT}"
    server = VllmServer(model, folder / "vllm.log", "--enable-auto-tool-choice", "--tool-call-parser", name,
                        "--reasoning-parser", name)
    yield Engine(server, model)
    server.stop()


def _answer(engine: Engine, stream: bool, **options: Any) -> tuple[dict[str, Any], list[int]]:
    """(the answer vLLM gave: content, reasoning, calls as (name, arguments), finish; the generated ids)."""
    response = engine.client.chat.completions.create(
        model="tiny", messages=MESSAGES, tools=TOOLS, stream=stream, max_tokens=160, seed=7,
        extra_body={"return_token_ids": True}, **options)
    if not stream:
        choice = response.choices[0]
        message = choice.message
        calls = [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls or []]
        answer = {"content": message.content or "", "reasoning": (message.model_extra or {}).get("reasoning") or "",
                  "calls": calls, "finish": choice.finish_reason}
        return answer, (choice.model_extra or {})["token_ids"]
    content, reasoning, ids, finish = [], [], [], None
    calls: dict[int, list[str]] = {}
    for chunk in response:
        for choice in chunk.choices:
            delta = choice.delta
            content.append(delta.content or "")
            reasoning.append((delta.model_extra or {}).get("reasoning") or "")
            for call in delta.tool_calls or []:
                slot = calls.setdefault(call.index, ["", ""])
                slot[0] += (call.function.name or "") if call.function else ""
                slot[1] += (call.function.arguments or "") if call.function else ""
            ids += (choice.model_extra or {}).get("token_ids") or []
            finish = choice.finish_reason or finish
    answer = {"content": "".join(content), "reasoning": "".join(reasoning),
              "calls": [(name, json.loads(arguments)) for _, (name, arguments) in sorted(calls.items())],
              "finish": finish}
    return answer, ids


def _parsed(engine: Engine, ids: list[int], stream: bool, finish: str) -> dict[str, Any]:
    """`parse` of what the model wrote: streamed, its ids as Tokens (the parsers read vLLM's streamed ids
    token-aware); whole, its text (vLLM gives the parsers of a whole output its text only)."""
    if stream:
        message = streamparse.parse(engine.tokens(ids), FORMAT, TOOLS, special_tokens="require")
    else:
        message = streamparse.parse(engine.raw(ids), FORMAT, TOOLS)
    calls = [(call.name, call.arguments) for call in message.tool_calls]
    return {"content": message.content, "reasoning": message.reasoning, "calls": calls,
            "finish": "tool_calls" if calls else finish}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_an_unforced_answer_is_parse_of_what_the_model_wrote(engine: Engine, stream: bool, temperature: float) -> None:
    answer, ids = _answer(engine, stream, temperature=temperature, logit_bias=engine.whitespace)
    assert engine.raw(ids)  # random weights wrote something
    assert answer == _parsed(engine, ids, stream, answer["finish"])


FORCED = {
    "required": {"tool_choice": "required"},
    "required_one": {"tool_choice": "required", "parallel_tool_calls": False},
    "named": {"tool_choice": {"type": "function", "function": {"name": "set_alarm"}}},
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("forced", list(FORCED))
def test_a_forced_call_is_enforced_by_streamparse_structural_tag(engine: Engine, forced: str, stream: bool) -> None:
    bias = {**engine.whitespace, str(engine.eos): 100, str(engine.tokenizer.token_to_id("<think>")): -100}
    answer, ids = _answer(engine, stream, temperature=1.0, logit_bias=bias, **FORCED[forced])
    tokens = engine.tokens(ids)
    # the format's own syntax, not vLLM's JSON list, its delimiters written as their tokens (the tag's)
    assert next(token for token in tokens if str(token.text).strip()) == Token("<tool_call>", True), tokens[:3]
    message = streamparse.parse(tokens, FORMAT, TOOLS, special_tokens="require")
    assert message.tool_calls and not message.rejected, message
    for call in message.tool_calls:
        jsonschema.validate(call.arguments, SCHEMAS[call.name])
    if forced == "named":
        assert {call.name for call in message.tool_calls} == {"set_alarm"}
    if forced == "required_one":
        assert len(message.tool_calls) == 1
    expected = _parsed(engine, ids, stream, "stop")
    if forced == "named":  # OpenAI's finish reason for a named tool, which vLLM follows
        expected["finish"] = "stop"
    assert answer == expected
