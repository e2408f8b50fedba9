"""Mistral Nemo, Small 3.x, Devstral, Magistral, Ministral 3: `[THINK]` reasoning and `[TOOL_CALLS]`.

Three wire versions follow the same `[TOOL_CALLS]` token; what follows it decides, per call:

    [TOOL_CALLS][{"name": …, "arguments": {…}, "id": …}, …]   Nemo (pre-v11): one JSON list, several calls
    [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}                      Small 3.2
    [TOOL_CALLS]NAME[ARGS]{…}                                 v11+: Devstral, Magistral, Ministral 3

No token closes the envelope: it ends where its top-level JSON value ends, and text after it is
content. When the value is not valid JSON, the rejected call's text runs to the next
`[TOOL_CALLS]` or the end (FORMATS.md, Decisions). So the scanner checks the JSON as it goes.

Cost: `ToolCallsReader` walks the body once, with regex jumps over names, whitespace, string
contents and numbers, and lets the C decoder skim containers that end inside the piece at hand
(failed tries are capped at twice the piece). It keeps O(nesting depth) state and never buffers
the body, so a runaway call stays bounded by the engine's `max_call_chars`. The only text it
looks at again is a held-back prefix of `[TOOL_CALLS]` / `[ARGS]` / `[CALL_ID]` (under 12
characters). In progressive mode a second reader finds names and ids; it forwards v11 argument
text without walking it, and walks Nemo lists (their ids come after the arguments).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node

from ..bodies.json_call import CallObjectVisitor, call_of
from ..calls import ARGUMENT_KEYS, arguments_of
from ..grammar import DECODER, LENIENT_DECODER, ValueNode, load_grammar
from ..scanning import Delimiters, ScanResult
from ..spec import (
    ArgumentsFragment,
    CallResult,
    CallStart,
    Envelope,
    EnvelopeSpec,
    FormatSpec,
    ParsedCall,
    Rejection,
    StreamEvent,
    random_id,
)
from ..types import INVALID_JSON, TRUNCATED, Message, ToolCall
from ..validation import ToolSet

OPENER, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
THINK = ("[THINK]", "[/THINK]")  # Magistral 2507+, Ministral 3 reasoning
THINK_TAGS = ("<think>", "</think>")  # Magistral 2506

# ----------------------------------------------------------------------------- the reader

# Keep `_NAME_RUN` and `_ID_RUN` in step with `name` and `id` in formats/mistral.peg.
_NAME_RUN = re.compile(r"[\w.:/\-]*")
_ID_RUN = re.compile(r"[^\s\[\]{}]*")
_SPACE = re.compile(r"\s*")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
# A run of string content with whole escapes. \x00 may stand in a string: in token-aware mode the
# engine shows the scanner plain-text look-alikes of special tokens (`[TOOL_CALLS]` quoted inside an
# argument) as NULs. A real NUL there still fails the visitor's JSON decoder.
_STRING_RUN = re.compile(r'(?:[^"\\\x01-\x1f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = frozenset("0123456789.eE+-")  # after a number: it may still go on (or be broken)
_DIGITS = re.compile(r"[0-9]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = frozenset('"\\/bfnrt')
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_CLOSER_OF = {"{": "}", "[": "]"}
_STOPS = Delimiters((OPENER,))
_HEAD_MARKERS = (OPENER, ARGS, CALL_ID)
_OPENER_ONLY = (OPENER,)
_PARTIAL = "partial"

# Where the reader is. The head: before the name, in it, after it, in the id, before the value.
_LEAD, _NAME, _AFTER_NAME, _ID_LEAD, _ID, _AFTER_ID, _ARGS_LEAD = (
    "lead", "name", "after_name", "id_lead", "id", "after_id", "args_lead")
# The JSON value; then either done (the envelope ends) or broken (it runs to the next opener).
_VALUE, _BROKEN, _DONE = "value", "broken", "done"
# Progressive mode, v11: every body piece from the arguments' `{` on is argument text (below).
_FORWARD = "forward"
_SPACED = frozenset((_LEAD, _AFTER_NAME, _ID_LEAD, _AFTER_ID, _ARGS_LEAD))

# In the value: what comes next between tokens, and the token being read.
_E_VALUE, _E_VALUE_OR_CLOSE, _E_KEY, _E_KEY_OR_CLOSE, _E_COLON, _E_NEXT = range(6)
_T_NONE, _T_STRING, _T_ESCAPE, _T_UNICODE, _T_NUMBER, _T_LITERAL = range(6)
# Number states (RFC 8259 grammar); the terminal ones may end the number.
_N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_E_SIGN, _N_EXP = range(8)
_N_TERMINAL = frozenset((_N_ZERO, _N_INT, _N_FRAC, _N_EXP))


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where the run of `pattern` (which may be empty) that starts at `pos` ends."""
    match = pattern.match(text, pos)
    return match.end() if match is not None else pos


