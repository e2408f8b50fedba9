"""Rule-text pieces: the expression writer Lark and GBNF share (sequences, alternatives and
repetitions read alike in both), and GBNF's own: rule sets, string literals, character classes, and
regex patterns (the portable subset of `grammar_ir`) as GBNF expressions."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..grammar_ir import Alt, GrammarUnsupported, Members, Node, Repeat, Seq

# Python's own regex parser: `re._parser` from 3.11, `sre_parse` (deprecated there) before.
_sre: Any = importlib.import_module("re._constants" if sys.version_info >= (3, 11) else "sre_constants")
_sre_parse: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
# In a class `^` and `-` are written as code points: GBNF has no `\^` or `\-` escape.
_CLASS_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "]": "\\]", "[": "\\[", "^": "\\x5E",
                  "-": "\\x2D"}


def _char(char: str, table: dict[str, str]) -> str:
    found = table.get(char)
    if found is not None:
        return found
    return f"\\x{ord(char):02X}" if ord(char) < 0x20 or ord(char) == 0x7F else char


def literal(text: str) -> str:
    """`text` as a GBNF string (`""` for the empty text)."""
    return '"' + "".join(_char(char, _ESCAPES) for char in text) + '"'


def char_class(chars: Iterable[str], negated: bool = False) -> str:
    """A character class of these characters (or, `negated`, of every other character)."""
    return "[" + ("^" if negated else "") + "".join(_char(char, _CLASS_ESCAPES) for char in chars) + "]"


def bounds(least: int, most: int | None) -> str:
    """A quantifier: `*`, `+`, `?` or `{m,n}` (`{m,}` with no bound)."""
    if (least, most) == (0, None):
        return "*"
    if (least, most) == (1, None):
        return "+"
    if (least, most) == (0, 1):
        return "?"
    if least == most:
        return f"{{{least}}}"
    return f"{{{least},}}" if most is None else f"{{{least},{most}}}"


def too_deep(syntax: str) -> GrammarUnsupported:
    """What a writer raises where the grammar nests deeper than Python's stack follows (the IR's
    nodes are built shallow: a last guard, never the way a bound is kept)."""
    return GrammarUnsupported(f"the grammar nests too deeply to be written as {syntax}: simplify the tool's "
                              "schema (fewer nested levels or optional properties)")


class ExpressionWriter:
    """Writes `Seq`, `Alt` and `Repeat` as rule expressions; a syntax writes the other nodes (`leaf`)."""

    def expression(self, node: Node) -> str:
        if isinstance(node, Seq):
            return " ".join(self.expression(item) for item in node.items)
        if isinstance(node, Alt):
            return self.choice(" | ".join(self.expression(option) for option in node.options))
        if isinstance(node, Repeat):
            return self._repeat(node)
        if isinstance(node, Members):
            return self._members(node)
        return self.leaf(node)

    def leaf(self, node: Node) -> str:
        raise NotImplementedError

    def choice(self, options: str) -> str:
        """Alternatives: a rule of their own, so that nesting stays shallow (a schema's members)."""
        raise NotImplementedError

    def separated(self, separator: Node, item: Node, written: str) -> str:
        """The separator then the item (already written as `written`), as one expression."""
        return f"{self.expression(separator)} {written}"

    def _members(self, node: Members) -> str:
        """One rule per suffix (`grammar_ir.ordered_members`): `after[i]`, the members from i on each
        after a separator; `first[i]`, at least one of them with the first written unseparated (i, or
        when i may be left out, one from i + 1 on). Built from the end, in a loop: O(n) rules of O(1)
        size, and no recursion deeper than one member."""
        members = node.members
        written = [self.expression(member) for member, _ in members]
        after = [""] * (len(members) + 1)
        for i in reversed(range(len(members))):
            member, required = members[i]
            separated = self.separated(node.separator, member, written[i])
            step = separated if required else f"({separated})?"
            after[i] = self.choice(f"{step} {after[i + 1]}".rstrip())
        first = ""
        for i in reversed(range(len(members))):
            head = f"{written[i]} {after[i + 1]}".rstrip()
            first = self.choice(head if members[i][1] or not first else f"{head} | {first}")
        if node.at_least_one or any(required for _, required in members):
            return first
        return f"({first})?"

    def _repeat(self, node: Repeat) -> str:
        item = self.expression(node.item)
        if node.separator is None or node.max == 1:
            return f"({item}){bounds(node.min, node.max)}"
        later = f"({self.separated(node.separator, node.item, item)})"
        rest = f"{later}{bounds(max(node.min - 1, 0), None if node.max is None else node.max - 1)}"
        return f"({item} {rest})" if node.min > 0 else f"({item} {rest})?"


class RuleSet:
    """Named GBNF rules, each body written once (`name` finds an equal body's rule)."""

    def __init__(self) -> None:
        self._bodies: dict[str, str] = {}
        self._by_body: dict[tuple[str, str], str] = {}
        self._known: dict[Any, str] = {}

    def name(self, prefix: str, body: str) -> str:
        found = self._by_body.get((prefix, body))
        if found is None:
            found = self.reserve(prefix)
            self._by_body[(prefix, body)] = found
            self.define(found, body)
        return found

    def reserve(self, prefix: str) -> str:
        """A fresh rule name, defined later (`define`): for rules that refer to themselves."""
        name = f"{prefix}-{len(self._bodies)}"
        self._bodies[name] = ""
        return name

    def define(self, name: str, body: str) -> None:
        self._bodies[name] = body

    def known(self, key: Any) -> str | None:
        return self._known.get(key)

    def remember(self, key: Any, name: str) -> None:
        self._known[key] = name

    def text(self, root: str) -> str:
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self._bodies.items()]
        return "\n".join(lines) + "\n"


