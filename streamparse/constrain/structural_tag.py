"""The IR as an xgrammar structural tag (`{"type": "structural_tag", "format": {...}}`), what vLLM
and SGLang take as a structured-output constraint and `xgrammar.Grammar.from_structural_tag` compiles.

Each node has a direct counterpart: `Lit` and `Special` a `const_string` (xgrammar matches a special
token by its text), `Json` a `json_schema`, `Text` an `any_text` with `excludes`, `Regex` a `regex`,
`Seq` a `sequence`, `Alt` an `or`, and `Repeat` a `repeat` (a separator becomes `item (sep item)*`).
A structural tag is a tree, with no way to refer to a part written once, so `Members` is written
as its `expanded()` form, O(n log n) in the members, while they are few (`EXPANDED_MEMBERS`); past
that, as a `grammar` format holding the members' GBNF (xgrammar reads GBNF as its EBNF), O(n) where
1,000 optional arguments expanded are 9 MB of JSON; or expanded after all where a member's schema is
outside what GBNF writes. A `one_line` `Json` is a `grammar` format too, its GBNF (`json_gbnf`, spaces
its only whitespace): xgrammar's `json_schema` has no way to leave line breaks out of its whitespace.
"""

from __future__ import annotations

from typing import Any

from ..grammar_ir import (
    Alt,
    GrammarUnsupported,
    Json,
    Lit,
    Members,
    Node,
    Regex,
    Repeat,
    Seq,
    Special,
    Text,
    check_json_depth,
)
from .gbnf import gbnf
from .terms import too_deep

EXPANDED_MEMBERS = 32


def structural_tag(node: Node) -> dict[str, Any]:
    """The whole structural tag whose format is `node`."""
    try:
        return {"type": "structural_tag", "format": format_of(node)}
    except RecursionError:
        raise too_deep("a structural tag") from None


def format_of(node: Node) -> dict[str, Any]:
    """One IR node as a structural-tag format."""
    if isinstance(node, (Lit, Special)):
        return {"type": "const_string", "value": node.text}
    if isinstance(node, Json):
        check_json_depth(node.schema)
        if node.one_line:  # (xgrammar's `json_schema` takes no whitespace of its own)
            return {"type": "grammar", "grammar": gbnf(node)}
        return {"type": "json_schema", "json_schema": node.schema}
    if isinstance(node, Text):
        return {"type": "any_text", "excludes": list(node.stops)}
    if isinstance(node, Regex):
        return {"type": "regex", "pattern": node.pattern}
    if isinstance(node, Seq):
        return {"type": "sequence", "elements": [format_of(item) for item in node.items]}
    if isinstance(node, Alt):
        return {"type": "or", "elements": [format_of(option) for option in node.options]}
    if isinstance(node, Members):
        if len(node.members) > EXPANDED_MEMBERS:
            try:
                return {"type": "grammar", "grammar": gbnf(node)}
            except GrammarUnsupported:
                pass
        return format_of(node.expanded())
    return _repeat(node)


def _repeat(node: Repeat) -> dict[str, Any]:
    most = -1 if node.max is None else node.max
    if node.separator is None:
        return {"type": "repeat", "min": node.min, "max": most, "content": format_of(node.item)}
    item = format_of(node.item)
    later = {"type": "sequence", "elements": [format_of(node.separator), item]}
    rest = {"type": "repeat", "min": max(node.min - 1, 0), "max": -1 if node.max is None else node.max - 1,
            "content": later}
    some = {"type": "sequence", "elements": [item, rest]}
    return some if node.min > 0 else {"type": "optional", "content": some}
