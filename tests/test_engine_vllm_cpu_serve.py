"""`streamparse serve --upstream-kind vllm` in front of the real vLLM server (`vllm-cpu`), end to end: one
vLLM process, started without parsers, serves a tiny random-weight model written by the test
(tests/vllm_cpu.py) whose tokenizer carries the special delimiters of every format below; one proxy per
format renders that format's real chat template (../shared/templates) with the same tokenizer.json.

For each format:
- the prompt arrives as token ids the engine accepts (the usage vLLM reports counts the ids the proxy's
  tokenizer makes of the rendered prompt), and the proxy runs with `--upstream-token-ids on`, so every
  generated chunk must come with vLLM's `token_ids`: the answer equals `streamparse.parse` of the same
  output (asked of vLLM directly, same seed) read token-aware (`special_tokens="require"`);
- `response_format` `json_object` and `json_schema`: vLLM enforces the grammar the proxy sent (for these
  formats, which have reasoning, the structural tag of the reasoning and the JSON), so the answer is
  JSON (that the schema takes);
- `tool_choice` "required", a named tool, `allowed_tools` and `parallel_tool_calls: false`, and a strict
  tool under "auto": vLLM enforces the structural tag the proxy sent, so random weights write calls that
  the proxy accepts, whose arguments the tools' schemas take (a null for an optional argument is "not
  given", as the tools check and the grammars have it). A structural tag matches text, so random weights
  may spell a delimiter with ordinary tokens; the proxy reads a constrained answer as text, as the
  grammar held it (`constraints.reads_as_text`).

Sampling: whitespace-only tokens get a logit bias of -100 (JSON allows whitespace between its tokens,
where random weights would spend the budget), and so does each token that begins the format's
reasoning opener, whitespace before it or not (an optional block the grammars allow before the answer,
spelled as text or as its token, where random weights would write on); a forced request gets +100 on
the end of turn, so the answer ends where the grammar first lets it (and a `json_object` answer +100 on
`"` and `}`, so its free keys and values end as soon as JSON lets them); the strict request gets +100 on
the call opener and +50 on the end of turn, so a call is opened and the answer ends after it. A bias
only orders what the grammar allows.

Formats: those whose delimiters are special tokens of their models and whose real templates render
tools, one of each syntax family (JSON in tags, XML parameters, DeepSeek's call blocks, GLM's argument
pairs, Mistral's `[TOOL_CALLS]`, Kimi's sections). Needs `vllm-cpu`; skipped, with the reason, without it."""

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

import httpx
import jsonschema
import openai
import tokenizers
from conftest import SHARED
from test_server import Server
from vllm_cpu import MESSAGES, SCHEMAS, TOOLS, VllmServer, generated_tokens, whitespace_bias, write_model

import streamparse
from streamparse.registry import get_format
from streamparse.types import Token

FORMATS = {
    "hermes": "Qwen3-8B.jinja",
    "qwen3_coder": "Qwen3-Coder-30B-A3B-Instruct.jinja",
    "deepseek_v3_1": "DeepSeek-V3.1.jinja",
    "glm45": "GLM-4.5.jinja",
    "mistral": "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "kimi_k2": "Kimi-K2-Instruct.jinja",
}
EOS = "<|im_end|>"
BOS = "<｜begin▁of▁sentence｜>"  # the real tokenizer's own
ANSWER_SCHEMA = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}, "sunny": {"type": "boolean"}},
                 "required": ["city", "sunny"], "additionalProperties": False}


