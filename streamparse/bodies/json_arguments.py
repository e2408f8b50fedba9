"""Body kind `json_arguments`: the body is one call's arguments, a JSON object, and the call is named
outside the body (by a message header: gpt-oss harmony's ` to=functions.NAME`), so the kind is made
per call with its name (`MessageSpec.call`).

Read once while it streams: `JsonAwareScanner` finds the end (a closer outside JSON strings); in
progressive mode `ArgumentsStreamer` sends the name at once and the object's raw text as it arrives
(exactly the `arguments_json` the final read keeps), its extent read from the scanner's walk; the C
decoder reads the finished body (the object the scanner decoded strictly when it skimmed it whole,
`value_reader`, is used instead: it is not decoded twice).

Rules: the body must be a JSON object (a JSON string holding one is accepted, as in every JSON
format); whitespace around it is framing; other text after it is `invalid_json`. A body the output
cut off is `truncated` when it is an incomplete JSON prefix, `invalid_json` otherwise. With
`unknown_tool_first`, a call to a tool not offered is `unknown_tool` even when its body is not JSON
(built-in tools, whose bodies are not meant to be JSON): an override of the general status order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..calls import arguments_of
from ..json_reader import MORE, JsonValueReader, ObjectText
from ..scanning import (
    TOP,
    JsonAwareScanner,
    Marks,
    ValueReader,
    WalkSource,
    decode_at,
    delimiters_of,
    marks_of,
    whole_value,
)
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent
from ..strict_json import NotStrictJSON
from ..types import INVALID_JSON, TRUNCATED, UNKNOWN_TOOL
from ..validation import ToolSet

_JSON_SPACE = " \t\n\r"
_SPACE_RUN = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class JsonArguments:
    """The `json_arguments` body kind: a named call whose body is its JSON arguments object."""

    name: str
    closers: tuple[str, ...]
    stops: tuple[str, ...] = ()  # end the body, left for the region after it (the next message's opener)
    tag: str = "the call"  # names the call in error messages
    unknown_tool_first: bool = False

    @property
    def value_reader(self) -> ValueReader:
        """What a scanner reads in a complete top-level JSON value it skims, for `parse` (`scanning.Decoded`)."""
        return whole_value

    def scanner(self) -> JsonAwareScanner:
        return JsonAwareScanner(self.closers, self.stops, read=self.value_reader)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> ArgumentsStreamer:
        return ArgumentsStreamer(self.name, marks_of(scanner, TOP))

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        result = self._read(envelope)
        name = self.name.strip()
        if self.unknown_tool_first and isinstance(result, Rejection) and result.status == INVALID_JSON \
                and name and not tools.known(name):
            verdict = tools.check(name, {})
            errors = verdict[1] if verdict is not None else []
            result = Rejection(UNKNOWN_TOOL, [*errors, *result.errors], None, name)
        return [result]

    def _read(self, envelope: Envelope) -> CallResult:
        body = envelope.body
        start = _SPACE_RUN.match(body).end()  # type: ignore[union-attr]  # (`lstrip` would copy the body)
        name = self.name.strip() or None
        if start == len(body):
            if not envelope.complete:
                return Rejection(TRUNCATED, [f"the output ended before the arguments of {self.tag}"], None, name)
            return Rejection(INVALID_JSON, [f"{self.tag} has no arguments"], None, name)
        try:
            value, end = decode_at(body, start, envelope.decoded)
        except NotStrictJSON as error:
            return Rejection(INVALID_JSON, [f"the arguments are not strict JSON: {error.msg}"], None, name)
        except ValueError as error:
            if not envelope.complete and json_prefix(body, start):
                return Rejection(TRUNCATED, [f"the output ended inside the arguments of {self.tag}"], None, name)
            return Rejection(INVALID_JSON, [f"the arguments are not JSON: {error}"], None, name)
        if body[end:].strip(_JSON_SPACE):
            shown = body[end:].lstrip(_JSON_SPACE)[:20]
            return Rejection(INVALID_JSON, [f"unexpected text after the arguments: {shown!r}"], None, name)
        arguments = arguments_of(value, body[start:end])
        if isinstance(arguments, str):
            return Rejection(INVALID_JSON, [f"$: {arguments}"], None, name)
        if name is None:
            return Rejection(INVALID_JSON, [f"{self.tag} names no tool"])
        return ParsedCall(name, arguments[0], arguments[1])


# ----------------------------------------------------------------- an incomplete JSON value

def json_prefix(text: str, pos: int = 0) -> bool:
    """Whether `text[pos:]` is an incomplete JSON value: a proper prefix of some JSON text (read
    with the one incremental JSON reader, which needs more text to go on)."""
    return JsonValueReader(delimiters_of(())).read(text, pos)[0] == MORE


# ----------------------------------------------------------------- progressive mode

_LEAD, _OBJECT, _END = range(3)


class ArgumentsStreamer:
    """Sends the call's name with the first body text, then the arguments object as the raw text the
    model writes (trailing whitespace held back) until it closes, its extent read from the marks of
    the scanner's walk. A body that does not start with `{` (a JSON string, or not JSON) is not
    streamed: the final read sends it whole."""

    def __init__(self, name: str, marks: Marks) -> None:
        self._name = name
        self._marks = marks
        self._started = False
        self._phase = _LEAD
        self._object = ObjectText()

    def feed(self, body: str) -> list[StreamEvent]:
        marks = self._marks.take(body)
        events: list[StreamEvent] = []
        if not self._started:
            self._started = True
            if self._name.strip():
                events.append(CallStart(0, self._name))
            else:
                self._phase = _END
        start = 0
        if self._phase == _LEAD:
            start = len(body) - len(body.lstrip(_JSON_SPACE))
            if start == len(body):
                return events
            if body[start] != "{":
                self._phase = _END
                return events
            self._phase = _OBJECT
        if self._phase == _OBJECT:
            fragment = self._object.feed(body, start, marks)
            if fragment:
                events.append(ArgumentsFragment(0, fragment))
            if self._object.done:
                self._phase = _END
        return events
