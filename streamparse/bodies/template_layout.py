"""How a grammar writes a call of the `template_calls` kind (`grammar_ir.CallLayout`): the field's own
patterns read back as grammar IR, with the call's parts put where the field's transform takes them from.

A call is written as transformers reads it (`bodies/template_calls.py`): the open pattern from its first
literal (the envelope's opener, written by the pattern: an optional group before the call's own opener is
one of the spellings), the content the content parser reads, the close pattern up to the closer. In a
pattern, literals are written as they are, classes and bounded runs as regular expressions, optional
whitespace as a little whitespace (`SPACE`, or the one optional character), alternatives and optional
groups as both ways, a branch reset `(?|A|B)` (the `regex` module's, which Python's `re` cannot read) as
each of its alternatives in its place, with the groups of that alternative (`plain_ways`), and a named
group as the call's part the transform takes from it: `name` (the transform's name placeholder) is the
tool's name, any other group its own pattern (an `id`). The content:
- `json`: the JSON value the transform reads the name and arguments from (`{content}` the arguments;
  `{content.name}` / `{content.args}` an object of both; with `transform_each` a list of such objects,
  `[` `,` `]`), the arguments valid against the tool's schema; on one line (`Json.one_line`, spaces its
  only whitespace and that after it) where a closer could begin inside it and holds a line break or tab
  (MiniMax M1's `}⏎`): no JSON string holds one raw, so the closer is not found before its place;
- `xml-inline`: one element of the tag pattern per parameter in the schema's order (each required one
  once), the `key` group the parameter's name and the `value` group its text: raw text up to the literal
  after the group where the schema allows a string (the parser keeps it), else JSON of the schema (the
  parser types it so); whitespace between elements;
- `kv-lines`: `key<sep>value` lines, the value raw text (a string) or a JSON scalar;
- `python-call-list`: `[NAME(key=value, ...), ...]` with Python literals of the schema.
What cannot be written so is `GrammarUnsupported` naming the construct: a free `.` outside a group, a
negative lookahead, a pattern Python's `re` cannot read even with its branch resets taken apart (`\\p{L}`),
a repeated branch reset or ones of more than `BRANCH_RESET_WAYS` ways, a name the group would not read
back, a transform the call's parts do not fill, a closer JSON could hold that holds no line break (`} `)
or after text the close pattern writes, `string_delims` (a JSON string may hold them), a text or number
content (no arguments to write).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..grammar_ir import (
    EMPTY,
    SPACE,
    SPACES,
    Alt,
    GrammarUnsupported,
    Json,
    Lit,
    Node,
    Regex,
    Repeat,
    Seq,
    Text,
    alt,
    exact_object,
    optional,
    ordered_members,
    seq,
)
from .argument_layout import enum_strings, parameters_in_order, with_definitions
from .python_layout import COMMA, PYTHONIC, python_literal
from .template_calls import compiled, read_types

if sys.version_info >= (3, 11):
    import re._compiler as _sre_compile
    import re._constants as _sre
    import re._parser as _sre_parse
else:  # pragma: no cover
    import sre_compile as _sre_compile
    import sre_constants as _sre
    import sre_parse as _sre_parse

_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT))
_SPACES = frozenset(" \t\n\r\f\v")
_CLASS_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "]": "\\]", "[": "\\[", "^": "\\^",
                  "-": "\\-"}
_CATEGORIES = {_sre.CATEGORY_DIGIT: "\\d", _sre.CATEGORY_NOT_DIGIT: "\\D", _sre.CATEGORY_SPACE: "\\s",
               _sre.CATEGORY_NOT_SPACE: "\\S", _sre.CATEGORY_WORD: "\\w", _sre.CATEGORY_NOT_WORD: "\\W"}


@dataclass(frozen=True)
class Field:
    """What of a `TemplateCalls` declaration its grammar reads (`TemplateCalls.field_layout`)."""

    scope: str
    head: str
    tail: str
    closers: tuple[str, ...]
    content: str
    content_args: str
    transform: str
    each: bool


@dataclass(frozen=True)
class Parsed:
    """A pattern taken apart: its items, and its groups' names by number."""

    items: tuple[Any, ...]
    named: Mapping[int, str]


