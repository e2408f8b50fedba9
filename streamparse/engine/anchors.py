"""Anchored envelopes: calls recognised by where they start and how they begin, not by a delimiter.

A format declares them as `FormatSpec.anchors` (`spec.AnchorSpec`): Llama 3's JSON call objects
at the start of the output or right after `<|python_tag|>`, pythonic `[NAME(…)]` lists wherever
they start. At such a position the text is held back only while it could still become the
anchor's lead (a bounded regular expression, matched with `partial=True`); then either an
envelope opens there (the lead is the start of its body, read by the anchor's body kind and its
scanner, like any envelope) or the text is content.

An anchored envelope that ends is settled only once what follows decides it: whitespace, one
declared separator and framing markers after it belong to its raw text; another envelope of the
same anchor may follow (`separator` declared); with `must_end_output`, any other text makes the
whole envelope content; a body kind that finds no call in it (`parse` returns `[]`) makes it
content too: its text, or the answer the kind reads in it (`spec.AnswerBody`: generic's
`{"response": …}` is the response). Calls that may still become content are sent whole when they settle, in both emit
modes, so progressive mode never takes back a call it started.

Cost: a lead is matched once per candidate position, and re-matched only on the held-back text
(shorter than the lead's bound) when a chunk ends inside it; the whitespace after an envelope is
kept in O(log n) merged pieces (`regions.hold_merged`), never rescanned; an envelope's text that
becomes content is emitted once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import regex  # type: ignore[import-untyped]

from ..scanning import delimiters_of, hold_merged
from ..spec import AnchorSpec, CallResult, Envelope, EnvelopeSpec, FormatSpec, Rejection, calls_and_text
from ..types import INVALID_JSON, TOO_LONG
from .envelopes import OpenEnvelope
from .reading import ParserState

ANCHOR, TRAILING = "anchor", "anchor_trailing"  # parser modes: deciding a position; after an envelope
_CONTENT, _ENVELOPE = "content", "envelope"
_NON_SPACE = re.compile(r"\S")
_SPACE = re.compile(r"[ \t\r\n]+")


class AnchorTable:
    """One format's anchors, by where they are tried; built once per format."""

    def __init__(self, spec: FormatSpec) -> None:
        anchors = spec.anchors
        self.at_start = tuple(a for a in anchors if a.at_start)
        self.after: dict[str, tuple[AnchorSpec, ...]] = {}
        self.by_trigger: dict[str, tuple[AnchorSpec, ...]] = {}
        for anchor in anchors:
            for marker in anchor.after:
                self.after[marker] = (*self.after.get(marker, ()), anchor)
            if anchor.trigger:
                self.by_trigger[anchor.trigger] = (*self.by_trigger.get(anchor.trigger, ()), anchor)
        self.leads = {id(a): regex.compile(a.lead) for a in anchors}
        self.envelopes = {id(a): EnvelopeSpec(openers=(), body=a.body) for a in anchors}


_TABLES: dict[int, tuple[FormatSpec, AnchorTable]] = {}


def anchor_table(spec: FormatSpec) -> AnchorTable:
    """Built once per format (kept by the spec's identity: hashing a FormatSpec hashes every field)."""
    found = _TABLES.get(id(spec))
    if found is None or found[0] is not spec:
        if len(_TABLES) >= 64:
            _TABLES.clear()
        found = _TABLES[id(spec)] = (spec, AnchorTable(spec))
    return found[1]


@dataclass
class _Pending:
    """An anchored envelope that ended, waiting for what follows to decide it."""

    envelope: OpenEnvelope
    finished: Envelope
    tail: list[str] = field(default_factory=list)  # whitespace, separator, framing after it
    separated: bool = False