_CATEGORIES = {
    _sre.CATEGORY_DIGIT: ("0-9", False), _sre.CATEGORY_NOT_DIGIT: ("0-9", True),
    _sre.CATEGORY_SPACE: (" \\t\\n\\r\\x0B\\x0C", False), _sre.CATEGORY_NOT_SPACE: (" \\t\\n\\r\\x0B\\x0C", True),
    _sre.CATEGORY_WORD: ("0-9A-Za-z_", False), _sre.CATEGORY_NOT_WORD: ("0-9A-Za-z_", True),
}


@lru_cache(maxsize=1024)  # a pattern is written once per place it stands (each member of a tool's arguments)
def regex_rule(pattern: str) -> str:
    """A regular expression (the portable subset; anchors `^`/`$` are dropped: a grammar matches
    whole) as a GBNF expression. `GrammarUnsupported` for anything else (lookarounds, backreferences)
    and for groups nested deeper than Python's regex parser (and this writer) recurse."""
    try:
        parsed = _sre_parse.parse(pattern)
        return _sequence(list(parsed), pattern) or '""'
    except re.error as error:
        raise GrammarUnsupported(f"the pattern {pattern!r} does not compile: {error}") from error
    except RecursionError:
        raise GrammarUnsupported(f"the pattern {pattern[:40]!r}... nests its groups too deeply for a grammar; "
                                 "write it with fewer nested groups") from None


def _sequence(items: list[tuple[Any, Any]], pattern: str) -> str:
    out: list[str] = []
    pending: list[str] = []  # literal characters, joined into one string
    for op, value in items:
        if op is _sre.LITERAL:
            pending.append(chr(value))
            continue
        if pending:
            out.append(literal("".join(pending)))
            pending = []
        piece = _piece(op, value, pattern)
        if piece:
            out.append(piece)
    if pending:
        out.append(literal("".join(pending)))
    return " ".join(out)


def _piece(op: Any, value: Any, pattern: str) -> str:
    if op is _sre.NOT_LITERAL:
        return char_class(chr(value), negated=True)
    if op is _sre.ANY:
        return "[^\\n]"
    if op is _sre.IN:
        return _class(value)
    if op is _sre.CATEGORY:
        members, negated = _CATEGORIES[value]
        return f"[{'^' if negated else ''}{members}]"
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
        least, most, item = value
        inner = _sequence(list(item), pattern) or '""'
        return f"({inner}){bounds(least, None if most == _sre.MAXREPEAT else most)}"
    if op is _sre.SUBPATTERN:
        return "(" + (_sequence(list(value[-1]), pattern) or '""') + ")"
    if op is _sre.BRANCH:
        return "(" + " | ".join(_sequence(list(branch), pattern) or '""' for branch in value[1]) + ")"
    if op is _sre.AT:
        return ""
    raise GrammarUnsupported(f"the pattern {pattern!r} uses {op} , which GBNF cannot express")


def _class(items: list[tuple[Any, Any]]) -> str:
    negated = False
    parts: list[str] = []
    for op, value in items:
        if op is _sre.NEGATE:
            negated = True
        elif op is _sre.LITERAL:
            parts.append(_char(chr(value), _CLASS_ESCAPES))
        elif op is _sre.RANGE:
            parts.append(f"{_char(chr(value[0]), _CLASS_ESCAPES)}-{_char(chr(value[1]), _CLASS_ESCAPES)}")
        elif op is _sre.CATEGORY:
            members, category_negated = _CATEGORIES[value]
            if category_negated:
                raise GrammarUnsupported("a negated category (\\D, \\S, \\W) inside a class has no GBNF form")
            parts.append(members)
        else:
            raise GrammarUnsupported(f"the class item {op} has no GBNF form")
    return "[" + ("^" if negated else "") + "".join(parts) + "]"
