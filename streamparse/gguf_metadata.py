"""A GGUF model file's chat template, special tokens and tokenizer, read from its metadata.

llama.cpp's users hold a model as one GGUF file: its key/value header carries the chat template
(`tokenizer.chat_template`, named ones as `tokenizer.chat_template.NAME`), the vocabulary
(`tokenizer.ggml.tokens`, `token_type`, `merges`), the pre-tokenizer's name (`tokenizer.ggml.pre`)
and the special token ids (`tokenizer.ggml.bos_token_id`, ...). This module reads that header and
nothing else (never the tensors), with the standard library only.

A file is untrusted input, so the reading is bounded before anything is held: at most `MAX_KEYS`
keys, `MAX_ARRAY` entries in an array, `MAX_STRING` bytes in a string, `MAX_METADATA` bytes kept in
all; a file that is not GGUF, is cut short or breaks a bound is a `GGUFError` naming the file and
what to do. Values of keys nobody asked for are skipped, not kept. (The `gguf` package's reader
builds numpy views per array entry: on a 129k-token vocabulary that took 50 s here, and a small
hostile file can ask it for millions of them.)

`tokenizer_json` turns the vocabulary into a Hugging Face `tokenizer.json` (for `tokenizers`):
byte-level BPE (`tokenizer.ggml.model` "gpt2") with the pre-tokenizers in `PRE_TOKENIZERS`;
any other model is a `GGUFError` saying so.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, BinaryIO

__all__ = ["MAX_ARRAY", "MAX_KEYS", "MAX_METADATA", "MAX_STRING", "PRE_TOKENIZERS", "GGUFError", "chat_templates",
           "is_gguf", "read_metadata", "special_tokens", "tokenizer_json", "tokenizer_problem"]

MAGIC = b"GGUF"
MAX_KEYS = 1 << 16          # keys in the header (real models: a few dozen)
MAX_ARRAY = 1 << 22         # entries in one array (a vocabulary: up to ~262k tokens, ~500k merges)
MAX_STRING = 1 << 24        # bytes in one string (a chat template: tens of kB)
MAX_METADATA = 1 << 28      # bytes of kept values in all
_ENTRY_COST = 64            # bytes counted per kept array entry (a Python object), beside its text
_NESTING = 2                # an array of arrays, no deeper

# GGUF value types (the spec's gguf_type) -> struct format of one scalar.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# llama.cpp's token types (llama_token_type): the added tokens are the control and user-defined ones.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# The keys this module reads; every other key's value is skipped.
_TEMPLATE = "tokenizer.chat_template"
_WANTED_PREFIXES = (_TEMPLATE, "tokenizer.ggml.", "general.name", "general.architecture")
# The template variables HF gives from the tokenizer -> the GGUF key holding that token's id.
_SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unknown_token_id",
                "pad_token": "padding_token_id", "sep_token": "seperator_token_id",  # sic: the GGUF key's spelling
                "cls_token": "cls_token_id", "mask_token": "mask_token_id"}

# llama.cpp's `tokenizer.ggml.pre` names (llama-vocab.cpp) -> the pre-tokenizer regexes of the models'
# own tokenizer.json (llama.cpp runs adapted spellings of the same), and whether BPE first looks a
# whole piece up in the vocabulary (`ignore_merges`, as llama.cpp does for Llama 3).
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
           r"\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
           r"\s*[\r\n]+|\s+(?!\S)|\s+")
_DEEPSEEK3 = (r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
              r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS: Mapping[str, tuple[tuple[str, ...], bool]] = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "lfm2"), ((_LLAMA3,), True)),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), ((_QWEN2,), False)),
    "qwen35": ((_QWEN35,), False),
    "deepseek-v3": (_DEEPSEEK3, False),
}


class GGUFError(ValueError):
    """A GGUF file that cannot be read, or holds nothing usable: the message names the file and what to do."""


def is_gguf(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a file that starts with GGUF's magic bytes."""
    try:
        with open(path, "rb") as file:
            return file.read(4) == MAGIC
    except OSError:
        return False


