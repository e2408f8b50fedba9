"""One incremental JSON value reader: where a JSON value that streams in pieces ends, checked as
RFC 8259 JSON while it is read, or the first character that cannot continue it.

`JsonValueReader` reads one top-level value; `JsonValueScanner` is the envelope scanner built on
it (`scanning.EnvelopeScanner`): an optional lead (a regex matched at the body's start, partially
while it streams), then the value; the envelope ends where the value ends, or at a stop written
between JSON tokens; from a lead or value that cannot be a call, it runs to the next stop (or
the end). Mistral's `[TOOL_CALLS]` body is read with it (`FirstCharacter(value_lead=…)`).

Cost: the value is walked once, with regex jumps over whitespace, string contents, numbers and
literals; containers that end inside the piece at hand are skimmed by the C decoder (failed tries
are capped at twice the piece, so the decoder reads each character at most four times and the
walk once). O(nesting depth) state; the body is never buffered. The only text looked at again is a
held-back prefix of a stop (shorter than the longest stop), and, while the lead has not ended, the
lead (at most `LEAD_LIMIT` characters: a longer one is not a call's).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Callable
from functools import cache
from typing import Any

import regex  # type: ignore[import-untyped]

from .scanning import (
    Decoded,
    Delimiters,
    Marks,
    ScanResult,
    ValueReader,
    delimiters_of,
    hold_merged,
    marks_in,
    read_value,
)

LEAD_LIMIT = 256  # characters a lead may take before the value starts

# The end of a run of plain string content: a quote, an escape or a control character. \x00 may
# stand in a string: in token-aware mode the engine shows scanners plain-text look-alikes of special
# tokens quoted inside a value as NULs. A real NUL there still fails the grammar's strict decoder.
_STRING_STOP = re.compile(r'["\\\x01-\x1f]')
_STRING_RUN = re.compile(r'(?:[^"\\\x01-\x1f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')  # with whole escapes
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = frozenset("0123456789.eE+-")  # after a number: it may still go on (or be broken)
_DIGITS = re.compile(r"[0-9]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = frozenset('"\\/bfnrt')
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_CLOSER_OF = {"{": "}", "[": "]"}

# What comes next between tokens, and the token being read.
_E_VALUE, _E_VALUE_OR_CLOSE, _E_KEY, _E_KEY_OR_CLOSE, _E_COLON, _E_NEXT = range(6)
_T_NONE, _T_STRING, _T_ESCAPE, _T_UNICODE, _T_NUMBER, _T_LITERAL = range(6)
# Number states (RFC 8259 grammar); the terminal ones may end the number.
_N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_E_SIGN, _N_EXP = range(8)
_N_TERMINAL = frozenset((_N_ZERO, _N_INT, _N_FRAC, _N_EXP))

# What `JsonValueReader.read` found.
MORE, DONE, STOP, BROKEN = "more", "done", "stop", "broken"


# Where a run of these ends (each pattern matches the empty string, so `match` never fails).
_string_stop = _STRING_STOP.search  # what ends a run of plain string content
_string_run_at = _STRING_RUN.match
_space_at = _JSON_SPACE.match
_digits_at = _DIGITS.match


class JsonValueReader:
    """Reads one JSON value in pieces, whatever the chunking. `read(text, pos)` returns
    `(what, at)`: `DONE` (the value ends at `at`), `STOP` (a stop starts at `at`, between tokens),
    `BROKEN` (`text[at]` cannot continue JSON) or `MORE` (`text[at:]` must be given again with
    more text after it: it could start a stop)."""

    def __init__(self, stops: Delimiters) -> None:
        self._stops = stops
        self._stop_firsts = frozenset(s[0] for s in stops.strings)
        self._stack: list[str] = []
        self._expect = _E_VALUE
        self._token = _T_NONE
        self._key_string = False  # the string being read is an object key
        self._hex = 0  # hex digits read of a \u escape
        self._number = _N_MINUS
        self._literal = ""
        self._literal_at = 0
        self._skim_budget = 0  # characters failed decoder tries may still cost in this piece
        # The body kind's reader of a top-level container skimmed whole, and what it read there
        # (`scanning.Decoded`, for the kind's parse); below the top level only the end is found.
        self.value_reader: ValueReader | None = None
        self.decoded: Decoded | None = None
        # Progressive mode: where the structure is (`scanning.Marks`), positions in the text read.
        self.marks: list[int] | None = None
        self.limit = -1  # the depth recorded down to (-1: nothing)

    def read(self, text: str, pos: int) -> tuple[str, int]:
        self._skim_budget = 2 * (len(text) - pos)
        n = len(text)
        marks, limit = self.marks, self.limit
        while pos < n:
            token = self._token
            if token == _T_STRING:
                pos = _string_run_at(text, pos).end()  # type: ignore[union-attr]
                if pos == n:
                    break
                char = text[pos]
                if char == '"':
                    if 0 < len(self._stack) <= limit:
                        marks.append(pos)  # type: ignore[union-attr]
                    pos += 1
                    self._token = _T_NONE
                    if self._key_string:
                        self._expect = _E_COLON
                    elif self._value_done():
                        return DONE, pos
                elif char == "\\":
                    pos += 1
                    self._token = _T_ESCAPE
                else:  # a control character
                    return BROKEN, pos
                continue
            if token == _T_ESCAPE:
                char = text[pos]
                if char == "u":
                    self._token, self._hex = _T_UNICODE, 0
                elif char in _ESCAPES:
                    self._token = _T_STRING
                else:
                    return BROKEN, pos
                pos += 1
                continue
            if token == _T_UNICODE:
                if text[pos] not in _HEX:
                    return BROKEN, pos
                pos += 1
                self._hex += 1
                if self._hex == 4:
                    self._token = _T_STRING
                continue
            if token == _T_NUMBER:
                pos, broken = self._read_number(text, pos)
                if broken:
                    return BROKEN, pos
                if self._token == _T_NUMBER:  # the text ended inside it
                    break
                if self._value_done():
                    return DONE, pos
                continue
            if token == _T_LITERAL:
                if text[pos] != self._literal[self._literal_at]:
                    return BROKEN, pos
                pos += 1
                self._literal_at += 1
                if self._literal_at == len(self._literal):
                    self._token = _T_NONE
                    if self._value_done():
                        return DONE, pos
                continue
            # Between tokens.
            pos = _space_at(text, pos).end()  # type: ignore[union-attr]
            if pos == n:
                break
            char = text[pos]
            if char in self._stop_firsts:
                if self._stops.starting(text, pos) is not None:
                    return STOP, pos
                if self._stops.is_prefix(text, pos):
                    return MORE, pos
            expect = self._expect
            if expect <= _E_VALUE_OR_CLOSE:
                if char in "{[":
                    depth = len(self._stack)
                    # Skimmed only where nothing inside it is recorded.
                    end = self._skim_container(text, pos) if depth >= limit else None
                    if end is not None:
                        if depth == limit:
                            marks += (pos, end - 1)  # type: ignore[operator]
                        if self._value_done():
                            return DONE, end
                        pos = end
                        continue
                    if depth <= limit:
                        marks.append(pos)  # type: ignore[union-attr]
                    self._stack.append(char)
                    self._expect = _E_KEY_OR_CLOSE if char == "{" else _E_VALUE_OR_CLOSE
                elif char == '"':
                    if 0 < len(self._stack) <= limit:
                        marks.append(pos)  # type: ignore[union-attr]
                    self._token, self._key_string = _T_STRING, False
                elif char in _LITERALS and text.startswith(_LITERALS[char], pos):  # whole in view
                    pos += len(_LITERALS[char])
                    if self._value_done():
                        return DONE, pos
                    continue
                elif char == "-" or "0" <= char <= "9":
                    number = _NUMBER.match(text, pos)
                    if number is not None and number.end() < n and text[number.end()] not in _NUMBER_CHARS:
                        pos = number.end()
                        if self._value_done():
                            return DONE, pos
                        continue
                    self._token = _T_NUMBER
                    self._number = _N_MINUS if char == "-" else _N_ZERO if char == "0" else _N_INT
                elif char in _LITERALS:
                    self._token = _T_LITERAL
                    self._literal, self._literal_at = _LITERALS[char], 1
                elif char == "]" and expect == _E_VALUE_OR_CLOSE:
                    if self._close(marks, pos):
                        return DONE, pos + 1
                else:
                    return BROKEN, pos
            elif expect <= _E_KEY_OR_CLOSE:
                if char == '"':
                    if len(self._stack) <= limit:
                        marks.append(pos)  # type: ignore[union-attr]
                    end = _string_run_at(text, pos + 1).end()  # type: ignore[union-attr]
                    if end < n and text[end] == '"':  # the whole key in view
                        if len(self._stack) <= limit:
                            marks.append(end)  # type: ignore[union-attr]
                        self._expect = _E_COLON
                        pos = end + 1
                        continue
                    self._token, self._key_string = _T_STRING, True
                elif char == "}" and expect == _E_KEY_OR_CLOSE:
                    if self._close(marks, pos):
                        return DONE, pos + 1
                else:
                    return BROKEN, pos
            elif expect == _E_COLON:
                if char != ":":
                    return BROKEN, pos
                if len(self._stack) <= limit:
                    marks.append(pos)  # type: ignore[union-attr]
                self._expect = _E_VALUE
            elif char == ",":
                if len(self._stack) <= limit:
                    marks.append(pos)  # type: ignore[union-attr]
                self._expect = _E_KEY if self._stack[-1] == "{" else _E_VALUE
            elif char == _CLOSER_OF[self._stack[-1]]:
                if self._close(marks, pos):
                    return DONE, pos + 1
            else:
                return BROKEN, pos
            pos += 1
        return MORE, n

    def in_plain_string(self, text: str, pos: int) -> bool:
        """Whether `text[pos:]` is all plain content of the string being read (nothing to do)."""
        return self._token == _T_STRING and _string_stop(text, pos) is None

    def _skim_container(self, text: str, pos: int) -> int | None:
        """Where the container opening at `text[pos]` ends, when the C decoder reads it whole in
        this piece; None otherwise. A failed try (the container goes on past the piece, or is not
        JSON) costs up to the rest of the piece, so failed tries stop once they have cost twice
        the piece. The top-level container is first read by the body kind's `value_reader`, once
        (what it read is kept in `decoded`); where that fails, the decoder finds only its end."""
        if self._skim_budget <= 0 or text.find(_CLOSER_OF[text[pos]], pos) < 0:  # cannot end in view
            return None
        if self.value_reader is not None and not self._stack:
            found = self._stops.search(text, pos)  # the value's end, when nothing but space is between
            decoded = read_value(self.value_reader, text, pos, len(text) if found is None else found.start())
            if decoded is not None:
                self.decoded = decoded
                return decoded.end
        try:
            end: int = DECODER.raw_decode(text, pos)[1]  # where it ends; read strictly later
        except (ValueError, RecursionError):
            self._skim_budget -= len(text) - pos
            return None
        return end

    def _close(self, marks: list[int] | None, pos: int) -> bool:
        """Close the innermost container (its closer at `pos`); True when that ends the whole value."""
        if len(self._stack) <= self.limit + 1:
            marks.append(pos)  # type: ignore[union-attr]
        self._stack.pop()
        return self._value_done()

    def _value_done(self) -> bool:
        """A value ended: True when it was the top-level one."""
        if not self._stack:
            return True
        self._expect = _E_NEXT
        return False

    def _read_number(self, text: str, pos: int) -> tuple[int, bool]:
        """Advance through a number; `_token` stays `_T_NUMBER` while it can go on. True: broken."""
        n = len(text)
        while pos < n:
            state = self._number
            if state in (_N_INT, _N_FRAC, _N_EXP):
                pos = _digits_at(text, pos).end()  # type: ignore[union-attr]
                if pos == n:
                    return pos, False
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
                return pos, False
            else:
                return pos, True
            pos += 1
        return pos, False


def broken_before_end(text: str, pos: int) -> bool:
    """Whether the JSON value starting at `text[pos]` is already invalid before the text ends (a
    character that cannot continue it), as opposed to cut off. One walk; for a body whose envelope
    the output cut off, read once at its end."""
    return JsonValueReader(delimiters_of(())).read(text, pos)[0] == BROKEN


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Only for finding where a container ends (module-level so that tests can count its work). It
# rejects NaN and Infinity as the walk does, so that a value ends at the same place whether the
# decoder skims it or the walk reads it (control characters in strings it rejects too: the walk
# then reads them, and takes the NULs of token-aware look-alikes).
DECODER: Any = json.JSONDecoder(parse_constant=_no_constant)

_LEAD, _VALUE, _BROKEN, _DONE = range(4)


@cache
def _lead_pattern(lead: str) -> Any:
    return regex.compile(lead)


class JsonValueScanner:
    """An envelope scanner: the body is a lead (the regex `lead`, matched at its start) then one JSON
    value, checked as JSON while it streams. The envelope ends where the value ends, or at a stop
    written between tokens (left for the enclosing region); from the first character that cannot
    continue the lead or the value (`broken`), it runs to the next stop or the end.

    A lead must end with a lookahead for the value's first character, so that a complete match
    never ends at the end of the text. With `reader_after` (given the lead and the value's first
    character, the body kind's `ValueReader`, or None), a top-level container the C decoder skims
    whole is read by that reader, and what it read is kept in `decoded` for the kind's parse.
    Cost: see the module."""

    def __init__(self, stops: tuple[str, ...], lead: str = "",
                 reader_after: Callable[[str], ValueReader | None] | None = None) -> None:
        self._stops = delimiters_of(stops)
        self._lead = _lead_pattern(lead) if lead else None
        self._state = _LEAD if lead else _VALUE
        self._value = JsonValueReader(self._stops)
        self._origin = 0  # where the last scan started
        self._reader_after = reader_after

    @property
    def decoded(self) -> Decoded | None:
        """What the body kind's reader read in the top-level value skimmed (`scanning.Decoded`)."""
        return self._value.decoded

    def record(self, depth: int) -> Marks:
        """Progressive mode: note where the value's structure is, for the streamer (`scanning.Marks`)."""
        self._value.marks, self._value.limit = [], depth
        return self

    def take(self, piece: str) -> list[int]:
        marks, self._value.marks = self._value.marks or [], []
        return marks_in(marks, self._origin, piece)

    @property
    def broken(self) -> bool:
        """The body stopped being a call: it runs to the next stop or the end."""
        return self._state == _BROKEN

    def scan(self, text: str, pos: int) -> ScanResult:
        value = self._value
        if value.marks is not None:
            value.marks.clear()
            self._origin = pos
        if self._state == _LEAD:
            assert self._lead is not None
            match = self._lead.match(text, pos, partial=True)
            if match is None or match.end() - pos > LEAD_LIMIT:
                self._state = _BROKEN
            elif match.partial:
                return ScanResult(pos)  # the lead goes on: give it again with more
            else:
                self._state, pos = _VALUE, match.end()
                if self._reader_after is not None:  # the lead ends with a lookahead: text[pos] is there
                    value.value_reader = self._reader_after(match.group() + text[pos])
        if self._state == _VALUE:
            if value.in_plain_string(text, pos):  # the common case while a value streams
                return ScanResult(len(text))
            what, at = value.read(text, pos)
            if what == MORE:
                return ScanResult(at)
            if what != BROKEN:
                self._state = _DONE
                return ScanResult(at, at)
            self._state, pos = _BROKEN, at
        if self._state == _DONE:
            return ScanResult(pos, pos)
        found = self._stops.search(text, pos)
        if found is not None:
            self._state = _DONE
            return ScanResult(found.start(), found.start())
        return ScanResult(max(pos, self._stops.held_from(text)))


_WHITESPACE = " \t\n\r"


class ObjectText:
    """Progressive mode: the raw text of one JSON object as it arrives, up to its closing brace,
    read from the marks of the walk that finds the envelope's end (`scanning.Marks`), so that the
    body is walked once.

    `feed(text, start, marks)`: `text[start:]` is object text (the first time, `start` is the
    object's `{`); `marks` are the structure's positions in `text`. It returns what is certain to be
    part of the object's text — its trailing whitespace held back until more text follows — and
    sets `done` once the brace closes; nothing after it is returned. The text returned joins to
    exactly the object's raw text, which is the `arguments_json` the final read keeps. Cost: one
    step per mark; O(1) state."""

    __slots__ = ("_depth", "_pending_ws", "done")

    def __init__(self) -> None:
        self._depth = 0
        self._pending_ws: list[str] = []  # whitespace at the end of the object text so far
        self.done = False

    def feed(self, text: str, start: int, marks: list[int]) -> str:
        if self.done:
            return ""
        end = len(text)
        for at in marks[bisect_left(marks, start):]:
            char = text[at]
            if char in "[{":
                self._depth += 1
            elif char in "]}":
                self._depth -= 1
                if self._depth <= 0:
                    self.done = True
                    end = at + 1
                    break
        return self._certain(text[start:end])

    def _certain(self, text: str) -> str:
        end = len(text.rstrip(_WHITESPACE))
        if not end:
            hold_merged(self._pending_ws, text)
            return ""
        out = "".join(self._pending_ws) + text[:end]
        self._pending_ws = [text[end:]] if end < len(text) else []
        return out
