"""Body kind `header_json`: a header that names the call, up to declared markers, then one JSON
object that is its arguments (DeepSeek R1 / V3 / V3.1, Kimi K2; gpt-oss has the same shape).

A format declares its grammar (`formats/<grammar>.peg` with the rules `body`, `header`, `name`,
`lead`, `trail`, and optionally `call_id`, a marker and id after the name), the markers that end
the header in turn, and the envelope's closers and stops.
A header that holds the model's call id has an `id` rule with the `name` rule inside it (Kimi K2's
`functions.NAME:IDX`): the id is kept as written (trimmed), the name is what `name` matched. The
arguments are what the grammar's JSON terminal matched: an object, or, where the grammar allows a
`json_string`, a string that holds one (read as the object, as for Hermes).
Read once while it streams: `JsonAwareScanner` finds the end; in progressive mode
`JsonAfterHeaderStreamer` sends the name (and id) when the header ends and the object's raw text as
it arrives (exactly the `arguments_json` the final parse keeps), reading the object's extent from
the scanner's walk; the grammar reads the finished body (its JSON value is the one the scanner
decoded strictly when it skimmed it whole, `value_reader`, where the body holds that text).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from parsimonious.exceptions import ParseError
from parsimonious.expressions import OneOf, Sequence
from parsimonious.grammar import Grammar
from parsimonious.nodes import Node, NodeVisitor

from .. import grammar_ir
from ..calls import arguments_of
from ..grammar import DECODER, ValueNode, load_grammar, rule_regex
from ..grammar_ir import GrammarUnsupported, Lit, alt, from_template, seq
from ..json_reader import ObjectText
from ..scanning import TOP, Decoded, JsonAwareScanner, Marks, ValueReader, WalkSource, decoded_at, marks_of, whole_value
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent, empty_body
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet


class Header(NamedTuple):
    """What a call's header says: the function name, and the model's call id when it writes one."""

    name: str
    id: str | None = None


class _WrittenId(NamedTuple):
    text: str
    name: str


def _found(children: list[Any], kind: type) -> Any:
    """The first visited value of `kind` among (nested) children, or None."""
    stack = list(reversed(children))
    while stack:
        child = stack.pop()
        if isinstance(child, kind):
            return child
        if isinstance(child, list):
            stack.extend(reversed(child))
    return None


class _CallVisitor(NodeVisitor):  # type: ignore[misc]
    """`body` → (header, arguments node); `header` → `Header`. Shared by every header_json grammar."""

    def visit_body(self, node: Node, children: list[Any]) -> tuple[Header, ValueNode]:
        header, _, arguments, _ = children
        assert isinstance(arguments, ValueNode)
        return header, arguments

    def visit_header(self, node: Node, children: list[Any]) -> Header:
        written = _found(children, _WrittenId)
        if written is not None:  # the name inside the id (Kimi K2), or next to it (Mistral)
            return Header(written.name or _found(children, str) or "", written.text or None)
        return Header(_found(children, str))

    def visit_id(self, node: Node, children: list[Any]) -> _WrittenId:
        return _WrittenId(str(node.text).strip(), _found(children, str) or "")

    def visit_name(self, node: Node, children: list[Any]) -> str:
        return str(node.text).strip()

    def visit_arguments(self, node: Node, children: list[Any]) -> ValueNode:
        return _found(children, ValueNode)  # type: ignore[no-any-return]

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _CallVisitor()
_JSON_TERMINALS = frozenset(("json_value", "json_object", "json_string"))
_TERMINAL_TYPES = {"json_object": dict, "json_string": str}  # what `grammar.load_grammar`'s rules accept


@cache
def _shape(grammar: str) -> tuple[Any, Callable[[str, int, Decoded | None], ValueNode | None], Any] | None:
    """For `_BodyReader._read`: a grammar whose `body` is its header and lead, one JSON terminal
    (or a choice of them), then its trail: (header and lead as one regex with the groups `name`
    and `id`, the JSON rule's match function, the trail as one regex), or None."""
    rules = load_grammar(grammar)
    body = rules["body"]
    if body is not rules.default_rule or not isinstance(body, Sequence) or len(body.members) != 4:
        return None
    header, lead, value, trail = body.members
    if header.name != "header":
        return None
    terminals = value.members if isinstance(value, OneOf) else (value,)
    if not all(terminal.name in _JSON_TERMINALS for terminal in terminals):  # the engine's C-decoder rules
        return None

    def match(text: str, pos: int, decoded: Decoded | None) -> ValueNode | None:
        """The JSON terminals' own match at `pos` (the first that matches, as the grammar's choice);
        from the value the scanner decoded there, when it read that very text."""
        found = decoded_at(decoded, text, pos)
        entry = None if found is None else found.get(0)
        for terminal in terminals:
            if entry is not None:
                value, end = entry
                if terminal.name == "json_value" or isinstance(value, _TERMINAL_TYPES[terminal.name]):
                    return ValueNode(terminal, text, pos, pos + end, value)
                continue
            try:
                return terminal.match(text, pos)  # type: ignore[no-any-return]
            except ParseError:
                continue
        return None
    before = rule_regex(grammar, (header.name, lead.name), frozenset(("name", "id")))
    after = rule_regex(grammar, (trail.name,), frozenset())
    if before is None or after is None or "name" not in before.groupindex:
        return None
    return before, match, after


class _BodyReader:
    """Turns one envelope body into a call with a format's grammar; explains what is wrong if it cannot."""

    def __init__(self, grammar: str, shape: str, marker: str = "") -> None:
        self._grammar_name = grammar
        self._shape = shape  # how a call starts, for error messages
        self._marker = marker  # the marker before the arguments, for error messages

    @property
    def grammar(self) -> Grammar:
        return load_grammar(self._grammar_name)

    def __call__(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        body = envelope.body
        empty = empty_body(envelope, envelope.opener, "empty tool call: nothing between its markers")
        if empty is not None:
            return empty
        try:
            header, arguments = self._read(body, envelope.decoded) or _VISITOR.visit(self.grammar.parse(body))
        except ParseError:
            # A header read whole names the call and spends its id, as in progressive mode.
            header = self._header(body)
            name, call_id = (header.name, header.id) if header is not None and header.name else (None, None)
            if not envelope.complete:
                where = f"inside the arguments of {name!r}" if name else "before the call's arguments"
                return [Rejection(TRUNCATED, [f"the output ended {where}"], name=name, id=call_id)]
            return [Rejection(INVALID_JSON, [self._diagnose(body, envelope.opener)], name=name, id=call_id)]
        if not header.name:
            status = TRUNCATED if not envelope.complete else INVALID_JSON
            return [Rejection(status, ["the call has no function name before its arguments"])]
        read = arguments_of(arguments.value, arguments.text)
        if isinstance(read, str):
            return [Rejection(INVALID_JSON, [f"{self._marker}: {read}" if self._marker else read],
                              name=header.name, id=header.id)]
        return [ParsedCall(header.name, read[0], read[1], header.id)]

    def _read(self, body: str, decoded: Decoded | None = None) -> tuple[Header, ValueNode] | None:
        """What `_VISITOR` makes of the grammar's tree, without the tree: the header and lead as one
        regex (`grammar.rule_regex`), the JSON value by the grammar's own terminal, the trail as one
        regex; None when the grammar cannot be read so (then it reads the body itself, with its errors)."""
        shape = _shape(self._grammar_name)
        if shape is None:
            return None
        before, value_rule, after = shape
        head = before.match(body)
        if head is None:
            return None
        value = value_rule(body, head.end(), decoded)
        if value is None:
            return None
        tail = after.match(body, value.end)
        if tail is None or tail.end() != len(body):
            return None
        written = head.group("id") if "id" in before.groupindex else None
        name = head.group("name")
        if written is not None:  # as visit_header: the name inside the id, else the one beside it
            inside = head.start("name") >= head.start("id") and head.end("name") <= head.end("id")
            name_in_id = (name or "").strip() if inside and name is not None else ""
            beside = name.strip() if name is not None and not inside else None
            return Header(name_in_id or beside or "", written.strip() or None), value
        return (Header(name.strip()), value) if name is not None else None

    def _header(self, body: str) -> Header | None:
        try:
            return _VISITOR.visit(self.grammar["header"].match(body))  # type: ignore[no-any-return]
        except ParseError:
            return None

    def _diagnose(self, body: str, opener: str) -> str:
        grammar = self.grammar
        try:
            pos = grammar["header"].match(body).end
        except ParseError:
            return f"the call does not start with {self._shape}: {self._header_problem(body, opener)}"
        pos = grammar["lead"].match(body, pos).end
        try:
            value, end = DECODER.raw_decode(body, pos)
        except ValueError as error:
            return f"the arguments are not valid JSON: {error}"
        except RecursionError:
            return "the arguments are not valid JSON: nested too deeply"
        if not isinstance(value, dict):
            return f"the arguments must be a JSON object, got {type(value).__name__}"
        return f"unexpected text after the arguments at character {end}: {body[end:end + 20]!r}"

    def _header_problem(self, body: str, opener: str) -> str:
        """What the header lacks, by the grammar's `name` rule read where the header starts."""
        start = len(body) - len(body.lstrip())
        grammar = self.grammar
        try:
            node = grammar["name"].match(body, start)
        except ParseError:
            node = None
        if node is None or not node.text.strip():
            return f"expected a tool name after {opener}, found {body[start:start + 20]!r}"
        where = f"the tool name {node.text.strip()!r}"
        if "call_id" in grammar:  # the model's id after the name (Mistral's `[CALL_ID]ID`)
            after = len(body) - len(body[node.end:].lstrip())
            try:
                grammar["call_id"].match(body, after)
                where = "the call id"
            except ParseError:
                pass
        marker = f"{self._marker} and " if self._marker else ""
        return f"expected {marker}a JSON object after {where}"


# ----------------------------------------------------------------- progressive mode

_HEADER, _LEAD, _ARGUMENTS, _DONE = range(4)


class JsonAfterHeaderStreamer:
    """A call written as a header that names it, then a JSON object that is its arguments.

    The header ends at the first occurrence of each of `header_ends` in turn; it is read once with
    the grammar's `header` rule, which gives the name and the model's id, if any (sent at once).
    The text up to the object's `{` must match the `lead` rule. The object is then sent as the raw
    text the model writes — exactly the `arguments_json` the final parse keeps — with trailing
    whitespace held back, until it closes; nothing after it is sent (a JSON string holding the
    object, where the grammar allows one, is not streamed: the final parse sends it whole).
    Cost: the header is searched for its markers (`str.find`) and parsed once, as is the lead; the
    object is read from the marks of the scanner's walk (`scanning.Marks`), not walked again."""

    def __init__(self, grammar: str, header_ends: tuple[str, ...], marks: Marks,
                 ends_at_object: bool = False) -> None:
        self._grammar = load_grammar(grammar)
        self._header_ends = header_ends
        self._marks = marks
        self._ends_at_object = ends_at_object
        self._phase = _HEADER
        self._step = 0  # which of `header_ends` is looked for
        self._tail = ""  # the end of the header searched so far, which could begin that marker
        self._held: list[str] = []  # header or lead text so far
        self._object = ObjectText()

    def feed(self, body: str) -> list[StreamEvent]:
        marks = self._marks.take(body)
        events: list[StreamEvent] = []
        pos = 0
        while pos < len(body) and self._phase != _DONE:
            if self._phase == _HEADER:
                pos = self._read_header(body, pos, events)
            elif self._phase == _LEAD:
                pos = self._read_lead(body, pos, marks)
            else:
                fragment = self._object.feed(body, pos, marks)
                if fragment:
                    events.append(ArgumentsFragment(0, fragment))
                if self._object.done:
                    self._phase = _DONE
                pos = len(body)
        return events

    def _read_header(self, body: str, pos: int, events: list[StreamEvent]) -> int:
        """Look for the next header marker in `body[pos:]` (it may have begun in the last piece)."""
        marker = self._header_ends[self._step]
        joint = (self._tail + body[pos: pos + len(marker) - 1]).find(marker) if self._tail else -1
        if joint >= 0:
            start, end = pos + joint - len(self._tail), pos + joint + len(marker) - len(self._tail)
        else:
            start = body.find(marker, pos)
            end = start + len(marker) if start >= 0 else -1
        if self._ends_at_object and self._step == len(self._header_ends) - 1:
            brace = body.find("{", pos, start if start >= 0 else len(body))
            if brace >= 0:  # the object follows the header without its last marker
                return self._header_read(body, pos, brace, events, lookahead=body[brace])
        if end < 0:
            self._held.append(body[pos:])
            keep = len(marker) - 1
            self._tail = (self._tail + body[pos:])[-keep:] if keep else ""
            return len(body)
        if self._step + 1 == len(self._header_ends):
            return self._header_read(body, pos, end, events)
        self._held.append(body[pos:end])
        self._tail = ""
        self._step += 1
        return end

    def _header_read(self, body: str, pos: int, cut: int, events: list[StreamEvent], lookahead: str = "") -> int:
        """The header ends at `body[cut]`: read it with the grammar (with `lookahead`, the character
        that follows it, for a rule that looks ahead) and send the call's name and id."""
        self._held.append(body[pos:cut])
        self._tail = ""
        self._step = len(self._header_ends)
        header, self._held = "".join(self._held), []
        try:
            node = self._grammar["header"].match(header + lookahead)
            read: Header = _VISITOR.visit(node) if node.end == len(header) else Header("")
        except ParseError:
            read = Header("")
        if not read.name:
            self._phase = _DONE
            return len(body)
        events.append(CallStart(0, read.name, read.id))
        self._phase = _LEAD
        return cut

    def _read_lead(self, body: str, pos: int, marks: list[int]) -> int:
        """The text up to the first structure the walk found is the lead; the object starts there."""
        index = bisect_left(marks, pos)
        if index == len(marks):
            self._held.append(body[pos:])
            return len(body)
        brace = marks[index]
        self._held.append(body[pos:brace])
        lead, self._held = "".join(self._held), []
        if body[brace] != "{" or not self._lead_fits(lead):
            self._phase = _DONE
            return len(body)
        self._phase = _ARGUMENTS
        return brace

    def _lead_fits(self, lead: str) -> bool:
        try:
            self._grammar["lead"].parse(lead)
        except ParseError:
            return False
        return True


@dataclass(frozen=True)
class HeaderJson:
    """The `header_json` body kind, declared with a format's grammar, header markers and envelope ends."""

    grammar: str
    header_ends: tuple[str, ...]  # the header ends at the first of each of these, in turn
    shape: str  # how a call starts, for error messages
    closers: tuple[str, ...]
    stops: tuple[str, ...] = ()
    # The header also ends right before a `{` written ahead of its last marker (Mistral's `NAME{…}`
    # without `[ARGS]`; the grammar's `header` rule may look ahead at that `{`).
    ends_at_object: bool = False
    # The marker written before the arguments, named in error messages about them (`[ARGS]`).
    arguments_marker: str = ""
    # How a call is written, for grammars (`grammar_ir.from_template`): `{name}`, `{arguments}`,
    # `{id}`, `{index}` and literal text (DeepSeek V3.1: `{name}<｜tool▁sep｜>{arguments}`); one of
    # these templates, where the format writes several.
    layout: tuple[str, ...] = ()

    @property
    def value_reader(self) -> ValueReader:
        """What a scanner reads in a complete top-level JSON value it skims, for `parse` (`scanning.Decoded`)."""
        return whole_value

    def scanner(self) -> JsonAwareScanner:
        return JsonAwareScanner(self.closers, self.stops, read=self.value_reader)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> JsonAfterHeaderStreamer:
        return JsonAfterHeaderStreamer(self.grammar, self.header_ends, marks_of(scanner, TOP), self.ends_at_object)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        return _BodyReader(self.grammar, self.shape, self.arguments_marker)(envelope, tools)

    def read_header(self, header: str) -> Header | None:
        """A whole header (up to and with its end markers) read with the grammar; None if it is not one."""
        try:
            return _VISITOR.visit(load_grammar(self.grammar)["header"].parse(header))  # type: ignore[no-any-return]
        except ParseError:
            return None

    # ----------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> grammar_ir.Node:
        """One call as one of the format's declared `layout` templates writes it (`grammar_ir.from_template`)."""
        if not self.layout:
            raise GrammarUnsupported(f"the {self.grammar} calls declare no layout")
        return alt(*(from_template(template, name, parameters) for template in self.layout))

    def body_grammar(self, calls: grammar_ir.Node, many: bool) -> grammar_ir.Node:
        """One call, then the envelope's first closer (none where the envelope ends with the object)."""
        return seq(calls, Lit(self.closers[0])) if self.closers else calls

    def calls_per_envelope(self) -> int | None:
        return 1
