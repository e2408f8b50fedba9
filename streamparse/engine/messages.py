"""Headed messages (`FormatSpec.messages`, OpenAI harmony): the readers of the text outside messages,
of a message header, and of a reasoning or content body. A call's body is an ordinary envelope.

The output is a sequence of messages, each a header from an opener up to the header end, then a body
up to a terminator (or the end of output). The header is held, like a delimiter prefix (it is short:
at most `MessageSpec.header_limit` characters), and read once, when it ends, by the format's `route`.
Then the body streams into reasoning or content as deltas, or becomes a call envelope whose opener is
the header (the envelope reader and the body kind `MessageSpec.call` makes do the rest). A header cut
off is framing, or a rejected call when its route says it was one. Content and reasoning bodies
interleave in output order; there is no "reasoning only at the start" here.

Cost: every character is searched once by a compiled alternation (the held-back suffix aside); a
header is joined and routed once; whitespace after a terminator waits in a short list (`hold_merged`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from ..scanning import hold_merged
from ..spec import CALL, CONTENT, REASONING, TEXT, Envelope, EnvelopeSpec, MessageSpec, Rejection
from ..types import TRUNCATED
from .envelopes import ENVELOPE_MODE, OpenEnvelope
from .reading import ParserState
from .regions import Region

OUTSIDE, HEADER, BODY = "outside", "header", "body"
MODES = frozenset((OUTSIDE, HEADER, BODY))
_SPACE = re.compile(r"\s")
_NON_SPACE = re.compile(r"\S")


@dataclass
class MessageState:
    """Where the parser is among the messages: the header read so far, or the region a body goes to."""

    spec: MessageSpec
    at_start: bool = True  # nothing read yet: the lead may continue the prompt's open header
    header: list[str] = field(default_factory=list)
    header_length: int = 0
    order: int = -1  # index in `spec.openers` of the last opener in the header
    lead: bool = False  # the header so far is the lead and ordinary text after it
    position: int = 0  # where the header starts in the output
    region: Region | None = None  # the region of the body being read
    # The reasoning body a header opened inside (`call_headers_end_reasoning`): unless the header routes
    # to a call, its text goes back there and the body goes on.
    within: Region | None = None
    after_terminator: bool = True  # only whitespace since the last terminator (or the start)
    ws: list[str] = field(default_factory=list)  # that whitespace: framing if a header follows
    ws_length: int = 0

    def take_header(self) -> str:
        header = "".join(self.header)
        self.header = []
        self.header_length = 0
        return header

    def drop_ws(self) -> None:
        self.ws.clear()
        self.ws_length = 0


class MessageParser(ParserState, Protocol):
    """The parser as the message readers see it: its state, and theirs (`MessageState`)."""

    _messages: MessageState | None


def _state(parser: MessageParser) -> MessageState:
    state = parser._messages
    assert state is not None
    return state


# ----------------------------------------------------------------- readers (`StreamParser.READERS`)

def read_outside(parser: MessageParser, text: str, pos: int) -> int:
    """Text between messages: content; stray terminators are framing; a header opener opens a header."""
    state = _state(parser)
    if state.at_start and parser._forced and state.spec.forced_open_header:  # the prompt opened reasoning
        state.at_start = False
        _open_header(parser, state.spec.forced_open_header, pos, order=0)
        _route(parser)
        return pos
    if state.at_start and state.spec.opened_by_prompt:  # the prompt ended with the header's opener
        state.at_start = False
        _open_header(parser, "", pos, order=0)
        return pos
    if state.at_start:
        lead = state.spec.lead
        if lead and text.startswith(lead, pos):
            state.at_start = False
            _open_header(parser, lead, pos, order=0, lead=True)
            return pos + len(lead)
        whole = state.spec.header_end if state.spec.header_end_at_start else ""
        if whole and text.startswith(whole, pos):  # the prompt wrote the whole header
            state.at_start = False
            _open_header(parser, "", pos, order=0)
            _route(parser)
            return pos + len(whole)
        if (lead and lead.startswith(text[pos:])) or (whole and whole.startswith(text[pos:])):
            return parser._hold(text, pos)
        state.at_start = False
    delimiters = parser._sets.message_outside
    match = delimiters.search(text, pos)
    if match is None:
        held = max(pos, delimiters.held_from(text))
        _outside_text(parser, text[pos:held])
        return parser._hold(text, held)
    _outside_text(parser, text[pos: match.start()])
    found = match.group()
    if found in state.spec.terminators:
        state.after_terminator = True
    elif found == state.spec.lead:  # `lead_opens_headers`
        _open_header(parser, found, match.start(), order=0, lead=True)
    elif found in state.spec.marker_headers:  # a whole header
        _open_header(parser, found, match.start(), order=0)
        _route(parser)
    else:
        _open_header(parser, found, match.start(), state.spec.openers.index(found))
    return match.end()


def read_header(parser: MessageParser, text: str, pos: int) -> int:
    """A header, held up to its end; an opener that cannot continue it, or a terminator, cuts it off."""
    state = _state(parser)
    spec = state.spec
    delimiters = parser._sets.message_header
    match = delimiters.search(text, pos)
    stop = match.start() if match is not None else max(pos, delimiters.held_from(text))
    if state.lead:
        space = _SPACE.search(text, pos, stop)
        if space is not None:  # the lead and a word, then whitespace: ordinary text, not a header
            state.header.append(text[pos: space.start()])
            _header_is_text(parser)
            return space.start()
    if stop > pos:
        state.header.append(text[pos:stop])
        state.header_length += stop - pos
    if state.header_length > spec.header_limit:
        _header_is_text(parser)
        return stop
    if match is None:
        return parser._hold(text, stop)
    found = match.group()
    if found == spec.header_end:
        _route(parser)
        return match.end()
    if found in spec.marker_headers:
        state.header.append(found)
        _route(parser)
        return match.end()
    if found in spec.openers and spec.openers.index(found) > state.order:
        state.header.append(found)
        state.header_length += len(found)
        state.order = spec.openers.index(found)
        state.lead = False
        return match.end()
    _cut(parser)  # the reader of the text outside messages takes the opener or terminator
    return match.start()


def read_body(parser: MessageParser, text: str, pos: int) -> int:
    """A reasoning or content body, streamed, up to a terminator (or a header opener, `openers_end_bodies`;
    or, in reasoning, a call header, `call_headers_end_reasoning`)."""
    state = _state(parser)
    region = state.region
    assert region is not None
    output = parser._output
    delimiters = parser._sets.message_reasoning_body if region is output.reasoning else parser._sets.message_body
    match = delimiters.search(text, pos)
    if match is None:
        held = max(pos, delimiters.held_from(text))
        output.emit_text(region, text[pos:held])
        return parser._hold(text, held)
    output.emit_text(region, text[pos: match.start()])
    if match.group() == state.spec.lead:  # maybe a call header: held, and the body's text again if not
        state.within = region
        _open_header(parser, match.group(), match.start(), order=0, lead=True)
        return match.end()
    parser._mode = OUTSIDE
    state.after_terminator = True
    end = match.end() if match.group() in state.spec.terminators else match.start()
    if region is parser._output.reasoning:
        parser._ended_reasoning(parser._base + end)
    return end  # a header opener (`openers_end_bodies`) is read again: it opens the next


READERS = {OUTSIDE: read_outside, HEADER: read_header, BODY: read_body}


# ----------------------------------------------------------------- what a header makes

def _outside_text(parser: MessageParser, text: str) -> None:
    """Content, except whitespace after a terminator, which waits: framing if a header follows."""
    if not text:
        return
    state = _state(parser)
    if state.after_terminator:
        if _NON_SPACE.search(text) is None:
            hold_merged(state.ws, text)
            state.ws_length += len(text)
            return
        text = "".join(state.ws) + text
        state.drop_ws()
        state.after_terminator = False
    parser._ended_reasoning(0)  # content before any reasoning (a no-op once reasoning ended)
    parser._output.emit_text(parser._output.content, text)


def _open_header(parser: MessageParser, opener: str, at: int, order: int, lead: bool = False) -> None:
    state = _state(parser)
    state.drop_ws()
    state.header = [opener]
    state.header_length = len(opener)
    state.order = order
    state.lead = lead
    state.position = parser._base + at
    parser._mode = HEADER


def _header_is_text(parser: MessageParser) -> None:
    """What looked like a header is not one (the lead, ordinary text; a header past the limit): content,
    or the text of the body it was read in."""
    state = _state(parser)
    state.lead = False
    header = state.take_header()
    if _back_to_body(parser, header):
        return
    parser._mode = OUTSIDE
    _outside_text(parser, header)


def _back_to_body(parser: MessageParser, text: str) -> bool:
    """A header read inside a body that is no call header: its text is the body's, which goes on."""
    state = _state(parser)
    region, state.within = state.within, None
    if region is None:
        return False
    parser._output.emit_text(region, text)
    state.region = region
    parser._mode = BODY
    return True