class Engine:
    """The vLLM server, its model's tokenizer, the proxies (one per format, started when first asked)."""

    def __init__(self, vllm: VllmServer, model: Path, folder: Path) -> None:
        self.vllm = vllm
        self.model = model
        self.folder = folder
        self.tokenizer = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
        self.eos = self.tokenizer.token_to_id(EOS)
        self.whitespace = whitespace_bias(self.tokenizer)
        self.texts = [self.tokenizer.decode([i], skip_special_tokens=False)
                      for i in range(self.tokenizer.get_vocab_size())]
        self.proxies: dict[str, Server] = {}

    def proxy(self, format: str) -> Server:
        if format not in self.proxies:
            folder = self.folder / format
            folder.mkdir()
            (folder / "tokenizer.json").write_bytes((self.model / "tokenizer.json").read_bytes())
            (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS, "bos_token": BOS}))
            (folder / "chat_template.jinja").write_text((SHARED / "templates" / FORMATS[format]).read_text("utf-8"),
                                                        encoding="utf-8")
            self.proxies[format] = Server(self.vllm.url, folder, "--upstream-kind", "vllm", "--model", "tiny",
                                          "--upstream-token-ids", "on", "--format", format)
        return self.proxies[format]

    def client(self, format: str) -> Any:
        """The SDK on `format`'s proxy (minutes allowed: the machine's two cores are shared)."""
        return openai.OpenAI(base_url=self.proxy(format).url, api_key="x", timeout=300, max_retries=0)

    def bias(self, format: str, forced: bool) -> dict[str, int]:
        """The sampling biases above, for `format` (the end of turn favoured when `forced`)."""
        bias = dict(self.whitespace)
        openers = [opener for opener, _ in get_format(format).reasoning]
        for i, text in enumerate(self.texts):
            if text.strip() and any(opener.startswith(text.lstrip()) for opener in openers):
                bias[str(i)] = -100
        if forced:
            bias[str(self.eos)] = 100
        return bias

    def tokens(self, ids: list[int]) -> list[Token]:
        """The output as the model's tokens, less the end of turn (`vllm_cpu.generated_tokens`)."""
        return generated_tokens(self.tokenizer, ids, self.eos)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp("vllm_cpu_serve")
    special = [token for name in FORMATS for token in get_format(name).special]
    model = write_model(folder / "model", "{{ messages }}", ["<|im_start|>", BOS, *special], EOS)
    vllm = VllmServer(model, folder / "vllm.log")
    engine = Engine(vllm, model, folder)
    yield engine
    for proxy in engine.proxies.values():
        proxy.stop()
    vllm.stop()


def _calls(message: Any) -> list[tuple[str, Any]]:
    return [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls or []]


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """`arguments` are valid for tool `name`: its schema takes them, a null for an optional argument
    read as the argument not given (the tools check's rule, which the grammars follow)."""
    schema = SCHEMAS[name]
    given = {key: value for key, value in arguments.items() if value is not None or key in schema["required"]}
    jsonschema.validate(given, schema)


@pytest.mark.parametrize("format", list(FORMATS))
def test_prompt_ids_are_accepted_and_the_output_is_read_token_aware(engine: Engine, format: str) -> None:
    options = {"max_tokens": 24, "temperature": 1.0, "seed": 11, "logit_bias": engine.bias(format, False)}
    answer = engine.client(format).chat.completions.create(model="tiny", messages=MESSAGES, tools=TOOLS,
                                                                   **options)
    template = streamparse.ChatTemplate(engine.folder / format)
    assert template.tokenizer is not None
    prompt = template.tokenizer.encode_parts(template.render_parts(MESSAGES, TOOLS, True))
    assert answer.usage.prompt_tokens == len(prompt)  # vLLM took the ids the proxy's tokenizer made
    stops = list(get_format(format).stops)
    direct = httpx.post(f"{engine.vllm.url}/completions", timeout=300, json={
        "model": "tiny", "prompt": prompt, "skip_special_tokens": False, "return_token_ids": True,
        **({"stop": stops} if stops else {}), **options}).json()["choices"][0]
    expected = streamparse.parse(engine.tokens(direct["token_ids"]), format, TOOLS, special_tokens="require")
    message = answer.choices[0].message
    assert (message.content or "", _calls(message)) == \
        (expected.content, [(call.name, call.arguments) for call in expected.tool_calls])
    assert ((message.model_extra or {}).get("reasoning") or "") == expected.reasoning