def _marker_at(text: str, pos: int, markers: tuple[str, ...]) -> str | None:
    """The marker at `text[pos]`, `_PARTIAL` if the text ends inside one, else None."""
    for marker in markers:
        if text.startswith(marker, pos):
            return marker
    tail = text[pos:] if len(text) - pos < len(OPENER) else ""
    if tail and any(marker.startswith(tail) for marker in markers):
        return _PARTIAL
    return None


class ToolCallsReader:
    """Reads the body after one `[TOOL_CALLS]` once, whatever the chunking, and finds its end.

    As an `EnvelopeScanner` it ends the body where the top-level JSON value ends, and at a
    `[TOOL_CALLS]` outside a JSON string (not consumed: it opens the next call). The value is
    checked as JSON while it is read; from the first character that cannot continue it, the body
    runs to the next `[TOOL_CALLS]` or the end. With `events=True` it also says, for progressive
    mode, when a call's name (and id) are complete and which text is its arguments.

    Could move to `scanning.py` as a general "JSON value after an opener" scanner."""

    def __init__(self, *, events: bool = False) -> None:
        self._events: list[StreamEvent] | None = [] if events else None
        self._state = _LEAD
        # The head (events only).
        self._name: list[str] = []
        self._id: list[str] | None = None
        # The JSON value.
        self._stack: list[str] = []
        self._expect = _E_VALUE
        self._token = _T_NONE
        self._key_string = False  # the string being read is an object key
        self._hex = 0  # hex digits read of a \u escape
        self._number = _N_MINUS
        self._literal = ""
        self._literal_at = 0
        self._skim_budget = 0  # characters failed decoder tries may still cost in this piece
        self._objects: _CallObjects | None = None  # Nemo: the call objects of the list (events only)

    @property
    def broken(self) -> bool:
        """The body stopped being a call: it now runs to the next `[TOOL_CALLS]` or the end."""
        return self._state == _BROKEN

    def take_events(self) -> list[StreamEvent]:
        """The events since the last call (the list is shared with `_CallObjects`: emptied in place)."""
        if not self._events:
            return []
        events = self._events[:]
        self._events.clear()
        return events

    def scan(self, text: str, pos: int = 0) -> ScanResult:
        """Read `text[pos:]`; positions in the result are absolute (an `EnvelopeScanner`)."""
        if self._state == _DONE:
            return ScanResult(pos, pos)
        self._skim_budget = 2 * (len(text) - pos)
        if self._state == _VALUE and self._objects is not None:
            self._objects.rebase()
        while True:
            if self._state == _VALUE:
                step = self._scan_value(text, pos)
            elif self._state == _BROKEN:
                step = self._scan_broken(text, pos)
            elif self._state == _FORWARD:
                assert self._events is not None
                if pos < len(text):
                    self._events.append(ArgumentsFragment(0, text[pos:]))
                return ScanResult(len(text))
            elif self._state == _DONE:
                return ScanResult(pos, pos)
            else:
                step = self._scan_head(text, pos)
            if isinstance(step, ScanResult):
                return step
            pos = step

    # ------------------------------------------------------------------------- endings

    def _pause(self, text: str, safe: int) -> ScanResult:
        """The body goes on; `text[safe:]` (a possible marker start) must come again."""
        self._flush(text, safe)
        return ScanResult(safe)

    def _stop(self, text: str, pos: int) -> ScanResult:
        """The body ends before `pos` (the next `[TOOL_CALLS]`, or right after the value)."""
        self._flush(text, pos)
        self._state = _DONE
        return ScanResult(pos, pos)

    def _break(self, pos: int) -> int:
        """`text[pos]` cannot continue a call: from here the body runs to the next opener."""
        self._state = _BROKEN
        self._objects = None
        return pos

    def _flush(self, text: str, upto: int) -> None:
        if self._state == _VALUE and self._objects is not None:
            self._objects.flush(text, upto)

    def _scan_broken(self, text: str, pos: int) -> ScanResult:
        match = _STOPS.search(text, pos)
        if match is not None:
            self._state = _DONE
            return ScanResult(match.start(), match.start())
        return ScanResult(max(pos, _STOPS.held_from(text)))

    # ------------------------------------------------------------------------- the head

    def _scan_head(self, text: str, pos: int) -> int | ScanResult:
        state = self._state
        if state in _SPACED:
            pos = _end_of(_SPACE, text, pos)
            if state == _ID_LEAD and pos < len(text):
                self._state = state = _ID
        if state in (_NAME, _ID):
            end = _end_of(_NAME_RUN if state == _NAME else _ID_RUN, text, pos)
            target = self._name if state == _NAME else self._id
            if end > pos and self._events is not None and target is not None:
                target.append(text[pos:end])
            pos = end
        if pos == len(text):
            return self._pause(text, pos)
        char = text[pos]
        if state in (_NAME, _ID) and char.isspace():
            self._state = _AFTER_NAME if state == _NAME else _AFTER_ID
            return pos
        if state == _LEAD:
            if char in "[{":  # Nemo: a list of call objects, or one bare call object
                if self._events is not None:
                    self._objects = _CallObjects(2 if char == "[" else 1, self._events)
                return self._enter_value(pos, arguments=False)
            if _end_of(_NAME_RUN, text, pos) > pos:
                self._state = _NAME
                return pos
            return self._break(pos)
        if state == _ARGS_LEAD:
            if char in '{["':
                return self._enter_value(pos, arguments=char == "{")
            return self._break(pos)
        # After the name or the id: [ARGS], [CALL_ID] (after the name), or the arguments object.
        if char == "{":
            self._call_starts()
            return self._enter_value(pos, arguments=True)
        if char != "[":
            return self._break(pos)
        marker = _marker_at(text, pos, _HEAD_MARKERS)
        if marker == _PARTIAL:
            return self._pause(text, pos)
        if marker == OPENER:
            return self._stop(text, pos)
        if marker == ARGS:
            self._call_starts()
            self._state = _ARGS_LEAD
            return pos + len(ARGS)
        if marker == CALL_ID and state in (_NAME, _AFTER_NAME):
            self._id = []
            self._state = _ID_LEAD
            return pos + len(CALL_ID)
        return self._break(pos)

    def _call_starts(self) -> None:
        if self._events is not None:
            call_id = "".join(self._id) if self._id is not None else ""
            self._events.append(CallStart(0, "".join(self._name), call_id or None))

    def _enter_value(self, pos: int, arguments: bool) -> int:
        """The JSON value starts at `pos`. In progressive mode a v11 arguments value is not walked
        again: the scanner decides where the body ends, so every body piece from its `{` on is the
        arguments text, and what the scanner lets past the value (when it is not JSON) only ever
        belongs to a call that the visitor rejects. A value after [ARGS] that is not an object
        streams nothing (a JSON string holding the arguments is sent whole when it is accepted)."""
        if self._events is not None and self._objects is None:
            self._state = _FORWARD if arguments else _DONE
        else:
            self._state = _VALUE
        return pos

    # ------------------------------------------------------------------------- the JSON value

    def _scan_value(self, text: str, pos: int) -> int | ScanResult:
        n = len(text)
        objects = self._objects
        while pos < n:
            token = self._token
            if token == _T_STRING:
                pos = _end_of(_STRING_RUN, text, pos)
                if pos == n:
                    break
                char = text[pos]
                if char == '"':
                    pos += 1
                    self._token = _T_NONE
                    if objects is not None:
                        objects.string_closed(text, pos)
                    if self._key_string:
                        self._expect = _E_COLON
                    elif self._value_done():
                        return self._stop(text, pos)
                elif char == "\\":
                    pos += 1
                    self._token = _T_ESCAPE
                else:  # a control character
                    return self._break(pos)
                continue
            if token == _T_ESCAPE:
                char = text[pos]
                if char == "u":
                    self._token, self._hex = _T_UNICODE, 0
                elif char in _ESCAPES:
                    self._token = _T_STRING
                else:
                    return self._break(pos)
                pos += 1
                continue
            if token == _T_UNICODE:
                if text[pos] not in _HEX:
                    return self._break(pos)
                pos += 1
                self._hex += 1
                if self._hex == 4:
                    self._token = _T_STRING
                continue
            if token == _T_NUMBER:
                pos = self._read_number(text, pos)
                if self._token == _T_NUMBER:  # the text ended inside it, or it is broken
                    if self._state == _BROKEN:
                        return pos
                    break
                if self._value_done():
                    return self._stop(text, pos)
                continue
            if token == _T_LITERAL:
                char = text[pos]
                if char != self._literal[self._literal_at]:
                    return self._break(pos)
                pos += 1
                self._literal_at += 1
                if self._literal_at == len(self._literal):
                    self._token = _T_NONE
                    if self._value_done():
                        return self._stop(text, pos)
                continue
            # Between tokens.
            pos = _end_of(_JSON_SPACE, text, pos)
            if pos == n:
                break
            char = text[pos]
            expect = self._expect
            depth = len(self._stack)
            if expect <= _E_VALUE_OR_CLOSE:
                if char == "[":
                    marker = _marker_at(text, pos, _OPENER_ONLY)
                    if marker == _PARTIAL:
                        return self._pause(text, pos)
                    if marker == OPENER:
                        return self._stop(text, pos)
                if char in "{[":
                    end = self._skim_container(text, pos, depth)
                    if end is not None:
                        if self._value_done():
                            return self._stop(text, end)
                        pos = end
                        continue
                    if objects is not None:
                        objects.opened(char, pos, depth)
                    self._stack.append(char)
                    self._expect = _E_KEY_OR_CLOSE if char == "{" else _E_VALUE_OR_CLOSE
                elif char == '"':
                    self._start_string(pos, depth, key=False)
                elif char == "-" or "0" <= char <= "9":
                    number = _NUMBER.match(text, pos)
                    if number is not None and number.end() < n and text[number.end()] not in _NUMBER_CHARS:
                        self._value_done()  # a whole number; never the top-level value (see _ARGS_LEAD)
                        pos = number.end()
                        continue
                    self._token = _T_NUMBER
                    self._number = _N_MINUS if char == "-" else _N_ZERO if char == "0" else _N_INT
                elif char in _LITERALS:
                    self._token = _T_LITERAL
                    self._literal, self._literal_at = _LITERALS[char], 1
                elif char == "]" and expect == _E_VALUE_OR_CLOSE:
                    if self._close(text, pos):
                        return self._stop(text, pos + 1)
                else:
                    return self._break(pos)
            elif expect <= _E_KEY_OR_CLOSE:
                if char == '"':
                    self._start_string(pos, depth, key=True)
                elif char == "}" and expect == _E_KEY_OR_CLOSE:
                    if self._close(text, pos):
                        return self._stop(text, pos + 1)
                else:
                    return self._break(pos)
            elif expect == _E_COLON:
                if char != ":":
                    return self._break(pos)
                self._expect = _E_VALUE
            elif char == ",":
                self._expect = _E_KEY if self._stack[-1] == "{" else _E_VALUE
                if objects is not None:
                    objects.comma(depth)
            elif char == _CLOSER_OF[self._stack[-1]]:
                if self._close(text, pos):
                    return self._stop(text, pos + 1)
            else:
                return self._break(pos)
            pos += 1
        return self._pause(text, n)

    def _skim_container(self, text: str, pos: int, depth: int) -> int | None:
        """Where the container opening at `text[pos]` ends, when the C decoder reads it whole in
        this piece; None otherwise. A failed try (the container goes on past the piece, or is
        not JSON) costs up to the rest of the piece, so failed tries stop once they have cost
        twice the piece: the decoder reads each character at most four times, the walk once.
        Call objects of a Nemo list are walked (their names and ids are events); what is inside
        them may be skimmed."""
        objects = self._objects
        if self._skim_budget <= 0 or (objects is not None and depth < objects.depth):
            return None
        try:
            end: int = LENIENT_DECODER.raw_decode(text, pos)[1]  # where it ends; read strictly later
        except (ValueError, RecursionError):
            self._skim_budget -= len(text) - pos
            return None
        if objects is not None:
            objects.opened(text[pos], pos, depth)
            objects.closed(text, end, depth)
        return end

    def _start_string(self, pos: int, depth: int, key: bool) -> None:
        self._token = _T_STRING
        self._key_string = key
        if self._objects is not None:
            self._objects.string_opened(pos, depth, key)

    def _close(self, text: str, pos: int) -> bool:
        """Close the innermost container at `text[pos]`; True when that ends the whole value."""
        self._stack.pop()
        if self._objects is not None:
            self._objects.closed(text, pos + 1, len(self._stack))
        return self._value_done()

    def _value_done(self) -> bool:
        """A value ended: True when it was the top-level one."""
        if not self._stack:
            return True
        self._expect = _E_NEXT
        return False

    def _read_number(self, text: str, pos: int) -> int:
        """Advance through a number; `_token` stays `_T_NUMBER` while it can go on."""
        n = len(text)
        while pos < n:
            state = self._number
            if state in (_N_INT, _N_FRAC, _N_EXP):
                pos = _end_of(_DIGITS, text, pos)
                if pos == n:
                    return pos
            char = text[pos]
            digit = "0" <= char <= "9"
            if state == _N_MINUS and digit:
                self._number = _N_ZERO if char == "0" else _N_INT
            elif state == _N_DOT and digit:
                self._number = _N_FRAC
            elif state in (_N_E, _N_E_SIGN) and digit:
                self._number = _N_EXP
            elif state == _N_E and char in "+-":
                self._number = _N_E_SIGN
            elif state in (_N_ZERO, _N_INT) and char == ".":
                self._number = _N_DOT
            elif state in (_N_ZERO, _N_INT, _N_FRAC) and char in "eE":
                self._number = _N_E
            elif state in _N_TERMINAL:
                self._token = _T_NONE  # the number ended before `char`
                return pos
            else:
                return self._break(pos)
            pos += 1
        return pos


