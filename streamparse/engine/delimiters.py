"""The delimiter sets each region of a format searches, built once per format and options.

Built twice in token-aware mode: for ordinary text, without the delimiters that are special
tokens (so that text spelled by ordinary tokens never opens anything), and in full, for the
moment a special token arrives.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..scanning import Delimiters
from ..spec import FormatSpec


class DelimiterSets:
    """What the start, the text regions and each wrapper of one format look for, and what each
    delimiter found opens."""

    def __init__(self, spec: FormatSpec, extract: bool, exclude: frozenset[str]) -> None:
        def keep(strings: Sequence[str]) -> list[str]:
            return [s for s in strings if s not in exclude]

        # An opener declared in several pairs is closed by any of their closers (K2 Horizon's
        # `<ifm|think_fast>` by `</ifm|think_fast>` or `</ifm|think>`).
        closer_of: dict[str, tuple[str, ...]] = {}
        for opener, closer in spec.reasoning:
            closer_of[opener] = (*closer_of.get(opener, ()), closer)
        # What each delimiter found opens or closes (the same for every parser of the format).
        self.closer_of = closer_of
        self.reasoning_closers = tuple(dict.fromkeys(closer for closers in closer_of.values() for closer in closers))
        self.envelope_of = {opener: envelope for envelope in spec.envelopes for opener in envelope.openers}
        self.wrapper_of = {opener: wrapper for wrapper in spec.wrappers for opener in wrapper.openers}
        self.reasoning_openers = Delimiters(keep(list(closer_of)))
        # `FormatSpec.leading_framing`: dropped at the very start, before a reasoning opener.
        self.leading = Delimiters(keep(list(spec.leading_framing)))
        # In token-aware mode a call starts only at a special token: an opener that is ordinary text
        # (Qwen3-Coder's `<function=`) counts only inside a wrapper that a special token opened.
        openers = [o for e in spec.envelopes for o in e.openers] + [o for w in spec.wrappers for o in w.openers]
        self.call_openers = Delimiters([] if exclude else openers)
        # What content searches: the call openers and the format's framing markers (dropped).
        self.framing = frozenset(keep(list(spec.framing)))
        self.spaced_openers = frozenset(o for e in spec.envelopes if e.after_space for o in e.openers)
        self.trailing_framing = frozenset(keep(list(spec.trailing_framing)))
        self.in_content = Delimiters([*self.call_openers.strings, *self.framing, *self.trailing_framing])
        # `FormatSpec.reasoning_reopens`: the reasoning openers are searched in content too.
        self.reopeners = frozenset(keep(list(closer_of)) if spec.reasoning_reopens else ())
        if self.reopeners:
            self.in_content = Delimiters([*self.in_content.strings, *self.reopeners])
        # Anchored envelopes (`FormatSpec.anchors`): the markers after which one may start, and the
        # characters that may start one anywhere in content, are searched in content too.
        self.anchor_marks = frozenset(keep([m for a in spec.anchors for m in a.after])
                                      + [a.trigger for a in spec.anchors if a.trigger])
        if self.anchor_marks:
            guards = {a.trigger: a.trigger_next for a in spec.anchors if a.trigger and a.trigger_next}
            self.in_content = Delimiters([*self.in_content.strings, *self.anchor_marks], guards)
        # Delimiters that begin with whitespace (an imported template's ` to=self<|message|>`): at the start
        # they are looked for inside the leading whitespace (no declared format has one).
        self.spaced_start = any(s[:1].isspace() for s in (*self.reasoning_openers.strings, *self.in_content.strings))
        # Content after an answer opener that was framing: its closer is searched too.
        answer = spec.framing_after_reasoning
        self.in_answer = (Delimiters([*self.in_content.strings, *keep(answer[1:])], self.in_content.guards) if answer
                          else self.in_content)
        self.trailers = Delimiters(keep([c for w in spec.wrappers for c in w.closers]))
        self.wrappers = {id(w): Delimiters(keep([o for e in spec.envelopes for o in e.openers] + list(w.closers)
                                                + list(w.framing)))
                         for w in spec.wrappers}
        # Openers searched inside reasoning: every call opener when calls are extracted from it or end
        # it (`extract`: `FormatSpec.ends_reasoning_at_calls` for the parser's options), else none.
        self._in_reasoning = tuple(openers) if extract or spec.calls_end_reasoning else ()
        self._reasoning_framing = tuple(self.framing) if spec.framing_in_reasoning else ()
        # Headed messages (`FormatSpec.messages`): what the text outside messages, a header and a body search.
        messages = spec.messages
        outside = [*messages.openers, *messages.marker_headers, *messages.terminators] if messages else []
        self.message_outside = Delimiters(keep(outside + ([messages.lead] if messages and messages.lead_opens_headers
                                                          else [])))
        self.message_header = Delimiters(keep([*outside, *([messages.header_end] if messages.header_end else [])]
                                              if messages else []))
        ends = [*messages.terminators, *messages.marker_headers,
                *(messages.openers if messages.openers_end_bodies else ())] if messages else []
        self.message_body = Delimiters(keep(ends))
        # A reasoning body also searches the lead when a call header may end it (`call_headers_end_reasoning`).
        leads = [messages.lead] if messages and messages.call_headers_end_reasoning else []
        self.message_reasoning_body = Delimiters(keep([*ends, *leads])) if leads else self.message_body
        self._exclude = exclude
        self._reasoning: dict[tuple[str, ...], Delimiters] = {}

    def reasoning(self, closers: tuple[str, ...]) -> Delimiters:
        found = self._reasoning.get(closers)
        if found is None:
            extra = self._in_reasoning if self.call_openers else ()
            found = self._reasoning[closers] = Delimiters([c for c in closers if c not in self._exclude] + [*extra]
                                                          + [*self._reasoning_framing])
        return found


_BUILT: dict[tuple[int, bool, frozenset[str]], tuple[FormatSpec, DelimiterSets]] = {}


def delimiter_sets(spec: FormatSpec, extract: bool, exclude: frozenset[str]) -> DelimiterSets:
    """Built once per format and options, not per parser: a server makes a parser per request.

    Kept by the spec's identity (hashing a `FormatSpec` hashes every field, a microsecond per
    parser); the spec is kept with its sets, so its id cannot be reused while the entry lives."""
    key = (id(spec), extract, exclude)
    found = _BUILT.get(key)
    if found is None or found[0] is not spec:
        if len(_BUILT) >= 128:
            _BUILT.clear()
        found = _BUILT[key] = (spec, DelimiterSets(spec, extract, exclude))
    return found[1]
