"""Progressive-mode readers: what of a call is certain before its envelope closes.

Each walks the body once: regex jumps to the next quote, backslash or bracket, so the cost is
linear in the body and independent of the chunking.
"""

from __future__ import annotations

import json
import re

from .spec import ArgumentsFragment, CallStart, StreamEvent
from .validation import ToolSet

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
