"""The IR as a Lark grammar for llguidance (`llguidance.grammar_from("lark", text)`; vLLM's and
SGLang's llguidance backends, llama.cpp built with llguidance through `%llguidance {}`).

`Lit` is a string, `Special` the token form `<|...|>` (the token must be a special token of the
tokenizer the grammar is compiled with), `Json` a `%json {...}` rule, `Regex` a `/.../` terminal,
and `Text` a terminal built with llguidance's regex negation: any text `&` not text holding a stop,
`/(?s:.*)/ & ~/(?s:.*)(stop|...)(?s:.*)/`; `Seq`, `Alt` and `Repeat` are rule expressions.
"""

from __future__ import annotations

import json

from ..grammar_ir import Json, Lit, Node, Regex, Special, Text
from .terms import ExpressionWriter

_META = set("\\.+*?()|[]{}^$#&-~/")
_ANY = "(?s:.*)"


def rust_escape(text: str) -> str:
    """`text` as a regex matching itself (Rust `regex` syntax, inside a Lark `/.../`)."""
    return "".join("\\" + char if char in _META else _control(char) for char in text)


def _control(char: str) -> str:
    return f"\\x{ord(char):02x}" if ord(char) < 0x20 else char


class _Writer(ExpressionWriter):
    def __init__(self) -> None:
        self.rules: list[str] = []
        self._named: dict[tuple[str, str], str] = {}

    def name(self, kind: str, body: str) -> str:
        """A rule (lower-case kind) or terminal (upper-case kind) with this body, written once."""
        key = (kind, body)
        found = self._named.get(key)
        if found is None:
            found = self._named[key] = f"{kind}_{len(self._named)}"
            self.rules.append(f"{found}: {body}")
        return found

    def leaf(self, node: Node) -> str:
        if isinstance(node, Lit):
            return json.dumps(node.text, ensure_ascii=False) if node.text else '""'
        if isinstance(node, Special):
            return node.text if node.text.startswith("<") and node.text.endswith(">") \
                else json.dumps(node.text, ensure_ascii=False)
        if isinstance(node, Json):
            return self.name("json", "%json " + json.dumps(node.schema, ensure_ascii=False))
        if isinstance(node, Text):
            if not node.stops:
                return self.name("TEXT", f"/{_ANY}/")
            stops = "|".join(rust_escape(stop) for stop in node.stops)
            return self.name("TEXT", f"/{_ANY}/ & ~/{_ANY}({stops}){_ANY}/")
        if isinstance(node, Regex):
            return self.name("PATTERN", "/" + node.pattern.replace("/", "\\/") + "/")
        raise TypeError(f"not a grammar IR node: {node!r}")


def lark(node: Node) -> str:
    """The Lark grammar whose `start` rule is `node`."""
    writer = _Writer()
    start = writer.expression(node)
    return "\n".join([f"start: {start}", *writer.rules]) + "\n"