@cache
def parsed(pattern: str, scope: str) -> tuple[Parsed, ...]:
    """The pattern taken apart, one `Parsed` per way its branch resets are taken (`plain_ways`)."""
    found = []
    for way in plain_ways(pattern, scope):
        try:
            read = _sre_parse.parse(way, _sre.SRE_FLAG_DOTALL)
        except Exception as error:
            raise GrammarUnsupported(f"{scope}: the pattern {pattern!r} is one Python's re cannot read ({error}), "
                                     "so no grammar is written from it") from None
        found.append(Parsed(tuple(read.data), {number: name for name, number in read.state.groupdict.items()}))
    return tuple(found)


# A pattern is written as at most this many plain patterns (the product of its branch resets' alternatives).
BRANCH_RESET_WAYS = 8


def plain_ways(pattern: str, scope: str) -> tuple[str, ...]:
    """`pattern` as patterns Python's `re` reads, which together match what it matches: a branch reset
    `(?|A|B)` (the `regex` module's: each alternative numbers its groups from the same number, so a
    name may stand in each) is taken one alternative at a time, `(?:A)` in its place, each way with
    the groups of its own alternative. Nested and later branch resets are taken in turn."""
    start = next((at for at, char in _structure(pattern) if char == "(" and pattern.startswith("(?|", at)), None)
    if start is None:
        return (pattern,)
    end, bars = start, []  # (the first bar is the one of `(?|`)
    depth = 0
    for at, char in _structure(pattern, start):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "|" and depth == 1:
            bars.append(at)
        if depth == 0:
            end = at
            break
    else:
        raise GrammarUnsupported(f"{scope}: the pattern {pattern!r} has a branch reset that is not closed")
    if pattern[end + 1:end + 2] in ("*", "+", "{"):
        raise GrammarUnsupported(f"{scope}: a repeated branch reset (its alternatives mixed) in {pattern!r} has no "
                                 "grammar form")
    ways: list[str] = []
    for left, right in zip(bars, [*bars[1:], end], strict=True):
        ways += plain_ways(f"{pattern[:start]}(?:{pattern[left + 1:right]}){pattern[end + 1:]}", scope)
        if len(ways) > BRANCH_RESET_WAYS:
            raise GrammarUnsupported(f"{scope}: the branch resets of {pattern!r} make more than "
                                     f"{BRANCH_RESET_WAYS} ways to write it")
    return tuple(ways)