@dataclass
class _Call:
    """A call object of a Nemo list, as far as it has been read (progressive mode)."""

    k: int
    name: str | None = None
    id: str | None = None
    id_known: bool = False
    started: bool = False
    has_arguments: bool = False
    held_arguments: list[str] = field(default_factory=list)
    held_parameters: list[str] = field(default_factory=list)


class _CallObjects:
    """Progressive mode, Nemo: the name, id and raw arguments text of each call object.

    The id is sent with the name, and Nemo writes it after the arguments, so a call starts once
    its id is read (or, without one, when its object closes); arguments read before that are held.
    `parameters` is held until the object closes, since an `arguments` member would win. The
    visitor rejects a call object that repeats a member, so what is sent is what it will keep."""

    def __init__(self, depth: int, events: list[StreamEvent]) -> None:
        self.depth = depth  # nesting depth of a call object's members: 2 in a list, 1 when bare
        self._events = events
        self._k = 0
        self._call: _Call | None = None
        self._key: str | None = None
        self._string: list[str] | None = None  # a key, name or id string being read
        self._string_from = -1
        self._string_is_key = False
        self._capture: str | None = None  # the argument key whose object is being read
        self._capture_from = -1

    def rebase(self) -> None:
        if self._string is not None:
            self._string_from = 0
        if self._capture is not None:
            self._capture_from = 0

    def flush(self, text: str, upto: int) -> None:
        if self._string is not None:
            self._string.append(text[self._string_from:upto])
            self._string_from = upto
        if self._capture is not None:
            self._deliver(text[self._capture_from:upto])
            self._capture_from = upto

    def opened(self, char: str, pos: int, depth: int) -> None:
        if depth == self.depth - 1:
            if char == "{":
                self._call = _Call(self._k)
                self._key = None
        elif (depth == self.depth and char == "{" and self._call is not None and self._capture is None
              and self._key in ARGUMENT_KEYS):
            self._capture, self._capture_from = self._key, pos

    def closed(self, text: str, end: int, depth: int) -> None:
        if self._capture is not None and depth == self.depth:
            self._deliver(text[self._capture_from:end])
            self._capture = None
        elif depth == self.depth - 1 and self._call is not None:
            call, self._call = self._call, None
            self._start(call)
            if call.started and not call.has_arguments and call.held_parameters:
                self._events.append(ArgumentsFragment(call.k, "".join(call.held_parameters)))

    def comma(self, depth: int) -> None:
        if depth == self.depth - 1:
            self._k += 1

    def string_opened(self, pos: int, depth: int, key: bool) -> None:
        if depth == self.depth and self._call is not None and (key or self._key in ("name", "id")):
            self._string, self._string_from, self._string_is_key = [], pos, key

    def string_closed(self, text: str, end: int) -> None:
        if self._string is None or self._call is None:
            return
        self._string.append(text[self._string_from:end])
        try:
            value = json.loads("".join(self._string))
        except ValueError:
            value = None
        self._string = None
        call = self._call
        if self._string_is_key:
            self._key = value if isinstance(value, str) else None
            call.has_arguments = call.has_arguments or self._key == "arguments"
        elif self._key == "name" and call.name is None and isinstance(value, str):
            call.name = value
            if call.id_known:
                self._start(call)
        elif self._key == "id" and not call.id_known and isinstance(value, str):
            call.id_known = True
            call.id = value if value.strip() else None
            self._start(call)

    def _start(self, call: _Call) -> None:
        if call.started or call.name is None or not call.name.strip():
            return
        call.started = True
        self._events.append(CallStart(call.k, call.name, call.id))
        if call.held_arguments:
            self._events.append(ArgumentsFragment(call.k, "".join(call.held_arguments)))
            call.held_arguments = []

    def _deliver(self, text: str) -> None:
        call = self._call
        if not text or call is None:
            return
        if self._capture == "parameters":
            call.held_parameters.append(text)
        elif call.started:
            self._events.append(ArgumentsFragment(call.k, text))
        else:
            call.held_arguments.append(text)


