"""Body kind `tagged_tree`: a call tag holding parameters as nested tags, the key being the tag name,
leaves typed along the tool schema's path (MiniMax M3, Decision 7).

A format declares its grammar (`formats/<grammar>.peg`: rule `tag`, one regex, whose groups `name`
(an `invoke` tag), `end_invoke`, `closed` (a closing tag's key) and `key` (an opening tag's) say
which tag it is), the
array-item tag name (`item`) and the envelope's closers.

Rules: an element holding only text is a leaf; one holding elements is a container: an array when
its schema says array (or, without a schema, when its first child is `item`), else an object; a key
repeated under one object collects its values into a list, in order. A leaf is typed by its schema
(`properties`, `additionalProperties`, `items`, `prefixItems` along the path) with the shared rules
(`schema_typing.typed`): strings byte-exact, other types ignoring surrounding whitespace; no schema:
a string. Mismatched or missing closing tags, or text beside elements, make the call `invalid_json`;
a call cut off by the end of the output is `truncated`, the calls before it stand.

Read once while it streams: the scanner finds the block's closer; the finished body is read by one
pass over its tags (one regex search per tag). Progressive mode (`TreeStreamer`): the name when the
invoke tag is complete, the arguments whole when the call's end tag arrives (a repeated key may turn
any value into a list until then, so no value is certain before).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex  # type: ignore[import-untyped]

from ..grammar import encodable, json_text, rule_regex
from ..grammar_ir import GrammarUnsupported, Json, Lit, Repeat, Text, alt, seq
from ..grammar_ir import Node as GrammarNode
from ..grammar_ir import Regex as Pattern
from ..scanning import TagScanner, WalkSource
from ..schema_typing import property_schema, resolve_ref, schema_types, typed
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent, empty_body
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet
from .argument_layout import enum_strings, in_order, parameters_in_order, with_definitions

_CAPTURES = frozenset(("name", "end_invoke", "closed", "key"))


@cache
def _tag_regex(grammar: str) -> Any:
    found = rule_regex(grammar, ("tag",), _CAPTURES)
    if found is None:
        raise ValueError(f"formats/{grammar}.peg: its `tag` rule must be writable as one regex")
    return found


class _Malformed(Exception):
    pass


class _Element:
    """An element being read: its key, its schema (local `$ref`s resolved), the schema its text is
    typed by, its children (key, value, value's JSON text) and its text."""

    __slots__ = ("children", "key", "schema", "text", "typing")

    def __init__(self, key: str, schema: Any, typing: Any = None) -> None:
        self.key = key
        self.schema = schema
        self.typing = schema if typing is None else typing
        self.children: list[tuple[str, Any, str]] = []
        self.text: list[str] = []


def _resolved(schema: Any, root: Any) -> Any:
    """`schema` with a local `$ref` at its top followed (a few steps: a cycle ends the walk)."""
    for _ in range(8):
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
            return schema
        schema = resolve_ref(schema["$ref"], root)
    return schema


def _child_schema(schema: Any, key: str, index: int, item: str, root: Any) -> Any:
    """The schema of child `key` (the `index`-th) of a container whose schema is `schema`."""
    if not isinstance(schema, Mapping):
        return None
    if "array" in schema_types(schema, root=root) and key == item:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, Sequence) and index < len(prefix):
            return _resolved(prefix[index], root)
        return _resolved(schema.get("items"), root)
    found = property_schema(schema, key)
    if found is None and isinstance(schema.get("additionalProperties"), Mapping):
        found = schema["additionalProperties"]
    return _resolved(found, root)


def _value(element: _Element, item: str, root: Any) -> tuple[Any, str]:
    """A closed element's value and its JSON text: a typed leaf (an object or array written as strict
    JSON keeps its text), or its children as an array or an object."""
    if not element.children:
        text = "".join(element.text)
        if element.typing is None:
            return text, json_text(text)
        value, written = typed(text, element.typing)
        items = element.schema.get("items") if isinstance(element.schema, Mapping) else None
        if items is not None and not isinstance(value, list) and "array" in schema_types(element.typing, root=root):
            value, written = typed(text, _resolved(items, root))  # one value of a repeated array-typed key
        return value, json_text(value) if written is None else written
    if "".join(element.text).strip():
        raise _Malformed(f"<{element.key}> holds both text and elements")
    types = schema_types(element.schema, root=root) if element.schema is not None else set()
    if "array" in types if types else element.children[0][0] == item:
        return [value for _, value, _ in element.children], "[" + ", ".join(j for _, _, j in element.children) + "]"
    return _object(element.children)