def _structure(pattern: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """The characters of `pattern` from `start` that are its structure: `(`, `)` and `|`, outside
    escapes and character classes."""
    at = start
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if char == "[":
            at += 1 + pattern.startswith("^", at + 1)
            at += pattern.startswith("]", at)  # (a `]` first is a member)
            while at < len(pattern) and pattern[at] != "]":
                at += 2 if pattern[at] == "\\" else 1
        elif char in "()|":
            yield at, char
        at += 1


def _group_reads(sub: Any, text: str) -> bool:
    """Whether the group's own pattern matches `text` whole."""
    try:
        return _sre_compile.compile(sub, _sre.SRE_FLAG_DOTALL).fullmatch(text) is not None
    except Exception:
        return False


class Writer:
    """One pattern written as grammar IR, its named groups `bound` to nodes (the others their own pattern),
    a group bound to raw text `raw` taking the optional whitespace beside it (the lazy `.*?` the parser
    matches gives it back to the pattern)."""

    def __init__(self, scope: str, bound: Mapping[str, Node], raw: frozenset[str] = frozenset(),
                 checked: Mapping[str, str] | None = None) -> None:
        self.scope = scope
        self.bound = bound
        self.raw = raw
        self.checked = checked or {}
        self.used: set[str] = set()

    def write(self, pattern: Parsed, items: Any = None) -> Node:
        items = list(pattern.items if items is None else items)
        parts: list[Node] = []
        for at, (op, av) in enumerate(items):
            if is_space_repeat(op, av) and (self._raw_at(pattern, items, at - 1) or self._raw_at(pattern, items,
                                                                                                  at + 1)):
                continue
            parts.append(self._item(pattern, op, av))
        return seq(*parts)

    def write_ways(self, ways: tuple[Parsed, ...]) -> Node:
        """A pattern taken apart in several ways (`parsed`): any of them."""
        return alt(*(self.write(way) for way in ways))

    def _raw_at(self, pattern: Parsed, items: list[Any], at: int) -> bool:
        if not 0 <= at < len(items) or items[at][0] != _sre.SUBPATTERN:
            return False
        return pattern.named.get(items[at][1][0]) in self.raw

    def _item(self, pattern: Parsed, op: Any, av: Any) -> Node:
        if op == _sre.LITERAL:
            return Lit(chr(av))
        if op == _sre.SUBPATTERN:
            group = pattern.named.get(av[0])
            if group is not None and group in self.bound:
                self.used.add(group)
                wanted = self.checked.get(group)
                if wanted is not None and not _group_reads(av[-1], wanted):
                    raise GrammarUnsupported(f"{self.scope}: {wanted!r} cannot be written in this field: its pattern's "
                                             f"group {group!r} would not read it back; rename it")
                return self.bound[group]
            return self.write(pattern, av[-1])
        if op == _sre.BRANCH:
            return alt(*(self.write(pattern, branch) for branch in av[1]))
        if op in _REPEATS:
            return self._repeat(pattern, op, av)
        if op in (_sre.IN, _sre.NOT_LITERAL, _sre.CATEGORY):
            return Regex(_class(op, av, self.scope))
        if op in (_sre.AT, _sre.ASSERT):
            return EMPTY  # an anchor, or a lookahead what follows is checked by
        if op == _sre.ANY:
            raise GrammarUnsupported(f"{self.scope}: any character ('.') outside the groups the transform names "
                                     "has no text a grammar would write")
        raise GrammarUnsupported(f"{self.scope}: the pattern construct {str(op).lower()} (a negative lookaround or "
                                 "a backreference) has no grammar form")

    def _repeat(self, pattern: Parsed, op: Any, av: Any) -> Node:
        low, high, sub = av
        most = None if high == _sre.MAXREPEAT else int(high)
        if is_space_repeat(op, av):
            only = list(sub)
            if most == 1 and only[0][0] == _sre.LITERAL:
                return optional(Lit(chr(only[0][1])))
            return SPACE if most is None or most > 1 else Regex(_class(only[0][0], only[0][1], self.scope) + "?")
        items = list(sub)
        if len(items) == 1 and items[0][0] in (_sre.IN, _sre.NOT_LITERAL, _sre.CATEGORY, _sre.LITERAL):
            bound = f"{low},{'' if most is None else most}"
            return Regex(_class(items[0][0], items[0][1], self.scope) + "{" + bound + "}")
        return Repeat(self.write(pattern, items), int(low), most)


def is_space_repeat(op: Any, av: Any) -> bool:
    """`\\s*`, `\\n?`, `[ \\t]*`: an optional run of whitespace (framing where it stands, in a pattern)."""
    if op not in _REPEATS or av[0] != 0:
        return False
    sub = list(av[2])
    if len(sub) != 1:
        return False
    sop, sav = sub[0]
    if sop == _sre.LITERAL:
        return chr(sav) in _SPACES
    if sop == _sre.IN:
        return all((o == _sre.CATEGORY and a == _sre.CATEGORY_SPACE) or (o == _sre.LITERAL and chr(a) in _SPACES)
                   for o, a in sav)
    return bool(sop == _sre.CATEGORY and sav == _sre.CATEGORY_SPACE)


def _char(char: str) -> str:
    found = _CLASS_ESCAPES.get(char)
    if found is not None:
        return found
    return f"\\x{ord(char):02x}" if ord(char) < 0x20 or ord(char) == 0x7F else char


def _class(op: Any, av: Any, scope: str) -> str:
    """One character item as a class of the portable regex subset."""
    if op == _sre.LITERAL:
        return "[" + _char(chr(av)) + "]"
    if op == _sre.NOT_LITERAL:
        return "[^" + _char(chr(av)) + "]"
    if op == _sre.CATEGORY:
        return _CATEGORIES[av]
    parts, negated = [], False
    for item, value in av:
        if item == _sre.NEGATE:
            negated = True
        elif item == _sre.LITERAL:
            parts.append(_char(chr(value)))
        elif item == _sre.RANGE:
            parts.append(f"{_char(chr(value[0]))}-{_char(chr(value[1]))}")
        elif item == _sre.CATEGORY and value in _CATEGORIES:
            parts.append(_CATEGORIES[value])
        else:
            raise GrammarUnsupported(f"{scope}: the class item {str(item).lower()} has no grammar form")
    return "[" + ("^" if negated else "") + "".join(parts) + "]"


# ----------------------------------------------------------------- the transform: where the call's parts come from

@dataclass(frozen=True)
class Places:
    """Where the transform takes the call's name and arguments from: dotted paths from a root (a group of
    the patterns, `content`, or with `transform_each` a key of a list element)."""

    name: tuple[str, ...]
    arguments: tuple[str, ...]


def places(field: Field) -> Places:
    transform = json.loads(field.transform) if field.transform else "{content}"
    function = transform.get("function", transform) if isinstance(transform, dict) else transform
    if isinstance(function, str):
        path = _placeholder(function, field)
        return Places((*path, "name"), (*path, "arguments"))
    if not isinstance(function, dict):
        raise GrammarUnsupported(f"{field.scope}: a transform whose function is {function!r} says no call's parts")
    name, arguments = function.get("name"), function.get("arguments")
    if arguments is None:
        raise GrammarUnsupported(f"{field.scope}: a transform that gives no arguments (a grammar writes a tool's)")
    return Places(_placeholder(name, field), _placeholder(arguments, field))


def _placeholder(value: Any, field: Field) -> tuple[str, ...]:
    if not (isinstance(value, str) and value.startswith("{") and value.endswith("}") and len(value) > 2):
        raise GrammarUnsupported(f"{field.scope}: a transform that writes {value!r} itself, not from the output "
                                 "(a grammar writes the call's own name and arguments)")
    return tuple(value[1:-1].split("."))


def _nested(paths: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    """Leaf schemas at dotted paths as one tree of exact objects (`{"name": ..., "args": ...}`)."""
    tree: dict[str, Any] = {}
    for path, leaf in paths.items():
        here = tree
        for key in path[:-1]:
            here = here.setdefault(key, {})
        here[path[-1]] = leaf
    return tree


def _schema(tree: Any) -> Any:
    if isinstance(tree, _Leaf):
        return tree.schema
    return exact_object({key: _schema(sub) for key, sub in tree.items()}, tuple(tree))


@dataclass(frozen=True)
class _Leaf:
    schema: Any


# ----------------------------------------------------------------- a call

def call_node(field: Field, name: str, parameters: Mapping[str, Any]) -> Node:
    """One call of `name` (`TemplateCalls.call_grammar`): a list element for `transform_each`, else the
    head, the content and the tail."""
    where = places(field)
    roots = {name for pattern in (field.head, *([field.tail] if field.tail else []))
             for way in parsed(pattern, field.scope) for name in way.named.values()}
    if field.each:
        return _element(field, where, name, parameters)
    bound, checked = {}, {}
    content_paths: dict[tuple[str, ...], Any] = {}
    for path, leaf, text in ((where.name, _Leaf({"const": name}), name),
                             (where.arguments, _Leaf(dict(parameters)), None)):
        if path[0] in roots and len(path) == 1 and text is not None:
            bound[path[0]], checked[path[0]] = Lit(text), text
        elif path[0] == "content":
            content_paths[path[1:]] = leaf
        else:
            raise GrammarUnsupported(f"{field.scope}: the transform takes {'.'.join(path)} from where a grammar "
                                     "cannot write it")
    writer = Writer(field.scope, bound, checked=checked)
    head, tail = _head(field, writer), _tail(field, writer)
    if set(bound) - writer.used:
        raise GrammarUnsupported(f"{field.scope}: the transform's group {sorted(set(bound) - writer.used)} is in no "
                                 "pattern")
    one_line = field.content == "json" and _one_line(field, tail)
    content = _content(field, content_paths, name, parameters, one_line)
    if field.content == "json":  # JSON whitespace around the value, where the patterns write none
        content = seq(EMPTY if _ends_in_space(head) else SPACE, content, EMPTY if _starts_with_space(
            tail, field.closers) else SPACES if one_line else SPACE)
    return seq(head, content, tail)


# What JSON text may end a token with before whitespace: a bracket, comma, colon, string, number or literal.
_JSON_TOKEN_ENDS = frozenset('{}[],:"0123456789el')
_LINE_BREAKS = frozenset("\n\r\t")


def _one_line(field: Field, tail: Node) -> bool:
    """Whether the JSON content is written on one line, its whitespace spaces only (`Json.one_line`): so
    where a closer could begin inside it (a token JSON ends with, then whitespace: MiniMax M1's `}⏎`)
    and holds a line break or tab, which no JSON string holds raw: the text before the closer then holds
    none, so the closer cannot be found before its place. `GrammarUnsupported` where such a closer holds
    none, or a close pattern written before it could write one."""
    risky = [closer for closer in field.closers if closer[:1] in _JSON_TOKEN_ENDS and closer[1:2].isspace()]
    for closer in risky:
        if tail != EMPTY or not _LINE_BREAKS & set(closer):
            raise GrammarUnsupported(f"{field.scope}: the closer {closer!r} is text JSON itself may hold (a token "
                                     "JSON ends with, then whitespace): the call would end inside its arguments")
    return bool(risky)


def _head(field: Field, writer: Writer) -> Node:
    """The open pattern written from its first literal (the opener; leading whitespace is the assembly's)."""
    return _without_leading_space(writer.write_ways(parsed(field.head, field.scope)))


def _tail(field: Field, writer: Writer) -> Node:
    """The close pattern up to the end of its closer (trailing optional whitespace after it is not the
    call's); none where the closer is the whole close pattern (the body's grammar writes the closer)."""
    if not field.tail:
        return EMPTY
    tail = field.tail.removesuffix("\\s*").removesuffix("\\Z")
    ways = []
    for pattern in parsed(tail, field.scope):
        items = list(pattern.items)
        while items and is_space_repeat(*items[-1]):
            items.pop()
        if field.closers:  # the body's grammar writes the closer
            closer = field.closers[0]
            spelled = len(field.closers) > 1 and _optional_ending(items, field.closers)
            if spelled:
                items.pop()  # `C(?:A|B)?`: written without its optional ending (`C`, the first closer)
            ending = "".join(chr(av) for op, av in items[-len(closer):] if op == _sre.LITERAL)
            if (len(field.closers) > 1 and not spelled) or ending != closer:
                raise GrammarUnsupported(f"{field.scope}: a close pattern of several closers or one not ending with "
                                         "its closer's literal text")
            items = items[:-len(closer)]
        ways.append(writer.write(pattern, items))
    return alt(*ways)


def _optional_ending(items: list[Any], closers: tuple[str, ...]) -> bool:
    """Whether `items` end in an optional group and the closers are the first one and its longer spellings
    (a close pattern's optional ending, `C(?:A|B)?`: `C`, `CA`, `CB`)."""
    return bool(items) and items[-1][0] in _REPEATS and items[-1][1][:2] == (0, 1) \
        and all(other.startswith(closers[0]) for other in closers)


def _without_leading_space(node: Node) -> Node:
    """`node` without the whitespace it may begin with (an optional group before it taken both ways)."""
    if isinstance(node, Alt):
        return alt(*map(_without_leading_space, node.options))
    if not isinstance(node, Seq):
        return EMPTY if (_is_optional(node) and _is_space_node(node.item)) or node == SPACE else node  # type: ignore[union-attr]
    first, rest = node.items[0], seq(*node.items[1:])
    if first == SPACE or (_is_optional(first) and _is_space_node(first.item)):  # type: ignore[union-attr]
        return _without_leading_space(rest)
    if _is_optional(first):
        return alt(seq(first.item, rest), _without_leading_space(rest))  # type: ignore[union-attr]
    return node


def _is_optional(node: Node) -> bool:
    return isinstance(node, Repeat) and node.min == 0 and node.max == 1


def _is_space_node(node: Node) -> bool:
    return node == SPACE or (isinstance(node, Lit) and node.text.strip() == "" and node.text != "")


def _ends_in_space(node: Node) -> bool:
    last = node.items[-1] if isinstance(node, Seq) else node
    return (isinstance(last, Lit) and last.text[-1:].isspace()) or last == SPACE


def _starts_with_space(node: Node, closers: tuple[str, ...]) -> bool:
    first = node.items[0] if isinstance(node, Seq) else node
    if node == EMPTY:
        return bool(closers) and closers[0][:1].isspace()
    return (isinstance(first, Lit) and first.text[:1].isspace()) or first == SPACE


# ----------------------------------------------------------------- the content

def _content(field: Field, paths: Mapping[tuple[str, ...], Any], name: str, parameters: Mapping[str, Any],
             one_line: bool) -> Node:
    args = json.loads(field.content_args)
    if field.content == "json":
        if args.get("string_delims"):
            raise GrammarUnsupported(f"{field.scope}: json content with string_delims (a JSON string may hold them, "
                                     "and the parser would read them as a string's delimiters)")
        if not paths:
            raise GrammarUnsupported(f"{field.scope}: a transform that takes nothing from the content")
        return Json(_schema(_nested(paths)) if () not in paths else paths[()].schema, one_line)
    if paths.keys() != {()}:
        raise GrammarUnsupported(f"{field.scope}: {field.content} content is the arguments as a whole; a transform "
                                 "that takes the name from it has no grammar")
    if field.content == "xml-inline":
        return _xml_inline(field, args, parameters)
    if field.content == "kv-lines":
        return _kv_lines(field, args, parameters)
    raise GrammarUnsupported(f"{field.scope}: {field.content} content holds no arguments a grammar writes")


def _value(schema: Any, root: Mapping[str, Any], stops: tuple[str, ...], parser: Any) -> tuple[Node, bool]:
    """A value as the parser types it: (node, raw). Raw text where the schema allows a string (its
    constants where it names them), else JSON of the schema."""
    types = read_types(schema)
    json_parser = isinstance(parser, Mapping) and parser.get("name") == "json"
    if (not types or "string" in types) and not json_parser:
        constants = enum_strings(schema)
        return (alt(*map(Lit, constants)) if constants else Text(stops)), not constants
    # The parser reads Python's spellings too (`str()` of a value: a template's `{{ value }}`).
    spelled = [Lit(word) for kind, words in _PYTHON_WORDS.items() if kind in types and not json_parser
               for word in words]
    return alt(Json(with_definitions(schema, root)), *spelled), False


_PYTHON_WORDS = {"boolean": ("True", "False"), "null": ("None",)}


def _xml_inline(field: Field, args: Mapping[str, Any], parameters: Mapping[str, Any]) -> Node:
    if args.get("value_parser_by"):
        raise GrammarUnsupported(f"{field.scope}: xml-inline with value_parser_by (the value's parser chosen by a "
                                 "group of the tag)")
    scope = f"{field.scope} content_args.tag_pattern"
    ways = [(pattern, _after_group(pattern, "value", scope)) for pattern in parsed(str(args["tag_pattern"]), scope)]
    elements = []
    for key, schema, required in parameters_in_order(parameters):
        written = []
        for pattern, follow in ways:  # the value ends at the literal after it in this way of the pattern
            value, raw = _value(schema, parameters, (follow, *field.closers), args.get("value_parser"))
            writer = Writer(scope, {"key": Lit(key), "value": value}, frozenset({"value"}) if raw else frozenset(),
                            {"key": key})
            written.append(writer.write(pattern))
        elements.append((alt(*written), required))
    return seq(SPACE, ordered_members(elements, SPACE), SPACE) if elements else SPACE


def _after_group(pattern: Parsed, group: str, scope: str) -> str:
    """The literal text that follows the group (past optional whitespace): where its lazy value ends."""
    def find(items: list[Any]) -> str | None:
        for at, (op, av) in enumerate(items):
            if op == _sre.SUBPATTERN and pattern.named.get(av[0]) == group:
                text = ""
                for sop, sav in items[at + 1:]:
                    if sop == _sre.LITERAL:
                        text += chr(sav)
                    elif not (is_space_repeat(sop, sav) and not text):
                        break
                return text
            if op == _sre.SUBPATTERN:
                found = find(list(av[-1]))
                if found is not None:
                    return found
        return None

    found = find(list(pattern.items))
    if not found:
        raise GrammarUnsupported(f"{scope}: no literal text follows the group {group!r} (a lazy value then ends at "
                                 "once)")
    return found


def _kv_lines(field: Field, args: Mapping[str, Any], parameters: Mapping[str, Any]) -> Node:
    separator, line = str(args.get("kv_sep", ":")), str(args.get("line_sep", "\n"))
    lines = []
    for key, schema, required in parameters_in_order(parameters):
        if separator in key or line in key or key != key.strip() or not key:
            raise GrammarUnsupported(f"{field.scope}: the parameter name {key!r} cannot be a kv-lines key; rename it")
        types = read_types(schema)
        if types and "string" not in types:
            value: Node = _scalar(schema, types, field.scope)
        else:
            constants = enum_strings(schema)
            # (a text with whitespace at an end reads back stripped, as the parser strips each line)
            value = alt(*map(Lit, constants)) if constants else Text((line, *field.closers))
        lines.append((seq(Lit(f"{key}{separator} "), value), required))
    return seq(SPACE, ordered_members(lines, Lit(line)), SPACE) if lines else SPACE


_SCALARS = {"integer": r"-?(0|[1-9][0-9]{0,15})", "number": r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?",
            "boolean": "true|false", "null": "null"}


def _scalar(schema: Any, types: tuple[str, ...], scope: str) -> Node:
    """A value of a kv-lines line that is not a string: a number, boolean or null on the one line."""
    if not set(types) <= set(_SCALARS):
        raise GrammarUnsupported(f"{scope}: a kv-lines value of type {'/'.join(types)} (its JSON may span lines)")
    return alt(*(Regex(_SCALARS[kind]) for kind in types))


def _element(field: Field, where: Places, name: str, parameters: Mapping[str, Any]) -> Node:
    """One element of a `transform_each` list: a JSON object of the transform's keys, or a Python call."""
    if field.content == "python-call-list":
        if where != Places(("name",), ("arguments",)) or not all(part.isidentifier() for part in name.split(".")):
            raise GrammarUnsupported(f"{field.scope}: a python-call-list call named {name!r} (a dotted name is written)"
                                     if where == Places(("name",), ("arguments",)) else
                                     f"{field.scope}: a python-call-list transform other than {{name}}, {{arguments}}")
        properties = parameters.get("properties") or {}
        required = set(parameters.get("required") or ())
        members = [(seq(Lit(f"{key}="), python_literal(sub, parameters, PYTHONIC)), key in required)
                   for key, sub in properties.items() if key.isidentifier()]
        return seq(Lit(f"{name}("), ordered_members(members, COMMA), Lit(")"))
    if field.content != "json" or json.loads(field.content_args).get("string_delims"):
        raise GrammarUnsupported(f"{field.scope}: a list of calls read by {field.content} content")
    leaves = {where.name: _Leaf({"const": name}), where.arguments: _Leaf(dict(parameters))}
    tree = _nested(leaves)
    read = [seq(Lit(json.dumps(key, ensure_ascii=False)), SPACE, Lit(":"), SPACE, Json(_schema(sub)))
            for key, sub in tree.items()]
    return seq(Lit("{"), SPACE, Repeat(seq(_OTHER_MEMBER, _JSON_COMMA), 0, _OTHER_MEMBERS),
               *(seq(_JSON_COMMA, member) if at else member for at, member in enumerate(read)), SPACE, Lit("}"))


# An element may hold keys the transform does not read, which the parser ignores (Command R7B's templates
# write `"tool_call_id"` first): a few members of any value before the ones read (a key written again
# later is the later one's, as `json.loads` reads it).
_JSON_COMMA = seq(SPACE, Lit(","), SPACE)
_OTHER_MEMBER = seq(Json({"type": "string"}), SPACE, Lit(":"), SPACE, Json(True))
_OTHER_MEMBERS = 4


def body_node(field: Field, calls: Node, many: bool) -> Node:
    """The envelope after its opener: the calls (a list for `transform_each`, between the head and tail
    written with no name), then the closer."""
    if field.each:
        writer = Writer(field.scope, {})
        comma = COMMA if field.content == "python-call-list" else seq(SPACE, Lit(","), SPACE)
        listed = seq(Lit("["), _space_after_bracket(field), Repeat(calls, 1, None if many else 1, comma), SPACE,
                     Lit("]"))
        head, tail = _head(field, writer), _tail(field, writer)
        around = EMPTY if _ends_in_space(head) else SPACE
        body = seq(head, around, listed, EMPTY if _starts_with_space(tail, field.closers) else SPACE, tail)
    else:
        body = calls
    return seq(body, Lit(field.closers[0])) if field.closers else body


def _space_after_bracket(field: Field) -> Node:
    """The whitespace after the list's `[`: none where the open pattern looks ahead at the list itself and
    refuses it there (`\\s*(?=\\[[A-Za-z_][\\w.]*\\()`, which the `pythonic` template's calls are found by)."""
    head = compiled(field.head)
    return EMPTY if head.match("[", partial=True) is not None and head.match("[ ", partial=True) is None else SPACE