class _Reader:
    """The header of one GGUF file, read with every length checked against the bounds and the file."""

    def __init__(self, file: BinaryIO, path: str, size: int) -> None:
        self.file, self.path, self.size = file, path, size
        self.kept = 0

    def error(self, what: str) -> GGUFError:
        return GGUFError(f"{self.path}: {what}")

    def truncated(self) -> GGUFError:
        return self.error("the file ends inside its metadata; it is truncated: download or convert the model again")

    def read(self, count: int) -> bytes:
        data = self.file.read(count)
        if len(data) < count:
            raise self.truncated()
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def length(self, what: str, bound: int) -> int:
        count = int(self.scalar("<Q"))
        if count > bound:
            raise self.error(f"{what} of {count} claimed, more than the {bound} streamparse reads; this is not a "
                             "model's metadata (a damaged or hostile file)")
        return count

    def string(self, keep: bool = True) -> str:
        count = self.length("a string of bytes", MAX_STRING)
        if not keep:
            self.skip(count)
            return ""
        self.kept += count
        if self.kept > MAX_METADATA:
            raise self.error(f"more than {MAX_METADATA} bytes of metadata; this is not a model's metadata")
        try:
            return self.read(count).decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"a string at byte {self.file.tell() - count} is not UTF-8") from None

    def skip(self, count: int) -> None:
        if self.file.tell() + count > self.size:
            raise self.truncated()
        self.file.seek(count, os.SEEK_CUR)

    def value(self, kind: int, keep: bool, depth: int = 0) -> Any:
        if kind in _SCALARS:
            fmt = _SCALARS[kind]
            if not keep:
                self.skip(struct.calcsize(fmt))
                return None
            return self.scalar(fmt)
        if kind == _STRING:
            return self.string(keep)
        if kind == _ARRAY:
            if depth >= _NESTING:
                raise self.error("arrays nested deeper than GGUF models use")
            item = int(self.scalar("<I"))
            count = self.length("an array of entries", MAX_ARRAY)
            if item in _SCALARS and not keep:
                self.skip(count * struct.calcsize(_SCALARS[item]))
                return None
            if item in _SCALARS:
                fmt = _SCALARS[item]
                width = struct.calcsize(fmt)
                self.kept += count * width
                if self.kept > MAX_METADATA:
                    raise self.error(f"more than {MAX_METADATA} bytes of metadata; this is not a model's metadata")
                data = self.read(count * width)
                return [value for (value,) in struct.iter_unpack(fmt, data)]
            if not keep:
                for _ in range(count):
                    self.value(item, False, depth + 1)
                return None
            self.kept += count * _ENTRY_COST
            if self.kept > MAX_METADATA:
                raise self.error(f"more than {MAX_METADATA} bytes of metadata; this is not a model's metadata")
            return [self.value(item, True, depth + 1) for _ in range(count)]
        raise self.error(f"a value of unknown type {kind}; is this a GGUF file of a newer version? Update streamparse")


def read_metadata(path: str | os.PathLike[str],
                  wanted: Callable[[str], bool] = lambda key: key.startswith(_WANTED_PREFIXES)) -> dict[str, Any]:
    """The values of the keys `wanted` accepts in the GGUF file at `path` (by default: the general name
    and architecture, the chat templates and the `tokenizer.ggml.*` keys). `GGUFError` for a file that
    is not GGUF, is truncated or breaks a bound; `OSError` when it cannot be opened."""
    name = os.fspath(path)
    with open(name, "rb") as file:
        reader = _Reader(file, name, os.fstat(file.fileno()).st_size)
        magic = file.read(4)
        if magic != MAGIC:
            raise reader.error("not a GGUF file (it does not start with 'GGUF'); give a .gguf model file, a "
                               ".jinja template, a tokenizer_config.json or a model directory")
        version = int(reader.scalar("<I"))
        if version not in (2, 3):
            raise reader.error(f"GGUF version {version} (a big-endian file, or one newer than 3): streamparse reads "
                               "little-endian GGUF versions 2 and 3; convert the model again with current llama.cpp")
        reader.scalar("<Q")  # tensors: never read
        keys = reader.length("a count of keys", MAX_KEYS)
        values: dict[str, Any] = {}
        for _ in range(keys):
            key = reader.string()
            kind = int(reader.scalar("<I"))
            keep = wanted(key)
            value = reader.value(kind, keep)
            if keep:
                values[key] = value
        return values


@lru_cache(maxsize=4)
def _metadata(path: str, stamp: tuple[int, int]) -> dict[str, Any]:
    return read_metadata(path)


def metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """`read_metadata(path)`, kept for the few files last read (the same file unchanged is read once)."""
    stat = os.stat(path)
    return _metadata(os.fspath(path), (stat.st_mtime_ns, stat.st_size))


