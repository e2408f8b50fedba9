"""Body kind `object_literal`: `call:NAME{key:value,…}`, an object literal with bare keys and a
quote token (Gemma 4), declared by its grammar (`formats/<name>.peg`, rule names as below).

The envelope ends at its closer written outside a string (strings run between two `quote` tokens
and hold any text), or at a `stop` (a next call's opener: the call was not closed, `invalid_json`).
The grammar reads the body once; its visitor turns the rules into values: `string` (raw text),
`number` (an int, or a float with `.` or an exponent), `word` (`true`, `false`, `null`/`None`),
`object` (a repeated key keeps its last value), `array`. The values are written, not retyped by
the schema. In progressive mode a call starts (id and name) when its header is read; its arguments
are sent whole when it closes: a repeated key keeps its last value (Decision 3), so a later member
may change any text already sent (as for glm45's `repeated_key_last_wins`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex  # type: ignore[import-untyped]
from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node, NodeVisitor

from ..grammar import load_grammar
from ..scanning import ScanResult, WalkSource, delimiters_of
from ..spec import CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent, empty_body
from ..strict_json import json_text
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet

_WORDS = {"true": True, "false": False, "null": None, "None": None}


@dataclass(frozen=True)
class ObjectLiteral:
    """The `object_literal` body kind, declared with one format's grammar and tokens."""

    grammar: str  # formats/<grammar>.peg
    quote: str  # the string quote token, the same at both ends (`<|"|>`)
    closer: str  # the envelope's closer (`<tool_call|>`)
    stops: tuple[str, ...] = ()  # end an unclosed call outside a string (the next call's opener)
    call_tag: str = "the call"  # how the call is named in error messages

    def scanner(self) -> QuoteAwareScanner:
        return QuoteAwareScanner(self.closer, self.stops, self.quote)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> HeaderStreamer:
        return HeaderStreamer(self.grammar)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        empty = empty_body(envelope, self.call_tag, f"{self.call_tag} is empty")
        if empty is not None:
            return empty
        if not envelope.complete:
            return [Rejection(TRUNCATED, [f"the output ended inside {self.call_tag} before {self.closer}"])]
        if not envelope.closer:
            return [Rejection(INVALID_JSON, [f"{self.call_tag} is not closed by {self.closer}"])]
        body = envelope.body
        try:
            read = _reader(self.grammar).call(body)
            name, arguments = read if read is not None else _VISITOR.visit(load_grammar(self.grammar).parse(body))
        except ParseError as error:
            pos = error.pos
            return [Rejection(INVALID_JSON, [f"unexpected text at character {pos}: {body[pos:pos + 30]!r}"])]
        if not name:
            return [Rejection(INVALID_JSON, [f"{self.call_tag} has no function name"])]
        return [ParsedCall(name, arguments, json_text(arguments))]


class QuoteAwareScanner:
    """Ends a body at its closer outside a string, or before a stop outside a string; a string runs
    from one quote token to the next."""

    def __init__(self, closer: str, stops: tuple[str, ...], quote: str) -> None:
        self._closer, self._quote = closer, quote
        self._delimiters = delimiters_of((closer, *stops, quote))
        self._in_string = False

    def scan(self, text: str, pos: int) -> ScanResult:
        while True:
            match = self._delimiters.search(text, pos)
            if match is None:
                return ScanResult(max(self._delimiters.held_from(text), pos))
            found = match.group()
            if found == self._quote:
                self._in_string = not self._in_string
            elif not self._in_string:
                return ScanResult(match.start(), match.end() if found == self._closer else match.start())
            pos = match.end()


class HeaderStreamer:
    """Progressive mode: the call starts once its header (up to the object's `{`) is read."""

    def __init__(self, grammar: str) -> None:
        self._header = load_grammar(grammar)["header"].re
        self._head: list[str] = []
        self._done = False

    def feed(self, body: str) -> list[StreamEvent]:
        if self._done:
            return []
        brace = body.find("{")
        if brace < 0:
            self._head.append(body)
            return []
        self._done = True
        header = "".join(self._head) + body[:brace]
        match = self._header.fullmatch(header)
        name = match.group("name").strip() if match is not None else ""
        return [CallStart(0, name)] if name else []


class _Fail(Exception):
    """The body does not read as the grammar's `call` here (the grammar then says why)."""


