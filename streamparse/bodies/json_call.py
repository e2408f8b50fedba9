"""Body kind `json_call`: one JSON call object `{"name": …, "arguments": {…}}` (Hermes; the elements
of Mistral Nemo lists), ending at a closer written outside JSON strings.

Read once while it streams: the scanner (`JsonAwareScanner`) finds the end, jumping between
quotes, backslashes and brackets and skipping complete values with the C decoder; in progressive
mode `JsonObjectCallStreamer` walks the same text once more, for the name and the arguments text;
the grammar (`formats/<grammar>.peg` around the shared `json_call_object` fragment) reads the
finished body, with a C-decoder fast path for the plain object.

Call-object rules, for every format of this kind:
- `parameters` is accepted for `arguments`; no arguments key means `{}`; a JSON string holding an
  object is accepted. A member written twice, or both `arguments` and `parameters`, rejects the
  call `invalid_json`: which one the model meant is unclear, and a stream that already sent one
  could not take it back.
- A call id is read only from the keys the format declares (`id_keys`): Hermes declares none (its
  wire format has no ids), so an `"id"` member there is an ordinary extra member, ignored, and the
  progressive stream and `parse()` give the same generated id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node, NodeVisitor

from ..calls import ARGUMENT_KEYS, call_from_members, json_problem, object_members
from ..grammar import ValueNode, load_grammar
from ..scanning import JsonAwareScanner
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, Rejection, StreamEvent
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet

_JSON_SPACE = " \t\n\r"
Member = tuple[str, Any, str]  # key, value, raw value text


class CallObjectVisitor(NodeVisitor):  # type: ignore[misc]
    """The rules of `formats/json_call_object.peg`: a call object as its members `(key, value, raw)`.

    Grammars that include the fragment subclass this for their own rules."""

    def visit_member(self, node: Node, children: list[Any]) -> Member:
        key, _, _, _, value = node.children
        assert isinstance(key, ValueNode) and isinstance(value, ValueNode)
        return key.value, value.value, value.text

    def visit_members(self, node: Node, children: list[Any]) -> list[Member]:
        first, more = children
        return [first, *more]

    def visit_more_members(self, node: Node, children: list[Any]) -> list[Member]:
        return [member for (_, _, _, member) in children]

    def visit_call_object(self, node: Node, children: list[Any]) -> list[Member]:
        members = children[2]
        return members[0] if isinstance(members, list) and members else []

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


class _BodyVisitor(CallObjectVisitor):
    """`body = json_ws call trailing`, where `call` may be Qwen 2.5's doubled-brace object."""

    def visit_call(self, node: Node, children: list[Any]) -> Any:
        return children[0]

    def visit_doubled_call(self, node: Node, children: list[Any]) -> Any:
        return children[2]

    def visit_body(self, node: Node, children: list[Any]) -> Any:
        return children[1]


_VISITOR = _BodyVisitor()


def call_of(members: list[Member], id_keys: tuple[str, ...]) -> CallResult:
    """A call from the members of its object, by the rules above. A rejected call that has a name
    keeps the model's id too, so that ids stay unique the same way in both emit modes."""
    call_id = next((v for k, v, _ in members if k in id_keys), None) if id_keys else None
    call_id = call_id if isinstance(call_id, str) and call_id.strip() else None
    present = [key for key in ARGUMENT_KEYS if any(k == key for k, _, _ in members)]
    if len(present) > 1:
        result: CallResult = Rejection(INVALID_JSON, [f"$: the call object has both {present[0]!r} and "
                                                      f"{present[1]!r}; which one holds the arguments is unclear"])
    else:
        result = call_from_members(members)
    if isinstance(result, Rejection):
        name = next((v for k, v, _ in members if k == "name"), None)
        named = isinstance(name, str) and bool(name.strip())
        return replace(result, id=call_id) if named and call_id is not None else result
    return result if result.id == call_id else replace(result, id=call_id)


