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
pass over its tags (one regex search per tag). No progressive streamer: a leaf's type, and whether
an element is a leaf at all, is known only when it closes (calls are sent whole when they settle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..grammar import encodable, json_text, rule_regex
from ..scanning import TagScanner, WalkSource
from ..schema_typing import property_schema, schema_types, typed
from ..spec import CallResult, Envelope, ParsedCall, Rejection, empty_body
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet

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
    """An element being read: its key, its schema, its children (key, value) and its text."""

    __slots__ = ("children", "key", "schema", "text")

    def __init__(self, key: str, schema: Any) -> None:
        self.key = key
        self.schema = schema
        self.children: list[tuple[str, Any]] = []
        self.text: list[str] = []


def _child_schema(schema: Any, key: str, index: int, item: str) -> Any:
    """The schema of child `key` (the `index`-th) of a container whose schema is `schema`."""
    if not isinstance(schema, Mapping):
        return None
    if "array" in schema_types(schema) and key == item:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, Sequence) and index < len(prefix):
            return prefix[index]
        return schema.get("items")
    found = property_schema(schema, key)
    if found is None and isinstance(schema.get("additionalProperties"), Mapping):
        return schema["additionalProperties"]
    return found


def _value(element: _Element, item: str) -> Any:
    """A closed element's value: a typed leaf, or its children as an array or an object."""
    if not element.children:
        text = "".join(element.text)
        if element.schema is None:
            return text
        value, _ = typed(text, element.schema)
        items = element.schema.get("items") if isinstance(element.schema, Mapping) else None
        if items is not None and not isinstance(value, list) and "array" in schema_types(element.schema):
            value, _ = typed(text, items)  # one value of a repeated array-typed key
        return value
    if "".join(element.text).strip():
        raise _Malformed(f"<{element.key}> holds both text and elements")
    types = schema_types(element.schema) if element.schema is not None else set()
    as_array = "array" in types if types else element.children[0][0] == item
    if as_array:
        return [value for _, value in element.children]
    out: dict[str, Any] = {}
    for key, value in element.children:
        if key in out:
            previous = out[key]
            out[key] = [*previous, value] if isinstance(previous, _Repeated) else _Repeated([previous, value])
        else:
            out[key] = value
    return {key: list(value) if isinstance(value, _Repeated) else value for key, value in out.items()}


class _Repeated(list):  # type: ignore[type-arg]
    """The values of a key repeated under one parent (kept apart from a list value)."""


@dataclass(frozen=True)
class TaggedTree:
    """The `tagged_tree` body kind, declared with a grammar, the array-item tag and the envelope's closers."""

    grammar: str
    closers: tuple[str, ...]
    item: str = "item"
    tag: str = "the call block"

    def scanner(self) -> TagScanner:
        return TagScanner(self.closers)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> None:
        return None

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
            result, pos = self._call(body, match, tools, envelope.complete, pattern)
            results.append(result)
            if isinstance(result, Rejection):
                return results

    def _call(self, body: str, head: Any, tools: ToolSet, complete: bool, pattern: Any) -> tuple[CallResult, int]:
        """One call from its invoke tag to its end tag: (the call or why not, where reading goes on)."""
        name = head.group("name").strip()
        start = head.start()
        schema = tools.parameters(name) if name else None
        stack = [_Element("", schema)]
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
                    arguments = _value(stack[0], self.item) if stack[0].children else {}
                    if "".join(stack[0].text).strip():
                        raise _Malformed("text beside the parameters")
                    break
                if match.group("key") is not None:
                    key = match.group("key").strip()
                    parent = stack[-1]
                    stack.append(_Element(key, _child_schema(parent.schema, key, len(parent.children), self.item)))
                    continue
                key = match.group("closed").strip()
                if len(stack) == 1 or key != top.key:
                    raise _Malformed(f"</{key}> does not close <{top.key or 'invoke'}>")
                stack.pop()
                stack[-1].children.append((key, _value(top, self.item)))
        except _Cut:
            error = f"the output ended inside the call to {name!r}"
            return Rejection(TRUNCATED, [error], body[start:], name or None), len(body)
        except (_Malformed, RecursionError) as malformed:
            return Rejection(INVALID_JSON, [f"{name}: {malformed}"], body[start:], name or None), len(body)
        raw = body[start:pos]
        if not isinstance(arguments, dict):
            return Rejection(INVALID_JSON, [f"{name}: the parameters are not named"], raw, name), pos
        arguments_json = json_text(arguments)
        if not name:
            return Rejection(INVALID_JSON, ["the call names no tool"], raw), pos
        if not encodable(name) or not encodable(arguments_json):
            return Rejection(INVALID_JSON, [f"{name}: a lone surrogate (not a Unicode character)"], raw), pos
        return ParsedCall(name, arguments, arguments_json), pos


class _Cut(Exception):
    pass