class _Reader:
    """What `_VISITOR` makes of the grammar's tree, read with the grammar's own terminals and no
    tree (a PEG reads deterministically: the same matches, the same result). Cost: one regex match
    per terminal, instead of a parse node and a visit per rule (a 70K-character string is one match)."""

    def __init__(self, grammar: str) -> None:
        rules = load_grammar(grammar)
        self.header, self.ws, self.bare_key, self.text, self.number, self.word = (
            _as_re(rules[name].re) for name in ("header", "ws", "bare_key", "text", "number", "word"))
        self.quote: str = rules["quote"].literal

    def call(self, body: str) -> tuple[str, dict[str, Any]] | None:
        head = self.header.match(body)
        if head is None or not body.startswith("{", head.end()):
            return None
        try:
            arguments, pos = self._object(body, head.end())
        except _Fail:
            return None
        return (head.group("name").strip(), arguments) if self.ws.match(body, pos).end() == len(body) else None

    def _skip(self, body: str, pos: int) -> int:
        return int(self.ws.match(body, pos).end())

    def _string(self, body: str, pos: int) -> tuple[str, int]:
        start = pos + len(self.quote)
        end = self.text.match(body, start).end()
        if not body.startswith(self.quote, end):
            raise _Fail
        return body[start:end], end + len(self.quote)

    def _object(self, body: str, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        pos = self._skip(body, pos + 1)
        while not body.startswith("}", pos):
            if body.startswith(self.quote, pos):
                key, pos = self._string(body, pos)
            else:
                bare = self.bare_key.match(body, pos)
                if bare is None:
                    raise _Fail
                key, pos = bare.group().strip(), bare.end()
            pos = self._skip(body, pos)
            if not body.startswith(":", pos):
                raise _Fail
            out[key], pos = self._value(body, self._skip(body, pos + 1))
            pos = self._separator(body, self._skip(body, pos), "}")
        return out, pos + 1

    def _array(self, body: str, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos = self._skip(body, pos + 1)
        while not body.startswith("]", pos):
            value, pos = self._value(body, pos)
            out.append(value)
            pos = self._separator(body, self._skip(body, pos), "]")
        return out, pos + 1

    def _separator(self, body: str, pos: int, closer: str) -> int:
        """After a member: `,` and whitespace (a trailing one before `closer` is tolerated), or `closer`."""
        if body.startswith(",", pos):
            return self._skip(body, pos + 1)
        if not body.startswith(closer, pos):
            raise _Fail
        return pos

    def _value(self, body: str, pos: int) -> tuple[Any, int]:
        if body.startswith(self.quote, pos):
            return self._string(body, pos)
        if body.startswith("{", pos):
            return self._object(body, pos)
        if body.startswith("[", pos):
            return self._array(body, pos)
        number = self.number.match(body, pos)
        if number is not None:
            text = number.group()
            return (float(text) if "." in text or "e" in text or "E" in text else int(text)), number.end()
        word = self.word.match(body, pos)
        if word is None:
            raise _Fail
        return _WORDS[word.group()], word.end()


@cache
def _reader(grammar: str) -> _Reader:
    return _Reader(grammar)


def _as_re(pattern: Any) -> Any:
    """`pattern` compiled by `re` when `re` reads it (its fixed cost per match is a quarter of the
    `regex` module's, and a body is read with several matches per value); else `pattern`."""
    if pattern.flags != regex.compile("").flags:
        return pattern
    try:
        return re.compile(pattern.pattern)
    except re.error:
        return pattern


class _Visitor(NodeVisitor):  # type: ignore[misc]
    """The grammar's tree as (name, arguments)."""

    def visit_call(self, node: Node, children: list[Any]) -> tuple[str, dict[str, Any]]:
        return children[0], children[1]

    def visit_header(self, node: Node, children: list[Any]) -> str:
        return str(node.match.group("name")).strip()

    def visit_object(self, node: Node, children: list[Any]) -> dict[str, Any]:
        members = children[2]
        return dict(members[0]) if isinstance(members, list) and members else {}

    def visit_members(self, node: Node, children: list[Any]) -> list[tuple[str, Any]]:
        first, rest, _ = children
        return [first, *(pair for _, pair in (rest if isinstance(rest, list) else []))]

    def visit_pair(self, node: Node, children: list[Any]) -> tuple[str, Any]:
        return children[0], children[4]

    def visit_key(self, node: Node, children: list[Any]) -> str:
        key = children[0]
        return key if isinstance(key, str) else str(node.text).strip()

    def visit_bare_key(self, node: Node, children: list[Any]) -> str:
        return str(node.text).strip()

    def visit_array(self, node: Node, children: list[Any]) -> list[Any]:
        items = children[2]
        return items[0] if isinstance(items, list) and items else []

    def visit_items(self, node: Node, children: list[Any]) -> list[Any]:
        first, _, rest, _ = children
        return [first, *(value for _, value, _ in (rest if isinstance(rest, list) else []))]

    def visit_value(self, node: Node, children: list[Any]) -> Any:
        return children[0]

    def visit_string(self, node: Node, children: list[Any]) -> str:
        return str(node.children[1].text)

    def visit_number(self, node: Node, children: list[Any]) -> Any:
        text = str(node.text)
        if "." in text or "e" in text or "E" in text:
            return float(text)
        return int(text)

    def visit_word(self, node: Node, children: list[Any]) -> Any:
        return _WORDS[node.text]

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _Visitor()