class ToolCallsStreamer:
    """Progressive mode: the events of a `ToolCallsReader` over the body pieces as they arrive."""

    def __init__(self, tools: ToolSet | None = None) -> None:
        self._reader = ToolCallsReader(events=True)
        self._carry = ""
        self._done = False

    def feed(self, body: str) -> list[StreamEvent]:
        if self._done:
            return []
        text = self._carry + body
        result = self._reader.scan(text)
        if result.end is None:
            self._carry = text[result.safe:]
        else:
            self._done, self._carry = True, ""
        return self._reader.take_events()


# ----------------------------------------------------------------------------- the visitor


class _Visitor(CallObjectVisitor):
    """The call head `(name, id)`; call objects as members, by the shared `json_call_object` rules."""

    def visit_call_head(self, node: Node, children: list[Any]) -> tuple[str, str | None]:
        _, name, _, call_id, _ = children
        return name, call_id[0] if isinstance(call_id, list) and call_id else None

    def visit_call_id(self, node: Node, children: list[Any]) -> str:
        return str(node.children[2].text)

    def visit_name(self, node: Node, children: list[Any]) -> str:
        return str(node.text)

    def visit_list_item(self, node: Node, children: list[Any]) -> Any:
        return children[1]

    def visit_element(self, node: Node, children: list[Any]) -> Any:
        return children[0]