class Anchors:
    """Per parser: the anchors a held position may still open, and the envelope awaiting a decision."""

    def __init__(self, spec: FormatSpec) -> None:
        self.table = anchor_table(spec)
        self.choices: tuple[AnchorSpec, ...] = ()
        self.pending: _Pending | None = None

    # ------------------------------------------------------------- positions

    def decide(self, parser: ParserState, text: str, pos: int, choices: tuple[AnchorSpec, ...],
               skip: int = 0) -> int:
        """At `text[pos]`: open the first anchor whose lead matches, hold while one still could,
        else it is content (`skip` characters of it emitted, so that a trigger is not found again).
        A content opener of an anchor (`AnchorSpec.content_openers`) there is dropped and content follows."""
        for anchor in choices:
            if anchor.content_openers:
                opener = next((o for o in anchor.content_openers if text.startswith(o, pos)), None)
                if opener is not None:
                    parser._mode = _CONTENT
                    return pos + len(opener)
                if any(len(text) - pos < len(o) and o.startswith(text[pos:]) for o in anchor.content_openers):
                    parser._mode = ANCHOR
                    self.choices = choices
                    return parser._hold(text, pos)
        for anchor in choices:
            match = self.table.leads[id(anchor)].match(text, pos, partial=True)
            if match is None:
                continue
            if match.partial:
                parser._mode = ANCHOR
                self.choices = choices
                return parser._hold(text, pos)
            self._open(parser, anchor, pos)
            return pos
        parser._mode = _CONTENT
        if skip:
            parser._output.emit_text(parser._output.content, text[pos: pos + skip])
        return pos + skip

    def at_mark(self, parser: ParserState, text: str, found: str, at: int, end: int) -> int:
        """Content found a marker after which an anchor may start (dropped), or a trigger character."""
        after = self.table.after.get(found)
        if after is not None:
            parser._mode = ANCHOR
            self.choices = after
            return end
        return self.decide(parser, text, at, self.table.by_trigger[found], skip=len(found))

    def read_position(self, parser: ParserState, text: str, pos: int) -> int:
        """Mode ANCHOR: whitespace (content's to hold), then the lead decides."""
        match = _NON_SPACE.search(text, pos)
        region = parser._output.content
        if match is None:
            parser._output.emit_text(region, text[pos:])
            return len(text)
        start = match.start()
        parser._output.emit_text(region, text[pos:start])
        return self.decide(parser, text, start, self.choices)

    def _open(self, parser: ParserState, anchor: AnchorSpec, pos: int) -> None:
        body = anchor.body
        certain = not (anchor.must_end_output or anchor.may_be_content)
        scanner = body.scanner()
        streamer = body.streamer(parser._tools, scanner) if parser._progressive and certain else None
        parser._return_mode = _CONTENT
        parser._envelope = OpenEnvelope(self.table.envelopes[id(anchor)], "", scanner, streamer, False,
                                        parser._base + pos, anchor=anchor)
        parser._mode = _ENVELOPE

    # ------------------------------------------------------------- after an envelope

    def ended(self, parser: ParserState, closer: str, complete: bool) -> None:
        """The anchored envelope's scanner found its end (or the output ended inside it)."""
        envelope = parser._envelope
        assert envelope is not None
        parser._envelope = None
        finished = Envelope(envelope.opener, "".join(envelope.body), closer, complete, False, envelope.decoded)
        if not complete:
            self._settle(parser, envelope, finished)
            parser._mode = _CONTENT
            return
        self.pending = _Pending(envelope, finished)
        parser._mode = TRAILING

    def read_trailing(self, parser: ParserState, text: str, pos: int) -> int:
        """Mode TRAILING: what follows an anchored envelope decides it."""
        pending = self.pending
        assert pending is not None
        anchor = pending.envelope.anchor
        assert anchor is not None
        separator = anchor.separator
        framing = delimiters_of(tuple(sorted(parser._sets.framing)))
        end = len(text)
        while pos < end:
            space = _SPACE.match(text, pos)
            if space is not None:
                hold_merged(pending.tail, space.group())
                pos = space.end()
                continue
            if separator and not pending.separated:
                if text.startswith(separator, pos):
                    pending.tail.append(separator)
                    pending.separated = True
                    pos += len(separator)
                    continue
                if separator.startswith(text[pos:]):
                    return parser._hold(text, pos)
            marker = framing.starting(text, pos)
            if marker is not None:
                pending.tail.append(marker)
                pos += len(marker)
                continue
            if framing.is_prefix(text, pos):
                return parser._hold(text, pos)
            if self._decide_pending(parser) and separator:
                return self.decide(parser, text, pos, (anchor,))
            return pos
        return end

    def _decide_pending(self, parser: ParserState, at_end: bool = False) -> bool:
        """Text (or the end of the output) follows the pending envelope: settle it or make it content.
        True when it held calls (another envelope of its anchor may follow)."""
        pending = self.pending
        assert pending is not None
        self.pending = None
        parser._mode = _CONTENT
        before = pending.finished
        finished = Envelope(before.opener, before.body, before.closer + "".join(pending.tail), before.complete,
                            before.wrapped, before.decoded)
        anchor = pending.envelope.anchor
        assert anchor is not None
        revert = anchor.must_end_output and not at_end and not pending.envelope.too_long
        return self._settle(parser, pending.envelope, finished, revert)

    def before_text(self, parser: ParserState) -> None:
        """Held-back text is settled as text (a special token follows, or the output ended)."""
        if parser._mode == TRAILING:
            self._decide_pending(parser)
        parser._mode = _CONTENT

    def finish(self, parser: ParserState) -> None:
        if parser._mode == TRAILING:
            self._decide_pending(parser, at_end=True)

    def _settle(self, parser: ParserState, envelope: OpenEnvelope, finished: Envelope, revert: bool = False) -> bool:
        results = [] if revert else self._results(parser, envelope, finished)
        if not results:
            # The content it stands for where its kind says (`spec.AnswerBody`: generic's answer), else its text.
            answer = getattr(envelope.spec.body, "answer", None)
            text = answer(finished) if answer is not None and not revert and not envelope.too_long else None
            parser._output.emit_text(parser._output.content, finished.raw if text is None else text)
            return False
        parser._settler.settle(results, finished, envelope.position)
        return True

    @staticmethod
    def _results(parser: ParserState, envelope: OpenEnvelope, finished: Envelope) -> list[CallResult]:
        if envelope.too_long and finished.complete:
            return [Rejection(TOO_LONG, [
                f"the call was {envelope.length} characters long, more than max_call_chars="
                f"{parser._max_call_chars}; raw holds its first max_call_chars characters"])]
        try:
            results, text = calls_and_text(envelope.spec.body.parse(finished, parser._tools))
            parser._output.emit_text(parser._output.content, text)
            return results
        except RecursionError:
            return [Rejection(INVALID_JSON, ["the call is nested too deeply to be read"])]
        except Exception as error:  # a visitor bug must not end the user's stream
            return [Rejection(INVALID_JSON, [f"internal error reading this call: {error!r}"])]
