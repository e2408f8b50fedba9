"""Loading the per-format PEG grammars from `formats/`, with fast shared terminals.

Grammars are parsimonious rule strings. JSON values are matched by a custom rule that calls the C
JSON decoder (`json_value`, `json_string`, `json_object`), so a 20 KB argument is one node, not
thousands, and its decoded value rides on the node.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from parsimonious.grammar import Grammar
from parsimonious.nodes import Node

_PACKAGE = Path(__file__).resolve().parent
_INCLUDE = re.compile(r"^# include (\w+)\s*$", re.MULTILINE)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


DECODER = json.JSONDecoder(parse_constant=_reject_constant)


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


def grammar_dir() -> Path:
    """Where the grammar files are: inside the installed package, or `formats/` of the source tree."""
    installed = _PACKAGE / "_grammars"
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / "formats"


@cache
def load_grammar(name: str) -> Grammar:
    """The grammar in `formats/<name>.peg`, built once per process.

    A line `# include FRAGMENT` appends the rules of `formats/FRAGMENT.peg` (shared rule text, such
    as the JSON call object, is written once)."""
    text = (grammar_dir() / f"{name}.peg").read_text(encoding="utf-8")
    for fragment in _INCLUDE.findall(text):
        text += "\n" + (grammar_dir() / f"{fragment}.peg").read_text(encoding="utf-8")
    return Grammar(
        text,
        json_value=_json_rule("json_value", None),
        json_string=_json_rule("json_string", str),
        json_object=_json_rule("json_object", dict),
    )