FORCED = {
    "required": {"tool_choice": "required"},
    "named": {"tool_choice": {"type": "function", "function": {"name": "set_alarm"}}},
    "allowed_tools": {"tool_choice": {"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "get_weather"}}]}}},
    "one_call": {"tool_choice": "required", "parallel_tool_calls": False},
}
NAMES = {"named": {"set_alarm"}, "allowed_tools": {"get_weather"}}

# The opener of each format's calls (favoured in the strict request).
CALL_OPENERS = {"hermes": "<tool_call>", "qwen3_coder": "<tool_call>", "deepseek_v3_1": "<｜tool▁calls▁begin｜>",
                "glm45": "<tool_call>", "mistral": "[TOOL_CALLS]", "kimi_k2": "<|tool_calls_section_begin|>"}


@pytest.mark.parametrize("forced", list(FORCED))
@pytest.mark.parametrize("format", list(FORMATS))
def test_a_forced_call_is_enforced_by_the_engine(engine: Engine, format: str, forced: str) -> None:
    stream = forced == "required"
    request = {"model": "tiny", "messages": MESSAGES, "tools": TOOLS, "max_tokens": 160, "temperature": 1.0,
               "seed": 5, "logit_bias": engine.bias(format, True), **FORCED[forced]}
    client = engine.client(format)
    if stream:
        calls: dict[int, list[str]] = {}
        for chunk in client.chat.completions.create(stream=True, **request):
            for choice in chunk.choices:
                for call in choice.delta.tool_calls or []:
                    slot = calls.setdefault(call.index, ["", ""])
                    slot[0] += call.function.name or ""
                    slot[1] += call.function.arguments or ""
        found = [(name, json.loads(arguments)) for _, (name, arguments) in sorted(calls.items())]
    else:
        message = client.chat.completions.create(**request).choices[0].message
        assert not (message.model_extra or {}).get("rejected_tool_calls"), message
        found = _calls(message)
    assert found, f"no accepted call for {forced}"
    for name, arguments in found:
        _check_arguments(name, arguments)
    assert {name for name, _ in found} <= NAMES.get(forced, set(SCHEMAS))
    if forced == "one_call":
        assert len(found) == 1


@pytest.mark.parametrize("format", list(FORMATS))
def test_a_strict_tool_is_enforced_under_auto(engine: Engine, format: str) -> None:
    """tool_choice "auto" with a strict tool: text stays free, and a call the model opens is held to its
    tool's schema (`parallel_tool_calls: false` too, so that the answer ends after the call the bias opens)."""
    tools = [TOOLS[0], {"type": "function", "function": {**TOOLS[1]["function"], "strict": True}}]
    bias = engine.bias(format, False)
    bias.update({str(engine.tokenizer.token_to_id(CALL_OPENERS[format])): 100, str(engine.eos): 50})
    message = engine.client(format).chat.completions.create(
        model="tiny", messages=MESSAGES, tools=tools, tool_choice="auto", parallel_tool_calls=False, max_tokens=160,
        temperature=1.0, seed=5, logit_bias=bias).choices[0].message
    assert not (message.model_extra or {}).get("rejected_tool_calls"), message
    found = _calls(message)
    assert len(found) == 1, message
    _check_arguments(*found[0])


@pytest.mark.parametrize("kind", ["json_object", "json_schema"])
@pytest.mark.parametrize("format", list(FORMATS))
def test_a_json_response_format_is_enforced_by_the_engine(engine: Engine, format: str, kind: str) -> None:
    response_format: dict[str, Any] = {"type": kind}
    if kind == "json_schema":
        response_format["json_schema"] = {"name": "answer", "schema": ANSWER_SCHEMA}
    bias = engine.bias(format, True)
    if kind == "json_object":  # any key and value: a string closed, the object ended, as soon as JSON allows
        bias.update({str(engine.tokenizer.token_to_id(text)): 100 for text in ('"', "}")})
    message = engine.client(format).chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=160, temperature=1.0, seed=5, logit_bias=bias,
        response_format=response_format).choices[0].message
    value = json.loads(message.content or "")
    assert isinstance(value, dict)
    if kind == "json_schema":
        jsonschema.validate(value, ANSWER_SCHEMA)
