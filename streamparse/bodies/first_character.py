"""Body kind `first_character`: the body is read by one of several declared kinds, chosen by how it
begins after whitespace (LFM2: `[NAME(` is a pythonic list, `{` or `[` then `{` is JSON).

Rules, for every format of this kind:
- `choices` are `(pattern, kind)` pairs, tried in order at the first non-space character of the
  body: the first pattern that matches there chooses the kind (a pattern is a `regex` expression
  matched at that position; an earlier one that could still match holds the choice back while the
  body streams). A body that none matches is `invalid_json` (`truncated` when the output ended
  inside the envelope); an empty one is `invalid_json` (or `truncated`), as for every kind.
- The envelope ends at the first of `closers` (consumed) or `stops` (left for the enclosing region),
  wherever it is, inside a string or not: the closers are special tokens (`<|tool_call_end|>`), an
  unconditional boundary whichever kind reads the body; in token-aware mode a closer written as
  text is not one (the engine blanks look-alikes before the scanner sees them). The chosen kind's
  own scanner is not used; its `parse` reads the body, its streamer streams it.
- With `value_lead` (a grammar and the name of a regex rule in it), the envelope ends instead where
  the JSON value after that lead ends, checked as JSON while it streams, or at a stop written
  between JSON tokens; from a lead or value that cannot be a call it runs to the next stop or the
  end (`json_reader.JsonValueScanner`; Mistral's `[TOOL_CALLS]`). A body the output cut off after
  it could no longer be a call is read as complete (the engine asks the scanner): its call is
  `invalid_json`, not `truncated`.

Cost: the scanner is one delimiter search per chunk (`scanning.TagScanner`; with `value_lead`,
one walk of the body, costed in `json_reader.py`); the streamer holds
the body's first characters until the choice is made (at most `_LEAD_LIMIT` of them; past that it
streams nothing and the calls are sent whole when the envelope ends), then hands every piece to the
chosen kind's streamer once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import regex  # type: ignore[import-untyped]

from ..grammar import load_grammar
from ..grammar_ir import CallLayout
from ..json_reader import JsonValueScanner
from ..scanning import MEMBERS, EnvelopeScanner, Marks, TagScanner, ValueReader, WalkSource, marks_of
from ..spec import BodyKind, BodyResult, CallStreamer, Envelope, Rejection, StreamEvent, empty_body
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet

_SPACE = re.compile(r"[ \t\r\n]*")
_LEAD_LIMIT = 1024


@dataclass(frozen=True)
class FirstCharacter:
    """The `first_character` body kind: `choices` (pattern, kind) by how the body begins after
    whitespace; `closers`/`stops` end the envelope; `tag` names the envelope in error messages."""

    choices: tuple[tuple[str, BodyKind], ...]
    closers: tuple[str, ...]
    tag: str
    stops: tuple[str, ...] = ()
    # (grammar, rule): the envelope ends where the JSON value after this regex rule's lead ends.
    value_lead: tuple[str, str] | None = None

    def scanner(self) -> EnvelopeScanner:
        if self.value_lead is not None:
            return self._value_scanner()
        return TagScanner(self.closers, self.stops)

    def _value_scanner(self) -> JsonValueScanner:
        assert self.value_lead is not None
        grammar, rule = self.value_lead
        return JsonValueScanner(self.stops, load_grammar(grammar)[rule].re.pattern, self._reader_after)

    def _reader_after(self, start: str) -> ValueReader | None:
        """The `ValueReader` of the kind a body that starts with `start` chooses (None if none)."""
        decided, kind = self.choose(start, partial=False)
        return getattr(kind, "value_reader", None) if decided else None

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> FirstCharacterStreamer:
        return FirstCharacterStreamer(self, tools, scanner)

    def parse(self, envelope: Envelope, tools: ToolSet) -> Sequence[BodyResult]:
        body = envelope.body
        empty = empty_body(envelope, self.tag, f"empty {self.tag} envelope")
        if empty is not None:
            return empty
        _, kind = self.choose(body, partial=False)
        if kind is None:
            status = INVALID_JSON if envelope.complete else TRUNCATED
            start = _SPACE.match(body).end()  # type: ignore[union-attr]
            return [Rejection(status, [f"not a call after {self.tag}: {body[start:start + 30]!r}"])]
        return kind.parse(envelope, tools)

    def choose(self, body: str, partial: bool) -> tuple[bool, BodyKind | None]:
        """Whether the kind `body` is read by is decided (with `partial`, more text could still
        change it), and that kind (None when no pattern matches)."""
        start = _SPACE.match(body).end()  # type: ignore[union-attr]
        if start == len(body):
            return not partial, None
        for pattern, kind in self.choices:
            match = _compiled(pattern).match(body, start, partial=partial)
            if match is not None:
                return (False, None) if match.partial else (True, kind)
        return True, None


    # ----------------------------------------------------------------- the layout (grammar_ir)

    def layouts(self) -> tuple[CallLayout, ...]:
        """The kinds this one chooses among that describe their layout (`grammar_ir.CallLayout`)."""
        return tuple(kind for _, kind in self.choices if isinstance(kind, CallLayout))


@cache
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern)



class FirstCharacterStreamer:
    """Progressive mode: the body's first characters are held until they choose a kind, then they
    and every later piece go to that kind's streamer. When the envelope's scanner walks the JSON
    (`value_lead`), the marks of the held text are held with it and handed on, so the chosen
    streamer reads the scanner's walk too."""

    def __init__(self, kind: FirstCharacter, tools: ToolSet, scanner: WalkSource) -> None:
        self._kind = kind
        self._tools = tools
        self._scanner: WalkSource = scanner
        self._marks = marks_of(scanner, MEMBERS) if hasattr(scanner, "record") else None
        self._held: list[str] = []
        self._held_marks: list[int] = []
        self._chosen: CallStreamer | None = None
        self._done = False  # chosen (or given up): nothing more is held

    def feed(self, body: str) -> list[StreamEvent]:
        if self._done:
            return self._chosen.feed(body) if self._chosen is not None and body else []
        offset = len(self._held[0]) if self._held else 0
        if self._marks is not None:
            self._held_marks += [offset + at for at in self._marks.take(body)]
        self._held.append(body)
        text = "".join(self._held)
        self._held = [text]
        decided, kind = self._kind.choose(text, partial=True)
        if not decided:
            if len(text) > _LEAD_LIMIT:  # not decided in view: no progressive fragments
                self._done, self._held, self._held_marks = True, [], []
            return []
        self._done, self._held = True, []
        source = _Replay(self._held_marks, self._marks) if self._marks is not None else self._scanner
        self._held_marks = []
        self._chosen = kind.streamer(self._tools, source) if kind is not None else None
        return self._chosen.feed(text) if self._chosen is not None else []


class _Replay:
    """Marks: those of the held text first, then the scanner's as it goes on."""

    def __init__(self, held: list[int], then: Marks) -> None:
        self._held: list[int] | None = held
        self._then = then

    def take(self, piece: str) -> list[int]:
        if self._held is not None:
            held, self._held = self._held, None
            return held
        return self._then.take(piece)
