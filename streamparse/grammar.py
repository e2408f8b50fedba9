"""Loading the per-format PEG grammars from `formats/`, with fast shared terminals.

Grammars are parsimonious rule strings. JSON values are matched by a custom rule that reads them
strictly at native speed (`strict_value`: jiter; `json_value`, `json_string`, `json_object`), so a
20 KB argument is one node, not thousands, and its decoded value rides on the node.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any

import regex  # type: ignore[import-untyped]
from parsimonious.expressions import Expression, Literal, Lookahead, OneOf, Quantifier, Regex, Sequence
from parsimonious.grammar import Grammar
from parsimonious.nodes import Node

from .python_literals import json_value_end, read_argument, value_end
from .strict_json import (  # re-exported: the strict reader lived here
    DECODER,
    LENIENT_DECODER,
    NotStrictJSON,
    StrictDecoder,
    encodable,
    json_text,
    strict_loads,
    strict_value,
)

__all__ = ["DECODER", "LENIENT_DECODER", "NotStrictJSON", "StrictDecoder", "ValueNode", "encodable", "grammar_dir",
           "json_text", "load_grammar", "rule_regex", "strict_loads", "strict_value"]

_PACKAGE = Path(__file__).resolve().parent
_INCLUDE = re.compile(r"^# include (\w+)\s*$", re.MULTILINE)


class ValueNode(Node):  # type: ignore[misc]
    """A parse node that carries the JSON value it matched."""

    __slots__ = ["value"]

    def __init__(self, expr: Any, full_text: str, start: int, end: int, value: Any) -> None:
        super().__init__(expr, full_text, start, end)
        self.value = value


def _json_rule(rule: str, kind: type | None) -> Any:
    def match(text: str, pos: int, cache: Any, error: Any, grammar: Any) -> Node | None:
        try:
            value, end = DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):  # nesting deeper than the decoder can follow is not a call
            return None
        if kind is not None and not isinstance(value, kind):
            return None
        return ValueNode(grammar[rule], text, pos, end, value)

    return match


def _python_value(text: str, pos: int, cache: Any, error: Any, grammar: Any) -> Node | None:
    """`py_value`: the text of one Python expression (read by `python_literals.literal`); a
    `ValueNode` of its value and `json_text` where it was read on the way (`read_argument`)."""
    return _py_value(text, pos, cache, grammar, False)


def _raw_python_value(text: str, pos: int, cache: Any, error: Any, grammar: Any) -> Node | None:
    """`py_value` where single-quoted strings are raw (`load_grammar(name, raw_single_quotes=True)`)."""
    return _py_value(text, pos, cache, grammar, True)


def _py_value(text: str, pos: int, cache: Any, grammar: Any, raw_single_quotes: bool) -> Node | None:
    """A `ValueNode` of the value and its `json_text` where it was read as JSON; of None where JSON
    reads it to its end (`json_value_end`) but it was not read; else a `Node` of its text."""
    read = read_argument(text, pos, cache["read_argument"])
    if read is not None:
        return ValueNode(grammar["py_value"], text, pos, read[0], read[1:])
    end = json_value_end(text, pos)
    if end is not None:
        return ValueNode(grammar["py_value"], text, pos, end, None)
    end = value_end(text, pos, raw_single_quotes, looked_through=True)
    return None if end is None else Node(grammar["py_value"], text, pos, end)


def grammar_dir() -> Path:
    """Where the grammar files are: inside the installed package, or `formats/` of the source tree."""
    installed = _PACKAGE / "_grammars"
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / "formats"


# Grammars given as text at run time (`define_grammar`), by the name they were given.
_DEFINED: dict[str, str] = {}


def define_grammar(text: str) -> str:
    """A grammar made at run time (a derived format's, `streamparse.derive`), in `formats/*.peg` syntax
    (`# include FRAGMENT` lines too): the name `load_grammar` and the body kinds know it by, the same
    for the same text (so a format derived twice shares its parsers)."""
    name = "defined-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    _DEFINED.setdefault(name, text)
    return name


@cache
def load_grammar(name: str, raw_single_quotes: bool = False) -> Grammar:
    """The grammar in `formats/<name>.peg` (or one given as text, `define_grammar`), built once per process.

    A line `# include FRAGMENT` appends the rules of `formats/FRAGMENT.peg` (shared rule text, such
    as the JSON call object, is written once). With `raw_single_quotes`, the `py_value` terminal
    reads single-quoted strings raw (`python_literals`: they end at the next `'`).

    A name `FILE:SUFFIX` is the grammar of `FILE.peg` for markers spelled with the suffix `:SUFFIX`
    (`spec.MarkerSuffix`): its placeholders `{SUF}` (in string literals) and `{SUF_RE}` (in regular
    expressions) are filled with it; a plain name fills them with nothing."""
    defined = _DEFINED.get(name)
    name, colon, suffix = ("", "", "") if defined is not None else name.partition(":")
    suffix = colon + suffix
    text = defined if defined is not None else (grammar_dir() / f"{name}.peg").read_text(encoding="utf-8")
    for fragment in _INCLUDE.findall(text):
        text += "\n" + (grammar_dir() / f"{fragment}.peg").read_text(encoding="utf-8")
    text = text.replace("{SUF_RE}", regex.escape(suffix)).replace("{SUF}", suffix.replace("\\", "\\\\"))
    return Grammar(
        text,
        json_value=_json_rule("json_value", None),
        json_string=_json_rule("json_string", str),
        json_object=_json_rule("json_object", dict),
        py_value=_raw_python_value if raw_single_quotes else _python_value,
    )


# ----------------------------------------------------------------- a rule as one regular expression

_DEFAULT_FLAGS = regex.compile("").flags


def _as_regex(expression: Expression, captures: frozenset[str], seen: set[str]) -> str | None:
    """`expression` written as a `regex` pattern that matches exactly what parsimonious matches at a
    position, or None when it holds a custom rule (a JSON terminal) or a terminal that cannot be
    embedded. A PEG never backtracks into what it matched: every part is an atomic group; ordered
    choice is an alternation inside one. Rules named in `captures` become named groups (once each)."""
    if isinstance(expression, Literal):
        pattern: str = regex.escape(expression.literal)
    elif isinstance(expression, Regex):
        if expression.re.flags != _DEFAULT_FLAGS or expression.re.groups:
            return None
        pattern = f"(?>{expression.re.pattern})"
    elif isinstance(expression, Lookahead):
        inner = _as_regex(expression.members[0], captures, seen)
        if inner is None:
            return None
        pattern = f"(?!{inner})" if expression.negativity else f"(?={inner})"
    elif isinstance(expression, Quantifier):
        inner = _as_regex(expression.members[0], captures, seen)
        if inner is None:
            return None
        most = "" if expression.max == float("inf") else str(expression.max)
        # parsimonious tries no repetition at the end of the text (even one that could match empty)
        pattern = f"(?>(?:(?!\\Z){inner}){{{expression.min},{most}}})"
    elif isinstance(expression, (Sequence, OneOf)):
        parts = [_as_regex(member, captures, seen) for member in expression.members]
        if any(part is None for part in parts):
            return None
        joined = ("|" if isinstance(expression, OneOf) else "").join(parts)  # type: ignore[arg-type]
        pattern = f"(?>{joined})"
    else:
        return None
    if expression.name in captures:
        if expression.name in seen:  # a rule captured twice: not one group
            return None
        seen.add(expression.name)
        pattern = f"(?P<{expression.name}>{pattern})"
    return pattern


@cache
def rule_regex(grammar: str, rules: tuple[str, ...], captures: frozenset[str]) -> Any | None:
    """The rules `rules` of `formats/<grammar>.peg`, one after the other, as one compiled `regex`
    that matches exactly what parsimonious matches for them in turn (its groups: the rules named in
    `captures`), or None when they cannot be written as one (a custom terminal, a rule captured
    twice). For the short parts of a body around its JSON value: one match instead of a parse
    node and a visit per rule."""
    compiled = load_grammar(grammar)
    seen: set[str] = set()
    parts = [_as_regex(compiled[rule], captures, seen) for rule in rules]
    if any(part is None for part in parts):
        return None
    return regex.compile("".join(parts))  # type: ignore[arg-type]