_VISITOR = _Visitor()


@dataclass(frozen=True)
class ToolCalls:
    """What follows `[TOOL_CALLS]`: a Nemo list of `json_call` objects, or one `NAME[ARGS]{…}` call,
    ending where its top-level JSON value ends. (Its reader is still this module's own; see
    docs/architecture.md, "What is not a declaration yet".)"""

    def scanner(self) -> ToolCallsReader:
        return ToolCallsReader()

    def streamer(self, tools: ToolSet) -> ToolCallsStreamer:
        return ToolCallsStreamer(tools)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        return parse_envelope(envelope, tools)


def parse_envelope(envelope: Envelope, tools: ToolSet) -> list[CallResult]:
    """The calls of one `[TOOL_CALLS]` envelope: a Nemo list (or bare call object), or one named call."""
    body = envelope.body
    lead = body.lstrip()
    if not lead:
        if not envelope.complete:
            return [Rejection(TRUNCATED, ["the output ended right after [TOOL_CALLS]"])]
        return [Rejection(INVALID_JSON, ["empty [TOOL_CALLS]: no call after it"])]
    # Cut off (truncated) only if the output ended while the text could still have become a call.
    reader = ToolCallsReader()
    cut = not envelope.complete and reader.scan(body).end is None and not reader.broken
    if lead[0] in "[{" and not lead.startswith((ARGS, CALL_ID)):
        return _read_list(body, cut)
    return [_read_named_call(body, cut)]


