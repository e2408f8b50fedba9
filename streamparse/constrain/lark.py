"""The IR as a Lark grammar for llguidance (`llguidance.grammar_from("lark", text)`; vLLM's and
SGLang's llguidance backends, llama.cpp built with llguidance through `%llguidance {}`).

`Lit` is a string, `Special` the token form: `<|...|>` as written for a token whose text llguidance
reads as one token name (in angle brackets, none inside), `<[ID]>` by its id for any other (Mistral's
`[TOOL_CALLS]`, Kimi K3's `<|close|>call<|sep|>`: the ids come from the caller, `token_ids`); the token
must be a special token of the tokenizer the grammar is compiled with;
`Json` a `%json {...}` rule (`one_line`: llguidance's `whitespace_pattern` spaces only), `Regex` a
`/.../` terminal, and `Text` a terminal built with llguidance's regex negation: any text `&` not text holding a stop,
`/(?s:.*)/ & ~/(?s:.*)(stop|...)(?s:.*)/`; `Seq`, `Alt` and `Repeat` are rule expressions.

llguidance's lexer is greedy: a lexeme ends only where it cannot go on, so text followed by a
delimiter that is not a special token (`...[BEGIN FINAL RESPONSE]`, `...<tool_calls>`) would run on
into the delimiter. Such text is written fused with the delimiter that follows it, as one lazy
lexeme (`text_then_N[lazy]: TEXT "delimiter"`: it ends at the first delimiter); what may follow a
text is split by its first literal (`leading`) so that each way on gets its own fused lexeme (up to
the shortest stop that begins the literal, `_text_then`). A `Regex` that declares its stops is text
of this kind too, fused with a literal that begins with one: Functionary's content before `>>>` (it
may not end in `>`: a greedy lexeme of it cannot end before the `>>>` it is followed by), and the
whitespace between calls, where content after the calls may begin as well: a greedy text lexeme
would take `⏎<invoke` past the whitespace's end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ..grammar_ir import (
    EMPTY,
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
    seq,
)
from ..grammar_ir import check_json_depth as _check_json_depth
from .terms import ExpressionWriter, too_deep

_META = set("\\.+*?()|[]{}^$#&-~/")
_ANY = "(?s:.*)"


def rust_escape(text: str) -> str:
    """`text` as a regex matching itself (Rust `regex` syntax, inside a Lark `/.../`)."""
    return "".join("\\" + char if char in _META else _control(char) for char in text)


def _control(char: str) -> str:
    return f"\\x{ord(char):02x}" if ord(char) < 0x20 else char


# llguidance's JSON takes a `\uXXXX` escape of a printable character only with this option (1.8 and
# later; an older llguidance refuses the unknown option, so it is written only when asked for).
_UNICODE_ESCAPES = {"json_allow_general_unicode_escapes": True}
# A `one_line` value's whitespace: spaces only.
_ONE_LINE = {"whitespace_pattern": "[ ]{0,16}"}


class _Writer(ExpressionWriter):
    def __init__(self, token_ids: Mapping[str, int], unicode_escapes: bool) -> None:
        self._token_ids = token_ids
        self._unicode_escapes = unicode_escapes
        self.rules: list[str] = []
        self._named: dict[tuple[str, str], str] = {}
        self._split: dict[Node, str] = {}

    def name(self, kind: str, body: str, lazy: bool = False) -> str:
        """A rule (lower-case kind) or terminal (upper-case kind) with this body, written once."""
        key = (kind, body)
        found = self._named.get(key)
        if found is None:
            found = self._named[key] = f"{kind}_{len(self._named)}"
            self.rules.append(f"{found}{'[lazy]' if lazy else ''}: {body}")
        return found

    def expression(self, node: Node) -> str:
        if isinstance(node, Seq) and len(node.items) == 2 and isinstance(node.items[0], Regex) \
                and isinstance(node.items[1], Text):  # text with a first character of its own: one lexeme
            return self.name("TEXT", f"{self.leaf(node.items[0])} {self.leaf(node.items[1])}")
        if isinstance(node, Seq) and any(_free(item) for item in node.items[:-1]):
            # A rule of its own, so that a text repeated after a delimiter (text, then framing
            # markers each followed by text) refers back to it instead of unfolding for ever.
            found = self._split.get(node)
            if found is None:
                found = self._split[node] = f"texts_{len(self._split)}"
                self.rules.append(f"{found}: {self._split_text(node)}")
            return found
        return super().expression(node)

    def _split_text(self, node: Seq) -> str:
        position = next(i for i, item in enumerate(node.items[:-1]) if _free(item))
        text = node.items[position]
        assert isinstance(text, (Text, Regex))
        head = [self.expression(before) for before in node.items[:position]]
        ways = [self._text_then(text, first, rest) for first, rest in leading(seq(*node.items[position + 1:]))]
        return " ".join([*head, self.choice(" | ".join(dict.fromkeys(ways)))])

    def _text_then(self, text: Text | Regex, first: str | None, rest: Node) -> str:
        """The text, then `first` fused to it as one lazy lexeme (when there is one; for a pattern,
        when `first` begins with one of its stops), then `rest`. A lazy lexeme ends at the first
        delimiter it may end with, so where `first` begins with a stop, the lexeme ends with the
        shortest such stop and the rest of `first` follows: every way on that begins with that stop
        (GigaChat 3's trailing `<|message_sep|>` and its call opener `<|message_sep|>⏎⏎function
        call…`, after content or after whitespace) ends the text at the same place."""
        lexeme = self.leaf(text)
        if first is not None:
            begun = [stop for stop in text.stops if stop and first.startswith(stop)]
            if begun:
                stop = min(begun, key=len)
                first, rest = stop, seq(Lit(first[len(stop):]), rest)
            elif isinstance(text, Regex):
                return f"{lexeme} {self.expression(seq(Lit(first), rest))}"
            lexeme = self.name("text_then", f'{lexeme} {json.dumps(first, ensure_ascii=False)}', lazy=True)
        return f"{lexeme} {self.expression(rest)}" if rest != EMPTY else lexeme

    def choice(self, options: str) -> str:
        return self.name("alt", options)

    def separated(self, separator: Node, item: Node, written: str) -> str:
        # One sequence where the separator is text that ends at a delimiter (whitespace between
        # calls), so that it is fused with the item's first literal.
        if _free(separator.items[0] if isinstance(separator, Seq) else separator):
            return self.expression(seq(separator, item))
        return super().separated(separator, item, written)

    def leaf(self, node: Node) -> str:
        if isinstance(node, Lit):
            return json.dumps(node.text, ensure_ascii=False) if node.text else '""'
        if isinstance(node, Special):
            return _token(node.text, self._token_ids)
        if isinstance(node, Json):
            _check_json_depth(node.schema)
            schema = node.schema
            guidance = {**(_UNICODE_ESCAPES if self._unicode_escapes else {}), **(_ONE_LINE if node.one_line else {})}
            if guidance and schema is not False:  # at the top level (`True`: any value)
                schema = {"x-guidance": guidance, **(schema if isinstance(schema, Mapping) else {})}
            return self.name("json", "%json " + json.dumps(schema, ensure_ascii=False))
        if isinstance(node, Text):
            if not node.stops:
                return self.name("TEXT", f"/{_ANY}/")
            stops = "|".join(rust_escape(stop) for stop in node.stops)
            return self.name("TEXT", f"/{_ANY}/ & ~/{_ANY}({stops}){_ANY}/")
        if isinstance(node, Regex):
            return self.name("PATTERN", "/" + node.pattern.replace("/", "\\/") + "/")
        raise TypeError(f"not a grammar IR node: {node!r}")


def _free(node: Node) -> bool:
    """Whether `node` is text that ends before its stops: a `Text`, or a `Regex` that declares them."""
    return isinstance(node, Text) or (isinstance(node, Regex) and bool(node.stops))


def leading(node: Node) -> list[tuple[str | None, Node]]:
    """The ways `node` can begin: (its first literal text, what follows it), or (None, `node`) where
    it begins with something else, or (None, EMPTY) where it can be empty. Together they match
    exactly what `node` matches."""
    if isinstance(node, Lit):
        return [(node.text, EMPTY)] if node.text else [(None, EMPTY)]
    if isinstance(node, Seq):
        ways: list[tuple[str | None, Node]] = []
        for first, rest in leading(node.items[0]):
            if first is None and rest == EMPTY:
                ways += leading(seq(*node.items[1:]))
            else:
                ways.append((first, seq(rest, *node.items[1:])))
        return ways
    if isinstance(node, Alt):
        return [way for option in node.options for way in leading(option)]
    if isinstance(node, Members):  # (a text followed by a tool's arguments: not written by any layout today)
        return leading(node.expanded())
    if isinstance(node, Repeat) and node.max != 0:
        again = node.item if node.separator is None or node.max == 1 else seq(node.separator, node.item)
        more = Repeat(again, max(node.min - 1, 0), None if node.max is None else node.max - 1)
        ways = leading(seq(node.item, more) if more.max != 0 else node.item)
        return [*ways, (None, EMPTY)] if node.min == 0 else ways
    return [(None, EMPTY)] if isinstance(node, Repeat) else [(None, node)]


# How llguidance's Lark reader lexes a special token by its text (`<[^<>\s]+>` in its lexer): a text
# that is several of these (Kimi K3's `<|close|>call<|sep|>`) would be read as two tokens with a rule
# name between them, so such a token is named by its id.
_TOKEN_FORM = re.compile(r"<[^<>\s]+>")


def _token(text: str, token_ids: Mapping[str, int]) -> str:
    if text in token_ids:
        return f"<[{token_ids[text]}]>"
    if _TOKEN_FORM.fullmatch(text):
        return text
    raise GrammarUnsupported(f"the special token {text!r} has no Lark form without its id: pass "
                             f"token_ids={{{text!r}: ID, ...}} with the ids of the model's tokenizer")


def lark(node: Node, token_ids: Mapping[str, int] | None = None, unicode_escapes: bool = False) -> str:
    """The Lark grammar whose `start` rule is `node` (`unicode_escapes`: JSON strings may hold a
    `\\uXXXX` escape of a printable character, with llguidance 1.8 and later)."""
    writer = _Writer(token_ids or {}, unicode_escapes)
    try:
        start = writer.expression(node)
    except RecursionError:
        raise too_deep("Lark") from None
    return "\n".join([f"start: {start}", *writer.rules]) + "\n"