def _route(parser: MessageParser) -> None:
    """The header is complete: its route says where the body goes."""
    state = _state(parser)
    header = state.take_header()
    route = state.spec.route(header, True)
    if route.region != CALL and _back_to_body(parser, header + state.spec.header_end):
        return
    state.within = None
    if route.region != REASONING:
        parser._ended_reasoning(0)  # an answer or a call before any reasoning: none came first
    if route.region == TEXT:
        parser._mode = OUTSIDE
        _outside_text(parser, header + state.spec.header_end)
        return
    if route.region == CALL:
        _open_call(parser, header + state.spec.header_end, route.name)
        return
    state.region = parser._output.reasoning if route.region == REASONING else parser._output.content
    parser._mode = BODY


def _open_call(parser: MessageParser, opener: str, name: str) -> None:
    """A call message: an envelope whose opener is the header and whose body the format's call kind reads.
    The header counts towards `max_call_chars`, so a rejected call's raw text stays within the limit."""
    state = _state(parser)
    kind = state.spec.call(name)
    scanner = kind.scanner()
    streamer = kind.streamer(parser._tools, scanner) if parser._progressive else None
    parser._envelope = OpenEnvelope(EnvelopeSpec((), kind), opener, scanner, streamer, wrapped=False,
                                    position=state.position, length=len(opener))
    parser._return_mode = OUTSIDE
    parser._mode = ENVELOPE_MODE
    state.after_terminator = True  # for the text after the call's terminator