def _object(children: list[tuple[str, Any, str]]) -> tuple[dict[str, Any], str]:
    """Children as an object; a key repeated under one parent collects its values into a list, in order."""
    grouped: dict[str, list[tuple[Any, str]]] = {}
    for key, value, text in children:
        grouped.setdefault(key, []).append((value, text))
    out: dict[str, Any] = {}
    parts = []
    for key, values in grouped.items():
        if len(values) == 1:
            out[key], text = values[0]
        else:
            out[key] = [value for value, _ in values]
            text = "[" + ", ".join(t for _, t in values) + "]"
        parts.append(f"{json_text(key)}: {text}")
    return out, "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class TaggedTree:
    """The `tagged_tree` body kind, declared with a grammar, the array-item tag and the envelope's closers."""

    grammar: str
    closers: tuple[str, ...]
    prefix: str  # what every tag starts with (NS): where the streamer tries the tag regex
    item: str = "item"
    tag: str = "the call block"

    def scanner(self) -> TagScanner:
        return TagScanner(self.closers)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> TreeStreamer:
        return TreeStreamer(self, tools)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        empty = empty_body(envelope, self.tag, f"{self.tag} holds no call")
        if empty is not None:
            return empty
        body, pattern = envelope.body, _tag_regex(self.grammar)
        results: list[CallResult] = []
        pos = 0
        while True:
            match = pattern.search(body, pos)
            if match is None or body[pos:match.start()].strip():
                if body[pos:].strip():
                    status = TRUNCATED if not envelope.complete and match is None else INVALID_JSON
                    shown = body[pos:pos + 30].strip()
                    results.append(Rejection(status, [f"text outside a call in {self.tag}: {shown!r}"], body[pos:]))
                return results
            if match.group("name") is None:
                results.append(Rejection(INVALID_JSON, [f"{match.group().strip()!r} where a call should start"],
                                         body[match.start():]))
                return results
            result, pos = self.call(body, match, tools, envelope.complete, pattern)
            results.append(result)
            if isinstance(result, Rejection):
                return results

    def call(self, body: str, head: Any, tools: ToolSet, complete: bool, pattern: Any) -> tuple[CallResult, int]:
        """One call from its invoke tag to its end tag: (the call or why not, where reading goes on)."""
        name = head.group("name").strip()
        start = head.start()
        root = tools.parameters(name) if name else None
        typing = tools.schema(name) if name else None  # the parameters' types, top-level branches read
        stack = [_Element("", _resolved(root, root))]
        pos = head.end()
        try:
            while True:
                match = pattern.search(body, pos)
                if match is None:
                    raise _Malformed("no closing tag") if complete else _Cut()
                top = stack[-1]
                top.text.append(body[pos:match.start()])
                pos = match.end()
                if match.group("end_invoke") is not None:
                    if len(stack) != 1:
                        raise _Malformed(f"</invoke> while <{top.key}> is open")
                    if "".join(stack[0].text).strip():
                        raise _Malformed("text beside the parameters")
                    arguments, arguments_json = _object(stack[0].children) if stack[0].children else ({}, "{}")
                    break
                if match.group("name") is not None:
                    raise _Malformed("<invoke> inside a call")
                if match.group("key") is not None:
                    key = match.group("key").strip()
                    parent = stack[-1]
                    schema = _child_schema(parent.schema, key, len(parent.children), self.item, root)
                    top_typing = property_schema(typing, key) if len(stack) == 1 and typing is not None else None
                    stack.append(_Element(key, schema, top_typing))
                    continue
                key = match.group("closed").strip()
                if len(stack) == 1 or key != top.key:
                    raise _Malformed(f"</{key}> does not close <{top.key or 'invoke'}>")
                stack.pop()
                stack[-1].children.append((key, *_value(top, self.item, root)))
        except _Cut:
            error = f"the output ended inside the call to {name!r}"
            return Rejection(TRUNCATED, [error], body[start:], name or None), len(body)
        except (_Malformed, RecursionError) as malformed:
            return Rejection(INVALID_JSON, [f"{name}: {malformed}"], body[start:], name or None), len(body)
        raw = body[start:pos]
        if not name:
            return Rejection(INVALID_JSON, ["the call names no tool"], raw), pos
        if not encodable(name) or not encodable(arguments_json):
            return Rejection(INVALID_JSON, [f"{name}: a lone surrogate (not a Unicode character)"], raw), pos
        return ParsedCall(name, arguments, arguments_json), pos


    # ------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> GrammarNode:
        """`NS<invoke name="N">`, one element per property in the schema's order (each required one
        once), `NS</invoke>`: an object with properties is a container of its elements, an array a
        container of `item` elements (`[]` written as a leaf when it is empty), a string leaf its
        raw text, any other leaf JSON of its schema."""
        if not _NAME.fullmatch(name):
            raise GrammarUnsupported(f"the tool name {name!r} cannot be written in an invoke tag; rename it")
        return seq(Lit(f'{self.prefix}<invoke name="{name}">'), self._children(parameters, parameters, 0),
                   Lit(f"{self.prefix}</invoke>"))

    def body_grammar(self, calls: GrammarNode, many: bool) -> GrammarNode:
        """One call (or one or more), each after a newline or none, then the block's closer."""
        return seq(Repeat(seq(_GAP, calls), 1, None if many else 1), _GAP, Lit(self.closers[0]))

    def calls_per_envelope(self) -> int | None:
        return None

    def _children(self, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int,
                  at_least_one: bool = False) -> GrammarNode:
        parts = [(self._element(key, _resolved(child, root), root, depth + 1), required)
                 for key, child, required in parameters_in_order(schema)]
        return in_order(parts, at_least_one=at_least_one)

    def _element(self, key: str, schema: Any, root: Mapping[str, Any], depth: int) -> GrammarNode:
        if depth > _MAX_DEPTH:
            raise GrammarUnsupported("the tool's schema nests too deep (or refers to itself) for a tagged tree")
        if key != key.strip() or not _KEY.fullmatch(key):
            raise GrammarUnsupported(f"the parameter name {key!r} cannot be written as a tag name; rename it")
        close = Lit(f"{self.prefix}</{key}>")  # in each alternative: a raw text is followed by its stop
        insides = self._inside(schema, root, depth)
        return seq(Lit(f"{self.prefix}<{key}>"), alt(*(seq(inside, close) for inside in insides)))

    def _inside(self, schema: Any, root: Mapping[str, Any], depth: int) -> list[GrammarNode]:
        types = schema_types(schema, root=root)
        options: list[GrammarNode] = []
        if not types or "string" in types:
            constants = enum_strings(schema)
            options.append(alt(*(Lit(value) for value in constants)) if constants else Text((self.prefix,)))
        if "object" in types and isinstance(schema, Mapping) and schema.get("properties"):
            required = schema.get("required")
            options.append(self._children(schema, root, depth, at_least_one=not required))
            if not required:
                options.append(Lit("{}"))
            types = types - {"object"}
        if "array" in types and isinstance(schema, Mapping):
            least, most = schema.get("minItems", 0), schema.get("maxItems")
            least = least if isinstance(least, int) and least > 0 else 0
            most = most if isinstance(most, int) and most >= max(least, 1) else None
            item = self._element(self.item, _resolved(schema.get("items"), root), root, depth + 1)
            options.append(Repeat(item, max(least, 1), most))
            if not least:
                options.append(Lit("[]"))
            types = types - {"array"}
        others = types - {"string"}
        if others:
            options.append(Json(with_definitions(_only(schema, others), root)))
        return options


