"""llama-server's own endpoints that scripts call beside the chat API: `POST /apply-template`,
`POST /tokenize` and `POST /detokenize`, in the request and answer shapes llama.cpp's server gives them.

- `/apply-template`: a chat-completions body (`messages`, `tools`, `chat_template_kwargs`, ...) and
  `add_generation_prompt` (default true) -> `{"prompt": "..."}`: with the generation prompt, exactly
  the text the chat path sends for the same request (its rendering, `serve/app.py`).
- `/tokenize`: `{"content", "add_special"?: false, "parse_special"?: true, "with_pieces"?: false}` ->
  `{"tokens": [id, ...]}`, or with `with_pieces` `{"tokens": [{"id", "piece"}, ...]}` where a piece is
  its text, or the list of its bytes when they are not whole UTF-8 (a character cut between tokens).
- `/detokenize`: `{"tokens": [id, ...]}` -> `{"content": "..."}`, special tokens written as text; an id
  outside the vocabulary is a 400.

Both token endpoints need the model's `tokenizer.json` beside `--chat-template`. Errors are OpenAI's
error JSON (`{"error": {"message", "type", "param", "code"}}`), which carries llama-server's own
`code`, `message` and `type` fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..checks import need, optional
from ..tokens import PromptTokenizer
from . import ApiError

__all__ = ["Tokenize", "add_generation_prompt", "detokenize", "detokenize_ids", "tokenize", "tokenize_request"]

NEEDS_TOKENIZER = ("needs the model's tokenizer.json beside --chat-template (a model directory holding it, "
                   "or the file next to the template)")


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def add_generation_prompt(body: dict[str, Any]) -> bool:
    """The `add_generation_prompt` of an `/apply-template` body (default true), taken out of it: the
    rest is a chat request."""
    value = body.pop("add_generation_prompt", None)
    need(value is None or _is_bool(value), "add_generation_prompt", value, "true or false")
    return value is not False


@dataclass(frozen=True)
class Tokenize:
    """A checked `/tokenize` request."""

    content: str
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


def tokenize_request(body: Mapping[str, Any]) -> Tokenize:
    """The `/tokenize` request in `body`; wrong types and a missing `content` are `InvalidRequest`s."""
    content: Any = body.get("content")
    need(isinstance(content, str), "content", content, "the text to tokenize, a string")
    flags = {key: optional(body, key, _is_bool, "true or false")
             for key in ("add_special", "parse_special", "with_pieces")}
    return Tokenize(content, **{key: value for key, value in flags.items() if value is not None})


def detokenize_ids(body: Mapping[str, Any]) -> list[int]:
    """The token ids of a `/detokenize` request."""
    ids: Any = body.get("tokens")
    need(isinstance(ids, list), "tokens", ids, "a list of token ids (integers)")
    for i, token_id in enumerate(ids):
        need(_is_id(token_id), f"tokens[{i}]", token_id, "a token id (an integer)")
    return list(ids)


def tokenize(tokenizer: PromptTokenizer, asked: Tokenize) -> dict[str, Any]:
    """`{"tokens": ...}` for `asked`: the model's own encoding (its post-processor's BOS with
    `add_special`); without `parse_special` an added token's text is encoded as ordinary text."""
    if asked.parse_special:
        ids = list(tokenizer.tokenizer.encode(asked.content, add_special_tokens=asked.add_special).ids)
    else:
        plain = tokenizer.encode_plain(asked.content)
        ids = (_bos(tokenizer) if asked.add_special else []) + plain
    if not asked.with_pieces:
        return {"tokens": ids}
    piece = _pieces(tokenizer)
    return {"tokens": [{"id": token_id, "piece": piece(token_id)} for token_id in ids]}


def _bos(tokenizer: PromptTokenizer) -> list[int]:
    """The ids the tokenizer's post-processor puts before a text (its BOS), found by encoding nothing."""
    return list(tokenizer.tokenizer.encode("", add_special_tokens=True).ids)


def detokenize(tokenizer: PromptTokenizer, ids: list[int]) -> dict[str, Any]:
    """`{"content": ...}`: the ids' text, special tokens written out; an id outside the vocabulary is an
    `ApiError` naming it."""
    for i, token_id in enumerate(ids):
        if not 0 <= token_id < tokenizer.vocab_size or tokenizer.tokenizer.id_to_token(token_id) is None:
            raise ApiError(f"token id {token_id} is outside the model's vocabulary (ids 0 to "
                           f"{tokenizer.vocab_size - 1})", f"tokens[{i}]")
    return {"content": tokenizer.decode(ids)}


_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character standing for each byte, back to the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(char): byte for byte, char in zip(printable, chars, strict=True)}


_ALPHABET = _byte_level_alphabet()


@lru_cache(maxsize=8)
def _pieces(tokenizer: PromptTokenizer) -> Callable[[int], str | list[int]]:
    """Each id's piece as llama-server gives it: its text, or its bytes when they are not whole UTF-8.
    A byte-level vocabulary's token spells its bytes in GPT-2's alphabet; a SentencePiece one writes a
    byte as `<0xNN>` and a space as `▁`; an added token is its own text."""
    byte_level = "ByteLevel" in repr(tokenizer.tokenizer.decoder)

    def raw(token_id: int) -> bytes:
        token = tokenizer.tokenizer.id_to_token(token_id)
        if token is None or token_id in tokenizer.added_ids:
            return tokenizer.decode([token_id]).encode()
        if byte_level and all(char in _ALPHABET for char in token):
            return bytes(_ALPHABET[char] for char in token)
        byte = _BYTE_TOKEN.fullmatch(token)
        if byte is not None:
            return bytes([int(byte.group(1), 16)])
        return token.replace("▁", " ").encode()

    def piece(token_id: int) -> str | list[int]:
        data = raw(token_id)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return list(data)

    return piece
