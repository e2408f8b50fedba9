"""Several `tagged_params` calls in one envelope body: dots's `<dots_function_call>` block of
`<invoke name=…>` elements, where the block is the envelope (its body's first character chooses
between these invokes and a JSON call object: `first_character`).

Rules, for every format that declares it:
- The body holds calls each opened by `call_open` (whitespace around them is framing). A call runs
  to its dialect's `call_close` (found wherever it is, as the dialect's own scanner does), or, when
  that is missing, to the next `call_open` or the end of the body; it is then read by the dialect
  (`tagged_params.parse_call`) exactly as a lone envelope of it would be: a call the body's end cut
  off is `truncated` unless the dialect's `end_tag_optional` accepts it.
- Text other than whitespace after a call's closer makes that call `invalid_json`; its raw text
  runs to the next `call_open` (FORMATS.md, fourth-wave Decision 12). Each call is checked on its own.
- Progressive mode: each call is streamed by the dialect's streamer as it arrives, numbered in order.

Cost: one delimiter search over the body while it streams, and one `str.find` pass when it ends;
each call is then read once by the dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..grammar_ir import Lit, Repeat, seq
from ..grammar_ir import Node as GrammarNode
from ..scanning import EnvelopeScanner, TagScanner, WalkSource, delimiters_of
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, Rejection, StreamEvent
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet
from .tagged_params import TaggedParams, XmlCallStreamer, parse_call

_SPACE = " \t\r\n"


@dataclass(frozen=True)
class TaggedCalls:
    """Calls of the tagged dialect `call`, each opened by `call_open`, in one body ended by `closers`."""

    call: TaggedParams
    call_open: str  # e.g. "<invoke name="
    closers: tuple[str, ...]

    def scanner(self) -> EnvelopeScanner:
        return TagScanner(self.closers)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> TaggedCallsStreamer:
        return TaggedCallsStreamer(self, tools)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        body, opener, closer = envelope.body, self.call_open, self.call.call_close
        at = body.find(opener)
        if at < 0 or body[:at].strip(_SPACE):
            status = INVALID_JSON if envelope.complete else TRUNCATED
            return [Rejection(status, [f"the block holds text that is not a {self.call.call_tag} call"])]
        results: list[CallResult] = []
        while at >= 0:
            head = at + len(opener)
            following = body.find(opener, head)
            stop = following if following >= 0 else len(body)
            end = body.find(closer, head, stop)  # each character is searched once by each `find`
            closed = end >= 0
            if not closed:
                end = stop
            after = body[end + len(closer):stop] if closed else ""
            raw = body[at:stop].rstrip(_SPACE)
            if after.strip(_SPACE):
                results.append(Rejection(INVALID_JSON, [f"text after {closer}: {after.strip(_SPACE)[:30]!r}"], raw))
            else:
                part = Envelope(opener, body[head:end], closer if closed else "",
                                closed or following >= 0 or envelope.complete, True)
                results += [_with_raw(result, raw) for result in parse_call(self.call, part, tools)]
            at = following
        return results

    # ----------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Any) -> GrammarNode:
        """A call as the dialect writes it, after its opener."""
        return self.call.call_grammar(name, parameters)

    def body_grammar(self, calls: GrammarNode, many: bool) -> GrammarNode:
        """A newline, then one call (or, `many`, one or more), each opened and closed and followed by a
        newline, then the envelope's closer."""
        one = seq(Lit(self.call_open), calls, Lit(self.call.call_close), Lit("\n"))
        return seq(Lit("\n"), Repeat(one, 1, None if many else 1), Lit(self.closers[0]))

    def calls_per_envelope(self) -> int | None:
        return None


def _with_raw(result: CallResult, raw: str) -> CallResult:
    """A rejection of one call of the block carries that call's text (an accepted one, the block's)."""
    if isinstance(result, Rejection) and result.raw is None:
        return Rejection(result.status, result.errors, raw, result.name, result.id)
    return result


class TaggedCallsStreamer:
    """Hands each call's text to a fresh dialect streamer, and numbers its events by the call's place."""

    def __init__(self, kind: TaggedCalls, tools: ToolSet) -> None:
        self._kind = kind
        self._tools = tools
        self._ends = delimiters_of((kind.call_open, kind.call.call_close))
        self._call: XmlCallStreamer | None = None  # the open call's streamer
        self._k = -1
        self._carry = ""

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        text = self._carry + body
        self._carry = ""
        pos = 0
        while pos < len(text):
            match = self._ends.search(text, pos)
            if match is None:
                held = max(self._ends.held_from(text), pos)
                self._into_call(text[pos:held], events)
                self._carry = text[held:]
                return events
            self._into_call(text[pos:match.start()], events)
            if match.group() == self._kind.call_open:
                self._k += 1
                self._call = XmlCallStreamer(self._kind.call, self._tools)
            else:
                self._call = None  # closed: until the next opener nothing is streamed
            pos = match.end()
        return events

    def _into_call(self, text: str, events: list[StreamEvent]) -> None:
        if self._call is None or not text:
            return
        for event in self._call.feed(text):
            if isinstance(event, CallStart):
                events.append(CallStart(self._k, event.name, event.id))
            else:
                events.append(ArgumentsFragment(self._k, event.text))