@dataclass(frozen=True)
class JsonCall:
    """The `json_call` body kind: one call object, ended by a closer outside JSON strings.

    `grammar` names `formats/<grammar>.peg`, whose `body` rule reads the object (and any tolerated
    framing, such as Qwen 2.5's doubled braces); `tag` names the envelope in error messages."""

    grammar: str
    closers: tuple[str, ...]
    tag: str
    stops: tuple[str, ...] = ()
    id_keys: tuple[str, ...] = ()
    end_at_value: bool = False  # the envelope ends where its JSON value ends (no closer needed)
    # When set, an object with any other key, or whose "name" is not a string, is not a call: `parse`
    # returns no result (an anchored envelope is then content: Llama 3's JSON answers).
    call_keys: tuple[str, ...] = ()

    def scanner(self) -> JsonAwareScanner:
        return JsonAwareScanner(self.closers, self.stops, self.end_at_value)

    def streamer(self, tools: ToolSet) -> JsonObjectCallStreamer:
        return JsonObjectCallStreamer(tools)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        body = envelope.body
        if not body.strip():
            if not envelope.complete:
                return [Rejection(TRUNCATED, [f"the output ended right after {self.tag}"])]
            return [Rejection(INVALID_JSON, [f"empty {self.tag} envelope"])]
        # Fast path for the common case, one plain object; the grammar reads everything else.
        start = len(body) - len(body.lstrip(_JSON_SPACE))
        found = object_members(body, start)
        if found is not None and not body[found[1]:].strip(_JSON_SPACE + "}"):
            return self._call(found[0])
        try:
            tree = load_grammar(self.grammar).parse(body)
        except ParseError as error:
            if not envelope.complete:
                return [Rejection(TRUNCATED, [f"the output ended inside {self.tag} before the call was complete"])]
            pos = error.pos
            problem = json_problem(body, pos) or f"unexpected text at character {pos}: {body[pos:pos + 20]!r}"
            return [Rejection(INVALID_JSON, [f"not one JSON call object: {problem}"])]
        return self._call(_VISITOR.visit(tree))

    def _call(self, members: list[Member]) -> list[CallResult]:
        if self.call_keys and (any(key not in self.call_keys for key, _, _ in members)
                               or not any(key == "name" and isinstance(value, str) for key, value, _ in members)):
            return []
        return [call_of(members, self.id_keys)]

_STRUCTURE = re.compile(r'["{}\[\]:,]')
_IN_STRING = re.compile(r'["\\]')
_WHITESPACE = " \t\n\r"


class JsonObjectCallStreamer:
    """A call written as one JSON object `{"name": "…", "arguments": {…}}` (Hermes, Nemo items).

    The name is sent when its string closes; the arguments object is sent as the raw text the
    model writes, which is exactly the `arguments_json` the final parse keeps. Arguments written
    before the name are held until the name is known. An arguments value that is a JSON string
    is not streamed (its final text is the decoded string), nor is anything after the object.
    """

    def __init__(
        self, tools: ToolSet | None = None, argument_keys: tuple[str, ...] = ("arguments", "parameters")
    ) -> None:
        self._argument_keys = argument_keys
        self._depth = 0
        self._base: int | None = None  # depth of the call object (2 with Qwen's doubled braces)
        self._in_string = False
        self._escaped = False
        self._string: list[str] | None = None  # a key or value string being read at the call's level
        self._string_is_key = False
        self._key: str | None = None
        self._expect_key = False
        self._in_arguments = False
        self._name: str | None = None
        self._held: list[str] = []  # arguments text seen before the name
        self._done = False

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        pos = 0
        args_from = 0 if self._in_arguments else -1
        n = len(body)
        while pos < n and not self._done:
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                    self._string_text(body[pos: pos + 1])
                    pos += 1
                    continue
                match = _IN_STRING.search(body, pos)
                if match is None:
                    self._string_text(body[pos:])
                    pos = n
                    break
                if match.group() == "\\":
                    self._string_text(body[pos: match.end()])
                    self._escaped = True
                    pos = match.end()
                    continue
                self._string_text(body[pos: match.end()])
                self._in_string = False
                pos = match.end()
                self._string_closed(events)
                continue
            match = _STRUCTURE.search(body, pos)
            if match is None:
                pos = n
                break
            char = match.group()
            pos = match.end()
            if char == '"':
                self._in_string = True
                if self._base is None:
                    self._base = self._depth
                if self._depth == self._base and not self._in_arguments:
                    self._string = ['"']
                    self._string_is_key = self._expect_key
            elif char in "{[":
                if self._base is not None and self._depth == self._base and self._key in self._argument_keys \
                        and not self._expect_key and char == "{" and not self._in_arguments:
                    self._in_arguments = True
                    args_from = match.start()
                self._depth += 1
                if self._base is None and char == "{":
                    self._expect_key = True
            elif char in "}]":
                self._depth -= 1
                if self._in_arguments and self._depth == self._base:
                    self._emit_arguments(events, body[args_from:pos])
                    self._in_arguments = False
                    args_from = -1
                    self._key = None
                elif self._base is not None and self._depth < self._base:
                    self._done = True
            elif char == "," and self._depth == self._base:
                self._expect_key = True
                self._key = None
            elif char == ":" and self._depth == self._base:
                self._expect_key = False
        if self._in_arguments and args_from >= 0:
            self._emit_arguments(events, body[args_from:pos])
        return events

    def _string_text(self, text: str) -> None:
        if self._string is not None:
            self._string.append(text)

    def _string_closed(self, events: list[StreamEvent]) -> None:
        if self._string is None:
            return
        try:
            value = json.loads("".join(self._string))
        except ValueError:
            value = None
        self._string = None
        if self._string_is_key:
            self._key = value if isinstance(value, str) else None
        elif self._key == "name" and isinstance(value, str) and self._name is None and value.strip():
            self._name = value
            events.append(CallStart(0, value))
            if self._held:
                events.append(ArgumentsFragment(0, "".join(self._held)))
                self._held = []

    def _emit_arguments(self, events: list[StreamEvent], text: str) -> None:
        if not text:
            return
        if self._name is None:
            self._held.append(text)
        else:
            events.append(ArgumentsFragment(0, text))