def _cut(parser: MessageParser) -> None:
    """A header cut off (by the end of output, a terminator, another header): framing, or a rejected call."""
    state = _state(parser)
    header = state.take_header()
    state.lead = False
    if _back_to_body(parser, header):  # a body's text, which what cut it off ends
        parser._mode = OUTSIDE
        state.after_terminator = True
        return
    parser._mode = OUTSIDE
    state.after_terminator = True
    route = state.spec.route(header, False)
    if route.region == CONTENT:  # text no header end followed: content, without its opener
        opener = next((o for o in state.spec.openers if header.startswith(o)), "")
        parser._output.emit_text(parser._output.content, header[len(opener):])
        return
    if route.region == TEXT:
        _outside_text(parser, header)
        return
    if route.region != CALL:
        return
    error = f"the message header was cut off before {state.spec.header_end}"
    rejection = Rejection(TRUNCATED, [error], None, route.name.strip() or None)
    parser._settler.settle([rejection], Envelope(header, "", "", complete=False, wrapped=False), state.position)


# ----------------------------------------------------------------- hooks the parser calls

def settle_carry(parser: MessageParser, carry: str) -> None:
    """Held-back text nothing more can extend: header text, body text, or text outside messages."""
    state = _state(parser)
    if parser._mode == HEADER:
        state.header.append(carry)
        state.header_length += len(carry)
    elif parser._mode == BODY:
        assert state.region is not None
        parser._output.emit_text(state.region, carry)
    else:
        state.at_start = False
        _outside_text(parser, carry)


def end_of_output(parser: MessageParser) -> None:
    """A header the output ended in is cut off."""
    if parser._mode == HEADER:
        _cut(parser)


def held_back(parser: MessageParser) -> int:
    """What may still be emitted: a delimiter prefix and whitespace whose role is unknown. A header
    being read is not counted, like an envelope's opener: it becomes framing or a call's opener, and
    content only when it runs past `header_limit` (which bounds it)."""
    state = _state(parser)
    if parser._mode == HEADER:  # (one read inside a body may yet be the body's text)
        return state.header_length if state.within is not None else 0
    if parser._mode == BODY:
        assert state.region is not None
        return len(parser._carry) + state.region.pending_length
    return len(parser._carry) + parser._output.content.pending_length + state.ws_length