def _only(schema: Any, types: set[str]) -> Any:
    """The schema of a leaf written as JSON: its `type` list cut to `types` where it has one."""
    declared = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(declared, list):
        return {**schema, "type": [kind for kind in declared if kind in types]}
    return schema if schema is not None else True


_NAME = regex.compile(r"[^\"<>\s](?:[^\"<>]*[^\"<>\s])?")
_KEY = regex.compile(r"[^<>/\s][^<>]*")
_GAP = Pattern(r"\n?")
_MAX_DEPTH = 32


class _Cut(Exception):
    pass


_TAG_LIMIT = 512  # a tag not closed within this many characters of its prefix is not waited for


class TreeStreamer:
    """Progressive mode: a call's name is sent when its invoke tag is complete, its arguments whole
    when its end tag arrives (a repeated key may still turn any value into a list until then). The
    text is searched once for the tag prefix (only a suffix that may be a tag's start is looked at
    again, at most `_TAG_LIMIT` characters); a call's text is joined once, when it ends."""

    def __init__(self, kind: TaggedTree, tools: ToolSet) -> None:
        self._kind = kind
        self._tools = tools
        self._pattern = _tag_regex(kind.grammar)
        self._window = ""  # text not yet searched to the end (a possible tag's start)
        self._call: list[str] | None = None  # the open call's text, from its invoke tag
        self._k = 0
        self._done = False  # the parse stops reading calls here (malformed text or call)

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if self._done:
            return events
        window, pos = self._window + body, 0
        prefix = self._kind.prefix
        while not self._done:
            at = window.find(prefix, pos)
            if at < 0:
                keep = max(pos, len(window) - len(prefix) + 1)
                self._take(window[pos:keep])
                window, pos = window[keep:], 0
                break
            match = self._pattern.match(window, at)
            if match is None:
                if len(window) - at < _TAG_LIMIT and ">" not in window[at + len(prefix):]:
                    self._take(window[pos:at])  # may still become a tag
                    window, pos = window[at:], 0
                    break
                self._take(window[pos:at + 1])
                pos = at + 1
                continue
            self._take(window[pos:at])
            pos = match.end()
            self._tag(match, events)
        self._window = "" if self._done else window[pos:]
        return events

    def _take(self, text: str) -> None:
        """Text that is no tag: part of the open call, or between calls (where only whitespace may be)."""
        if self._call is not None:
            self._call.append(text)
        elif text.strip():
            self._done = True  # the parse rejects the rest of the body here

    def _tag(self, match: Any, events: list[StreamEvent]) -> None:
        if self._call is None:
            name = match.group("name")
            if name is None or not name.strip():
                self._done = True
                return
            self._call = [match.group()]
            events.append(CallStart(self._k, name.strip()))
            return
        self._call.append(match.group())
        if match.group("end_invoke") is None and match.group("name") is None:
            return
        text = "".join(self._call)
        self._call = None
        result, _ = self._kind.call(text, self._pattern.match(text), self._tools, True, self._pattern)
        if not isinstance(result, ParsedCall):
            self._done = True
            return
        events.append(ArgumentsFragment(self._k, result.arguments_json))
        self._k += 1