def _read_named_call(body: str, cut: bool) -> CallResult:
    grammar = load_grammar("mistral")
    try:
        head = grammar["call_head"].match(body)
    except ParseError:
        if cut:
            return Rejection(TRUNCATED, ["the output ended before the call's arguments"])
        return Rejection(INVALID_JSON, [_head_error(body)])
    name, call_id = _VISITOR.visit(head)
    start = head.end
    error = None
    try:
        value = grammar["json_value"].match(body, start)
        if value.end < len(body):
            error = f"text after the arguments JSON: {body[value.end:value.end + 20]!r}"
    except ParseError:
        error = f"the arguments are {_json_error(body, start)}"
    except RecursionError:
        error = "the arguments are nested too deeply"
    if error is not None:
        if cut:
            return Rejection(TRUNCATED, [f"the output ended inside the arguments of {name!r}"], name=name)
        return Rejection(INVALID_JSON, [error], name=name)
    arguments = arguments_of(value.value, value.text)
    if isinstance(arguments, str):
        return Rejection(INVALID_JSON, [f"{ARGS}: {arguments}"], name=name)
    return ParsedCall(name, arguments[0], arguments[1], call_id or None)


def _head_error(body: str) -> str:
    start = _end_of(_SPACE, body, 0)
    name_end = _end_of(_NAME_RUN, body, start)
    if name_end == start:
        return f"expected a tool name after [TOOL_CALLS], found {body[start:start + 20]!r}"
    after = _end_of(_SPACE, body, name_end)
    where = "the call id" if body.startswith(CALL_ID, after) else f"the tool name {body[start:name_end]!r}"
    return f"expected [ARGS] and a JSON object after {where}"