def chat_templates(path: str | os.PathLike[str]) -> str | tuple[tuple[str, str], ...]:
    """The file's chat template; with named ones (`tokenizer.chat_template.tool_use`, ...) too, HF's list
    of `(name, template)` with the unnamed one as "default" (so `tool_use` renders requests with tools,
    as transformers picks it). `GGUFError` when the file holds none."""
    values = metadata(path)
    named = tuple((key.removeprefix(_TEMPLATE + "."), value) for key, value in values.items()
                  if key.startswith(_TEMPLATE + ".") and isinstance(value, str))
    default = values.get(_TEMPLATE)
    if not isinstance(default, str) and not named:
        raise GGUFError(f"{os.fspath(path)} holds no chat template (no '{_TEMPLATE}' in its metadata); give the "
                        "model's template with --chat-template model.jinja (and --special-token NAME=TEXT)")
    if not named:
        assert isinstance(default, str)
        return default
    return ((("default", default),) if isinstance(default, str) else ()) + named


def _vocabulary(path: str | os.PathLike[str]) -> tuple[list[str], list[int]]:
    values = metadata(path)
    tokens, types = values.get("tokenizer.ggml.tokens"), values.get("tokenizer.ggml.token_type")
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        raise GGUFError(f"{os.fspath(path)} has no vocabulary ('tokenizer.ggml.tokens'); give the model directory "
                        "holding tokenizer.json instead")
    if not isinstance(types, list) or len(types) != len(tokens):
        types = [NORMAL] * len(tokens)
    return tokens, [int(kind) for kind in types]


def special_tokens(path: str | os.PathLike[str]) -> dict[str, str]:
    """The special tokens the template is rendered with (`bos_token`, `eos_token`, ...), from the ids in
    the file's metadata; a byte-level token's text decoded."""
    values = metadata(path)
    if not isinstance(values.get("tokenizer.ggml.tokens"), list):
        return {}
    tokens, types = _vocabulary(path)
    byte_level = values.get("tokenizer.ggml.model") == "gpt2"
    out = {}
    for name, key in _SPECIAL_IDS.items():
        index = values.get("tokenizer.ggml." + key)
        if isinstance(index, int) and 0 <= index < len(tokens):
            text = tokens[index]
            out[name] = _from_byte_level(text) if byte_level and types[index] in (NORMAL, BYTE) else text
    return out


def _byte_map() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character standing for each byte."""
    shown = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in shown:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def _from_byte_level(text: str) -> str:
    chars = _byte_map()
    if not all(char in chars for char in text):
        return text
    return bytes(chars[char] for char in text).decode("utf-8", "replace")


def tokenizer_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `tokenizer_json` cannot build the file's tokenizer (its message), None when it can."""
    try:
        tokenizer_json(path)
    except GGUFError as error:
        return str(error)
    return None


@lru_cache(maxsize=4)
def _tokenizer_json(path: str, stamp: tuple[int, int]) -> str:
    return _build_tokenizer_json(path)


def tokenizer_json(path: str | os.PathLike[str]) -> str:
    """The GGUF file's tokenizer as Hugging Face `tokenizer.json` text (see `_build_tokenizer_json`)."""
    stat = os.stat(path)
    return _tokenizer_json(os.fspath(path), (stat.st_mtime_ns, stat.st_size))


def _build_tokenizer_json(path: str) -> str:
    """The GGUF file's tokenizer as Hugging Face `tokenizer.json` text: byte-level BPE with its vocabulary,
    merges and pre-tokenizer; the control tokens as special added tokens, the user-defined ones as
    non-special added tokens (what llama.cpp matches in text before BPE). `GGUFError` for a tokenizer
    model or pre-tokenizer this cannot build, saying what to give instead."""
    name = os.fspath(path)
    values = metadata(path)
    model = values.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise GGUFError(f"{name}: its tokenizer is {model!r}; streamparse builds only byte-level BPE ('gpt2') "
                        "tokenizers from a GGUF file; give the model directory holding tokenizer.json (or pass "
                        "--text-prompt)")
    pre = values.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise GGUFError(f"{name}: its pre-tokenizer {pre!r} is not one streamparse builds "
                        f"({', '.join(PRE_TOKENIZERS)}); give the model directory holding tokenizer.json "
                        "(or pass --text-prompt)")
    regexes, ignore_merges = PRE_TOKENIZERS[pre]
    tokens, types = _vocabulary(path)
    merges = values.get("tokenizer.ggml.merges")
    if not isinstance(merges, list) or not all(isinstance(merge, str) and merge.count(" ") == 1 for merge in merges):
        raise GGUFError(f"{name}: its BPE merges ('tokenizer.ggml.merges') are missing or not 'left right' pairs")
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    added = [{"id": index, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": kind != USER_DEFINED}
             for index, (token, kind) in enumerate(zip(tokens, types, strict=True))
             if kind in (CONTROL, USER_DEFINED, UNKNOWN) and token]
    splits = [{"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
              for regex in regexes]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [*splits, byte_level]},
        "post_processor": None, "decoder": {**byte_level, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges},
    }, ensure_ascii=False)