def _json_error(body: str, start: int) -> str:
    """Why the JSON value at `body[start:]` does not decode, at a position relative to its start."""
    try:
        DECODER.raw_decode(body, start)
    except json.JSONDecodeError as error:
        return f"not valid JSON: {error.msg} (character {error.pos - start} of it)"
    except RecursionError:
        return "not valid JSON: nested too deeply"
    except ValueError as error:
        return f"not valid JSON: {error}"
    return "not valid JSON"


def _read_list(body: str, cut: bool) -> list[CallResult]:
    """A Nemo list, one element at a time: each call object is a call; the calls before a broken
    or cut-off element are kept, and the rest of the list is one rejection."""
    grammar = load_grammar("mistral")
    try:
        pos = grammar["list_open"].match(body).end
        listed = True
    except ParseError:  # a bare call object
        pos, listed = 0, False
    results: list[CallResult] = []
    item_at = pos
    closed = broken_item = False
    while True:
        if listed and not results:
            after = _end_of(_JSON_SPACE, body, pos)
            if body.startswith("]", after):
                pos, closed = after + 1, True
                break
        try:
            item = grammar["list_item"].match(body, item_at)
        except (ParseError, RecursionError):
            broken_item = True
            break
        path = f"$[{len(results)}]" if listed else "$"
        results.append(_element_call(_VISITOR.visit(item), path))
        pos = item.end
        if not listed:
            closed = True
            break
        if body.startswith(",", pos):
            item_at = pos + 1
            continue
        if body.startswith("]", pos):
            pos, closed = pos + 1, True
        break
    rest = body[pos:]
    if not rest.strip() and (closed or results):  # a missing `]` after complete calls is tolerated
        return results or [Rejection(INVALID_JSON, ["the call list is empty"])]
    path = f"$[{len(results)}]" if listed else "$"
    if cut:
        error = f"{path}: the output ended inside the call list" if listed else "the output ended inside the call"
        results.append(Rejection(TRUNCATED, [error]))
    elif broken_item:
        start = _end_of(_JSON_SPACE, body, item_at)
        results.append(Rejection(INVALID_JSON, [f"{path}: {_json_error(body, start)}"]))
    else:
        results.append(Rejection(INVALID_JSON, [f"{path}: expected ',' or ']' in the call list, "
                                                f"found {rest.lstrip()[:20]!r}"]))
    return results


def _element_call(element: Any, path: str) -> CallResult:
    if isinstance(element, ValueNode):
        kind = _JSON_TYPES.get(type(element.value), "value")
        return Rejection(INVALID_JSON, [f"{path}: a call must be a JSON object with a name, got a {kind}"])
    members: list[tuple[str, Any, str]] = element
    result = call_of(members, id_keys=("id",))
    repeated = [key for key, count in Counter(key for key, _, _ in members).items() if count > 1]
    if repeated:
        return Rejection(INVALID_JSON, [f"{path}: the call object has {repeated[0]!r} more than once"], id=result.id)
    if isinstance(result, Rejection):
        return replace(result, errors=[path + error[1:] if error.startswith("$") else error
                                       for error in result.errors])
    return result


_JSON_TYPES = {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}

# ----------------------------------------------------------------------------- rendering


def _arguments(call: ToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


def _lead(message: Message) -> str:
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    return out + message.content


def render(message: Message) -> str:
    """The message as a v11+ model writes it: `[THINK]…[/THINK]content[TOOL_CALLS]NAME[ARGS]{…}…`."""
    return _lead(message) + "".join(f"{OPENER}{call.name}{ARGS}{_arguments(call)}" for call in message.tool_calls)


def render_call_id(message: Message) -> str:
    """The message as Mistral Small 3.2 writes it: `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}` per call."""
    return _lead(message) + "".join(f"{OPENER}{call.name}{CALL_ID}{call.id}{ARGS}{_arguments(call)}"
                                    for call in message.tool_calls)


def render_nemo(message: Message) -> str:
    """The message as Mistral Nemo writes it: one `[TOOL_CALLS][{"name", "arguments", "id"}, …]` list."""
    if not message.tool_calls:
        return _lead(message)
    calls = [{"name": call.name, "arguments": call.arguments, "id": call.id} for call in message.tool_calls]
    return _lead(message) + OPENER + json.dumps(calls, ensure_ascii=False)


MISTRAL = FormatSpec(
    name="mistral",
    aliases=("magistral", "devstral"),
    reasoning=(THINK, THINK_TAGS),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=ToolCalls()),),
    render=render,
    # Mistral's chat templates accept only ids of nine alphanumerics.
    id_factory=random_id("", 9),
    # Control tokens of the tekken vocabularies (Magistral 2506's <think> is plain text).
    # [ARGS] and [CALL_ID] are tokens too, but inner markers are read as text (SECURITY.md).
    special=(*THINK, OPENER),
    detect=((OPENER,),),
    detect_turns=("[INST]",),
)

FORMATS = (MISTRAL,)
