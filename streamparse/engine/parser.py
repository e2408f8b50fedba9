"""`StreamParser`: the one incremental machine every entry point drives.

Cost (kept, not hoped for): every character is searched once by a compiled delimiter
alternation or by an envelope scanner. The only text looked at again is the held-back suffix,
shorter than the longest delimiter. Whitespace whose role is unknown waits in its region
(`regions.py`), never rescanned. Envelope bodies are collected as pieces and joined once, when
the envelope ends, for the body kind's grammar.

The parser is in one mode at a time; `READERS` names the reader of each mode. A reader looks at
`text[pos:]`, emits what it makes certain, and returns how far it got (no slicing of the rest).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import regex  # type: ignore[import-untyped]

from ..options import OptionFields, Options, ToolsLike, make_options
from ..registry import get_format
from ..scanning import ScanResult, hold_merged
from ..spec import (
    CallResult,
    Envelope,
    EnvelopeSpec,
    FormatLike,
    FormatSpec,
    ParsedCall,
    Rejection,
    WrapperSpec,
    calls_and_text,
)
from ..types import INVALID_JSON, TOO_LONG, TRUNCATED, Delta, Message, Token, made_message
from ..validation import ToolSet
from . import messages
from .anchors import ANCHOR, TRAILING, Anchors
from .delimiters import DelimiterSets, delimiter_sets
from .envelopes import ENVELOPE_MODE, OpenEnvelope, OpenWrapper
from .input import LookAlikes, Utf8Input
from .regions import Output, Region
from .settle import Settler
from .suffixes import SuffixLearner

if TYPE_CHECKING:
    from typing_extensions import Unpack

_START, _REASONING, _CONTENT, _WRAPPER, _ENVELOPE = "start", "reasoning", "content", "wrapper", ENVELOPE_MODE
_NON_SPACE = re.compile(r"\S")  # the same characters str.strip() keeps

Reader = Callable[["StreamParser", str, int], int]


class StreamParser:
    """Feed model output as it arrives; get `Delta`s; `close()` at the end; read `message`.

    `parse(text)` is this machine fed one chunk, so streamed and final results cannot drift."""

    READERS: ClassVar[dict[str, Reader]]

    # Set by `_setup` from `_fixed_state` (one `__dict__` update), then by the readers.
    options: Options
    _spec: FormatSpec
    _progressive: bool
    _max_call_chars: int | None
    _full: DelimiterSets
    _openers_to_envelope: dict[str, EnvelopeSpec]
    _openers_to_wrapper: dict[str, WrapperSpec]
    _closer_of: dict[str, tuple[str, ...]]
    _all_reasoning_closers: tuple[str, ...]
    _calls_end_reasoning: bool
    _answer_opener: str
    _answer_closer: str
    _specials: frozenset[str]
    _ordinary: DelimiterSets
    _sets: DelimiterSets
    _look_alikes: LookAlikes | None
    _tools: ToolSet
    _closed: bool
    _message: Message | None
    _mode: str
    _forced: bool
    _prompted: bool
    _deferred: bool
    _carry: str
    _received: int
    _reasoning_closers: tuple[str, ...]
    _absorb: bool
    _answer_expected: bool
    _answer_open: bool
    _scanned: int
    _view: str
    _return_mode: str
    _wrapper: OpenWrapper | None
    _envelope: OpenEnvelope | None
    _plain_body: bool
    _lead: Any | None  # a `regex` pattern (the module has no types)
    _lead_pending: bool
    _spaced: frozenset[str]
    _previous: str
    _whole_of: dict[str, Callable[[str, int], tuple[list[CallResult], int, int] | None]]
    _input: Utf8Input
    _output: Output
    _settler: Settler
    _messages: messages.MessageState | None
    _anchored: Anchors | None
    _base: int
    _learning: Any | None  # a `regex` pattern: the output markers that fix the marker suffix
    _learner: SuffixLearner | None
    _reasoning_end: int | None
    _reasoning_from: int | None
    _resumed: bool

    def __init__(
        self,
        format: FormatLike = "hermes",
        tools: ToolsLike = None,
        thinking_forced_open: bool = False,
        **options: Unpack[OptionFields],
    ) -> None:
        self._setup(make_options(format, tools, thinking_forced_open, options))

    @classmethod
    def from_options(cls, options: Options) -> StreamParser:
        """A parser for options checked once (a server shares one `Options` across requests)."""
        if not isinstance(options, Options):
            raise TypeError(f"from_options takes a streamparse.Options, got {type(options).__name__}")
        parser = cls.__new__(cls)
        parser._setup(options)
        return parser

    def _setup(self, options: Options) -> None:
        fixed = _FIXED.get(id(options))
        if fixed is None or fixed[0] is not options:
            fixed = _fixed_state(options)
        self.__dict__.update(fixed[1])  # what depends on the options only, and the starting state
        spec = self._spec
        self._input = Utf8Input()
        self._output = output = Output()
        # Forced-open reasoning that must close to be reasoning waits for its closer (Nemotron v2).
        output.reasoning.deferred = self._deferred
        put_back = self._put_back if options.on_rejected == "content" else None
        self._settler = Settler(self._tools, options.id_factory or spec.id_factory, self._progressive,
                                output, put_back)
        # Headed messages (`FormatSpec.messages`): the message readers take over from the start reader.
        self._messages = messages.MessageState(spec.messages) if spec.messages is not None else None
        # Envelopes recognised by position and pattern (`FormatSpec.anchors`, `anchors.py`).
        self._anchored = Anchors(spec) if spec.anchors else None
        # A marker suffix learned from the output (`MarkerSuffix.learned`): read from text, or in
        # token-aware mode from the special tokens alone (ordinary text never counts there).
        self._learner = SuffixLearner(self._learning) if self._learning is not None and not self._specials else None

    # ----------------------------------------------------------------- public API

    def feed(self, chunk: str | bytes | bytearray | Token | Sequence[Token]) -> list[Delta]:
        """Consume the next piece of output; return what it makes certain.

        A chunk is text, UTF-8 bytes, a `Token` (its text `str` or `bytes`), or a sequence of `Token`s."""
        if chunk.__class__ is str and not self._input.pending and not self._closed:  # the common case, first
            text: str = chunk
            envelope = self._envelope
            if envelope is not None and self._plain_body and not self._carry:
                # Inside a call body with nothing held back: most chunks are all body.
                result = envelope.scanner.scan(text, 0)
                if result.end is None and result.safe == len(text):
                    envelope.body.append(text)
                    envelope.length += len(text)
                    self._scanned += len(text)
                    self._received += len(text)
                    return []
                self._base = self._received
                self._received += len(text)
                self._view = text
                pos = self._envelope_result(envelope, text, 0, result)
                if self._spaced and pos:
                    self._previous = text[pos - 1]  # before what `_run` reads (it may hold all of it back)
                if pos < len(text):
                    self._run(text[pos:])
                return self._output.take()
            self._run(text)
            return self._output.take()
        if self._closed:
            raise ValueError("feed() after close(): this parser has finished; create a new StreamParser")
        if isinstance(chunk, str):
            self._run(self._input.flush() + chunk)
        elif isinstance(chunk, (bytes, bytearray)):
            self._run(self._input.decode(bytes(chunk)))
        elif isinstance(chunk, Token):
            self._token(chunk)
        elif isinstance(chunk, (list, tuple)) and all(isinstance(token, Token) for token in chunk):
            for token in chunk:
                self._token(token)
        else:
            raise TypeError(f"feed() takes str, bytes, a streamparse.Token or a list of Tokens; "
                            f"got {type(chunk).__name__}")
        return self._output.take()

    def _token(self, token: Token) -> None:
        text = token.text
        if isinstance(text, (bytes, bytearray)):
            if not token.special:  # a byte-level token may hold part of a character: decode incrementally
                self._run(self._input.decode(bytes(text)))
                return
            text = bytes(text).decode("utf-8", errors="replace")
        elif not isinstance(text, str):
            raise TypeError(f"Token.text must be str or bytes, got {type(text).__name__}")
        self._run(self._input.flush())
        if token.special and self._learning is not None and self._specials:
            learned = self._learning.fullmatch(text)
            if learned is not None:
                self._learned(learned.group("suffix") or "")
        if token.special and text in self._specials:
            self._special_token(text)
        else:
            self._run(text)

    def _special_token(self, delimiter: str) -> None:
        """A delimiter that arrived as a special token: it counts, and it cannot be split or extended."""
        self._settle_carry()
        self._sets = self._full
        try:
            self._run(delimiter)
            self._settle_carry()
        finally:
            self._sets = self._ordinary

    def close(self) -> list[Delta]:
        """End of generation: settle what was held back and any open envelope."""
        if self._closed:
            raise ValueError("close() was already called on this parser")
        self._run(self._input.flush())
        if self._learner is not None:  # what it held cannot become a marker now: text
            held = self._learner.flush()
            self._learner = None
            self._run(held)
        self._closed = True
        self._finish()
        output = self._output
        self._message = made_message("".join(output.content.parts), "".join(output.reasoning.parts),
                                     list(self._settler.calls), list(self._settler.rejected))
        return output.take()

    def _parse(self, text: str | bytes | Sequence[Token]) -> Message:
        """`parse()`: the message of the whole text fed at once. Nobody reads the deltas of that one
        feed, so none are made (the message is built from the same regions and calls)."""
        self._output.sending = False
        self.feed(text)
        self.close()
        return self.message

    @property
    def message(self) -> Message:
        """The whole message; available after `close()`."""
        if self._message is None:
            raise ValueError("message is available after close(); call close() at the end of generation")
        return self._message

    @classmethod
    def after_reasoning(cls, format: str = "hermes", tools: ToolsLike = None,
                        **options: Unpack[OptionFields]) -> StreamParser:
        """A parser for the raw text after `reasoning_end`, for an engine's tool half that is handed
        only that text: it reads it as the whole parser read it from there (no reasoning opens; what may
        follow a reasoning block, such as Granite's `<response>`, is read as such), so its content and
        calls are those of the whole text."""
        parser = cls(format, tools, False, **options)
        parser._resumed = True
        parser._forced = parser._deferred = parser._output.reasoning.deferred = False
        return parser

    @property
    def reasoning_end(self) -> int | None:
        """Where the reasoning ended in the raw text: the offset (in characters received, after UTF-8
        decoding) just past its closer, or of the call opener or message that ended it; 0 when the
        output opened no reasoning; None while that is not yet known. Always set after `close()`.

        `text[:reasoning_end]` holds the reasoning and its delimiters; `text[reasoning_end:]`, read by
        `StreamParser.after_reasoning`, gives the content and calls of the whole text. The same under
        any chunking; it is known once the text that decides it was fed (nothing is held back for it)."""
        return self._reasoning_end

    def _ended_reasoning(self, at: int) -> None:
        """The reasoning ended at `at` in the output (the first end counts)."""
        if self._reasoning_end is None:
            self._reasoning_end = at

    @property
    def held_back(self) -> int:
        """Characters outside envelopes received but not yet emitted: a possible delimiter prefix,
        whitespace whose role is unknown, and what an open wrapper holds before its first call."""
        if self._closed or self._mode == _ENVELOPE:
            return 0
        if self._mode in messages.MODES:
            return messages.held_back(self)
        held = len(self._carry) + (len(self._learner.held) if self._learner is not None else 0)
        region = self._region()
        if region is not None:
            held += region.pending_length
        if self._wrapper is not None:
            held += self._wrapper.raw_length + self._wrapper.ws_length
        if self._output.reasoning.deferred:
            held += sum(map(len, self._output.reasoning.parts))
        return held

    @property
    def scanned(self) -> int:
        """Characters the engine has looked at so far, counting every re-look at held-back text.

        The work measure behind the linear-time promise: at most the output's length plus, per
        chunk, what was held back (shorter than the longest delimiter)."""
        return self._scanned

    # ----------------------------------------------------------------- driving

    def _run(self, text: str) -> None:
        """Drive the readers over `text`, each from where the last one stopped."""
        learner = self._learner
        if learner is not None:  # the marker suffix is not known yet: the output's first marker fixes it
            self._scanned += len(learner.held)
            text, suffix, after = learner.read(text)
            if suffix is not None:
                self._learner = None
                self._run(text)
                self._learned(suffix)
                text = after
        if not text:
            return
        self._base = self._received - len(self._carry)  # where text[0] is in the output
        self._received += len(text)
        if self._carry:
            text = self._carry + text
            self._carry = ""
        self._scanned += len(text)
        self._view = self._look_alikes.blank(text) if self._look_alikes and self._sets is self._ordinary else text
        readers = self.READERS
        pos = 0
        end = len(text)
        while pos < end:
            pos = readers[self._mode](self, text, pos)
        if self._spaced:
            self._note_previous(text)
        if learner is not None and learner.held and self._carry:
            self._settle_before(learner.held)

    def _settle_before(self, following: str) -> None:
        """The suffix learner holds `following`, a possible marker, so the parser's carry cannot see
        it: where no delimiter can start in the carry and run on into `following`, the carry is text
        now (`<th` before `</arg_value`), and the two hold-backs never add up past one delimiter."""
        if self._mode not in (_START, _CONTENT, _REASONING):
            return
        ahead = self._carry + following
        for at in range(len(self._carry)):
            rest = ahead[at:]
            if any(rest.startswith(delimiter) or delimiter.startswith(rest) for delimiter in self._spec.delimiters):
                return
        self._settle_carry()

    def _learned(self, suffix: str) -> None:
        """The output fixed the marker suffix: from here on the delimiters are spelled with it. What
        was read before held no marker of any spelling, so only the declaration changes (the
        delimiters, and what depends on them); the regions and the mode stay."""
        self._learning = None
        if suffix:
            options = self.options
            learned = _LEARNED.get((id(options), suffix))
            if learned is None or learned[0] is not options:  # the options with the suffix, made once
                learned = (options, options.with_changes(marker_suffix=suffix))
                with _FIXED_LOCK:
                    _LEARNED[(id(options), suffix)] = learned
                    while len(_LEARNED) > _FIXED_SIZE:
                        del _LEARNED[next(iter(_LEARNED))]
            fixed = _FIXED.get(id(learned[1]))
            if fixed is None or fixed[0] is not learned[1]:
                fixed = _fixed_state(learned[1])
            self.__dict__.update({key: fixed[1][key] for key in _DECLARED})

    def _note_previous(self, text: str) -> None:
        """Keep the character before what is held back: the one before the next text read."""
        kept = len(self._carry)
        if len(text) > kept:
            self._previous = text[-kept - 1]

    def _hold(self, text: str, pos: int) -> int:
        """Keep `text[pos:]` until the next chunk shows what it is."""
        self._carry = text[pos:]
        return len(text)

    def _region(self) -> Region | None:
        if self._mode == _CONTENT:
            return self._output.content
        if self._mode == _REASONING:
            return self._output.reasoning
        return None

    def _region_of(self, mode: str) -> Region:
        return self._output.reasoning if mode == _REASONING else self._output.content

    def _put_back(self, raw: str) -> None:
        """`on_rejected="content"`: a rejected call's text goes back where it was written."""
        self._output.emit_text(self._region_of(self._return_mode), raw)

    # ----------------------------------------------------------------- text regions

    def _start(self, text: str, pos: int) -> int:
        """Leading whitespace is framing; a reasoning opener may follow it, and a delimiter that begins
        with whitespace may start in it."""
        match = _NON_SPACE.search(text, pos)
        if self._sets.spaced_start and not self._resumed:
            for at in range(pos, match.start() if match is not None else len(text)):
                held = self._spaced_start(text, at)
                if held is not None:
                    return held
        if match is None:
            return len(text)
        pos = match.start()
        leading = self._sets.leading
        if leading.strings:  # the generation prompt's role marker, echoed: framing
            marker = leading.starting(text, pos)
            if marker is not None:
                return pos + len(marker)
            if leading.is_prefix(text, pos):
                return self._hold(text, pos)
        openers = self._sets.reasoning_openers
        opener = openers.starting(text, pos) if not self._resumed else None
        if opener is not None:
            self._enter_reasoning(self._closer_of[opener] if not self._forced else self._all_reasoning_closers,
                                  self._base + pos + len(opener))
            self._lead_pending = self._lead is not None
            return pos + len(opener)
        if openers.is_prefix(text, pos) and not self._resumed:
            return self._hold(text, pos)
        if self._forced and self._spec.reasoning_yields_to_calls:
            calls = self._sets.call_openers
            if calls.is_prefix(text, pos):
                return self._hold(text, pos)
            if calls.starting(text, pos) is not None:  # (`FormatSpec.reasoning_yields_to_calls`)
                self._forced = False
        if self._forced:
            self._enter_reasoning(self._all_reasoning_closers, self._base + pos)
        else:
            self._mode = _CONTENT
            self._ended_reasoning(0)
            # After a reasoning block (`after_reasoning`), what may follow one is read as such.
            self._answer_expected = self._resumed and bool(self._answer_opener)
            if self._anchored is not None and self._anchored.table.at_start:
                return self._anchored.decide(self, text, pos, self._anchored.table.at_start)
        return pos

    def _spaced_start(self, text: str, pos: int) -> int | None:
        """A delimiter that begins with whitespace (an imported template's ` to=self<|message|>`) at the very
        start is that delimiter, not leading whitespace: a reasoning opener opens reasoning; one read in
        content (framing, a call opener) starts the content there; a prefix of either waits for more text.
        None where no such delimiter starts here (no declared format has one)."""
        openers, in_content = self._sets.reasoning_openers, self._sets.in_content
        opener = openers.starting(text, pos)
        if opener is not None and opener[0].isspace():
            self._enter_reasoning(self._closer_of[opener] if not self._forced else self._all_reasoning_closers,
                                  self._base + pos + len(opener))
            self._lead_pending = self._lead is not None
            return pos + len(opener)
        if openers.is_prefix(text, pos) or in_content.is_prefix(text, pos):
            return self._hold(text, pos)
        found = in_content.starting(text, pos)
        if found is None or not found[0].isspace() or self._forced or self._anchored is not None:
            return None
        self._mode = _CONTENT
        self._ended_reasoning(0)
        return pos

    def _enter_reasoning(self, closers: tuple[str, ...], at: int) -> None:
        """Reasoning opens; its text starts at `at` in the output."""
        self._mode = _REASONING
        self._reasoning_closers = closers
        self._reasoning_from = at

    def _in_text(self, text: str, pos: int) -> int:
        """Content or reasoning, up to the next delimiter it may hold."""
        in_content = self._mode == _CONTENT
        region = self._output.content if in_content else self._output.reasoning
        if self._lead_pending and not in_content:
            lead = self._lead
            if lead.fullmatch(text, pos, partial=True) is not None:  # type: ignore[union-attr]
                return self._hold(text, pos)  # all of it is (a prefix of) the lead: the next text decides
            self._lead_pending = False
            found = lead.match(text, pos)  # type: ignore[union-attr]
            if found is not None:
                pos = found.end()
                self._reasoning_from = self._base + pos
        if self._absorb:
            match = _NON_SPACE.search(text, pos)
            if match is None:
                self._output.emit_text(region, text[pos:])
                return len(text)
            start = match.start()
            trailers = self._sets.trailers
            trailer = trailers.starting(text, start)
            if trailer is None and trailers.is_prefix(text, start):
                self._output.emit_text(region, text[pos:start])
                return self._hold(text, start)
            self._absorb = False
            self._output.emit_text(region, text[pos:start])
            if trailer is not None:
                return start + len(trailer)
            pos = start
        if self._answer_expected and in_content:
            held = self._after_reasoning(region, text, pos)
            if held is not None:
                return held
        in_content_delimiters = self._sets.in_answer if self._answer_open else self._sets.in_content
        delimiters = in_content_delimiters if in_content else self._sets.reasoning(self._reasoning_closers)
        match = delimiters.search(text, pos)
        if match is None:
            held = max(pos, delimiters.held_from(text))
            self._output.emit_text(region, text[pos:held])
            return self._hold(text, held)
        at = match.start()
        if delimiters.is_prefix(text, at):  # a longer delimiter may still start here (GigaChat's message end)
            self._output.emit_text(region, text[pos:at])
            if in_content and self._sets.trailing_framing:
                self._not_trailing(region, match.group())
            return self._hold(text, at)
        self._output.emit_text(region, text[pos:at])
        found = match.group()
        if in_content:
            if self._sets.trailing_framing:
                self._not_trailing(region, found)
            if found in self._sets.anchor_marks and self._anchored is not None:
                return self._anchored.at_mark(self, text, found, at, match.end())
            if self._answer_open and found == self._answer_closer:
                self._answer_open = False
            elif found in self._sets.reopeners:
                self._enter_reasoning(self._closer_of[found], self._base + match.end())
            elif found in self._sets.trailing_framing:
                region.hold(found)  # framing if only whitespace follows it to the end; else content
            elif found in self._spaced and not (text[at - 1] if at else self._previous or " ").isspace():
                self._output.emit_text(region, found)  # not after whitespace: a word of the content
            elif found not in self._sets.framing:
                return self._enter(found, _CONTENT, at, text, match.end())
        elif found in self._reasoning_closers:
            region.drop_pending()
            self._output.release(region)
            self._mode = _CONTENT
            self._ended_reasoning(self._base + match.end())
            self._answer_expected = bool(self._answer_opener)
            if self._anchored is not None and self._anchored.table.at_start:  # the content starts here
                self._mode = ANCHOR
                self._anchored.choices = self._anchored.table.at_start
        elif found in self._sets.framing:  # `FormatSpec.framing_in_reasoning`: dropped
            pass
        elif self._calls_end_reasoning:
            # The format's call token ends unclosed reasoning for good (Kimi K2, Apertus), as its closer
            # would: the text before it is reasoning when the prompt opened it (Apriel 1.6's prefill:
            # the model may call without answering). Reasoning read only because the format always
            # starts inside it, which had to close to be reasoning, was the answer (Apriel 1.5).
            if region.deferred and not self._prompted:
                self._output.hand_over(region, self._output.content)
                self._ended_reasoning(self._reasoning_from or 0)  # no reasoning after all: its text is the answer
            else:
                region.drop_pending()
                self._output.release(region)
                self._ended_reasoning(self._base + at)
            self._mode = _CONTENT
            return self._enter(found, _CONTENT, at, text, match.end())
        else:
            return self._enter(found, _REASONING, at, text, match.end())  # tool_calls_in_reasoning="extract"
        return match.end()

    def _after_reasoning(self, region: Region, text: str, pos: int) -> int | None:
        """Right after the reasoning block: the format's answer opener (after whitespace) is framing
        (`FormatSpec.framing_after_reasoning`). Returns where reading goes on, or None to read
        `text[pos:]` as content."""
        opener = self._answer_opener
        match = _NON_SPACE.search(text, pos)
        if match is None:
            self._output.emit_text(region, text[pos:])
            return len(text)
        start = match.start()
        if opener in self._specials and self._sets is self._ordinary:  # token-aware: only the token opens it
            self._answer_expected = False
            return None
        if text.startswith(opener, start):
            self._answer_expected, self._answer_open = False, True
            self._output.emit_text(region, text[pos:start])
            return start + len(opener)
        if len(text) - start < len(opener) and opener.startswith(text[start:]):  # it could still be the opener
            self._output.emit_text(region, text[pos:start])
            return self._hold(text, start)
        self._answer_expected = False
        return None

    def _not_trailing(self, region: Region, found: str) -> None:
        """A delimiter that starts with a trailing-framing marker (GigaChat's `<|message_sep|>`, or
        its call message's opener) comes: a marker held before it is not at the end (only whitespace
        may follow a trailing one), so it is content, and at most one is ever held."""
        if not region.pending_ws or not any(map(found.startswith, self._sets.trailing_framing)):
            return
        held = "".join(region.pending_ws)
        if not held.isspace():
            region.drop_pending()
            self._output.emit_text(region, held)

    # ----------------------------------------------------------------- wrappers and envelopes

    def _enter(self, opener: str, return_mode: str, at: int, text: str, end: int) -> int:
        """The wrapper or envelope `opener` opens at `text[at:end]`: where reading goes on. An
        envelope whose body kind reads it whole from here (`spec.WholeBody`) is settled at once."""
        whole = self._whole_of.get(opener)
        if whole is not None:
            done = self._whole_envelope(whole, opener, return_mode, at, text, end)
            if done is not None:
                return done
        return end - self._open(opener, return_mode, at)

    def _whole_envelope(self, whole: Callable[[str, int], tuple[list[CallResult], int, int] | None], opener: str,
                        return_mode: str, at: int, text: str, end: int) -> int | None:
        """An envelope read whole (`_enter`): where its closer ends, or None to read it as it streams."""
        spec = self._openers_to_envelope[opener]
        lead = spec.body_lead
        start = end - lead
        try:
            found = whole(text, start)
        except Exception:  # a reader bug: the scanner and the kind's parse read it again, and say what is wrong
            found = None
        if found is None:
            return None
        results, body_end, closer_end = found
        wrapped = self._mode == _WRAPPER
        if not wrapped:
            self._return_mode = return_mode
        self._scanned += body_end - start
        finished = Envelope(opener[:-lead] if lead else opener, text[start:body_end], text[body_end:closer_end],
                            True, wrapped)
        self._settler.settle(results, finished, self._base + at)
        self._after_envelope(wrapped, complete=True)
        return closer_end

    def _open(self, opener: str, return_mode: str, at: int) -> int:
        """Open the wrapper or envelope `opener` names; `at` is where it starts in `text`. Returns how
        many of the opener's last characters are body, to be read again (`EnvelopeSpec.body_lead`)."""
        position = self._base + at
        wrapper = self._openers_to_wrapper.get(opener)
        if wrapper is not None:
            self._mode = _WRAPPER
            self._wrapper = OpenWrapper(wrapper, return_mode, position, raw=[opener])
            self._return_mode = return_mode
            return 0
        envelope = self._openers_to_envelope[opener]
        lead = envelope.body_lead
        if lead:
            opener = opener[:-lead]
        wrapped = self._mode == _WRAPPER
        if not wrapped:
            self._return_mode = return_mode
        body = envelope.body
        scanner = body.scanner()
        self._envelope = OpenEnvelope(envelope, opener, scanner,
                                      body.streamer(self._tools, scanner) if self._progressive else None, wrapped,
                                      position)
        self._mode = _ENVELOPE
        return lead

    def _in_wrapper(self, text: str, pos: int) -> int:
        wrapper = self._wrapper
        assert wrapper is not None
        delimiters = self._sets.wrappers[id(wrapper.spec)]
        if wrapper.calls and not wrapper.spec.text_is_content:
            match = _NON_SPACE.search(text, pos)
            if match is None:
                hold_merged(wrapper.ws, text[pos:])
                return len(text)
            start = match.start()
            if delimiters.starting(text, start) is None:
                if delimiters.is_prefix(text, start):
                    hold_merged(wrapper.ws, text[pos:start])
                    return self._hold(text, start)
                # Text after the calls, with no closer: the wrapper has ended; this is content.
                whitespace = "".join(wrapper.ws) + text[pos:start]
                self._leave_wrapper()
                self._output.emit_text(self._region_of(self._mode), whitespace)
                return start
            hold_merged(wrapper.ws, text[pos:start])
            pos = start
        match = delimiters.search(text, pos)
        if match is None:
            held = max(pos, delimiters.held_from(text))
            self._wrapper_text(text[pos:held])
            return self._hold(text, held)
        self._wrapper_text(text[pos: match.start()])
        if wrapper.spec.text_is_content:  # a marker ends a stretch of text (held whitespace is framing)
            wrapper.ws, wrapper.text_seen = [], False
        found = match.group()
        if found in wrapper.spec.framing:  # between calls; before the first it is the block's text
            if not wrapper.calls:
                self._wrapper_text(found)
            return match.end()
        if found in wrapper.spec.closers:
            if not wrapper.calls and not (wrapper.spec.empty_is_framing and not wrapper.holds_text):
                error = (f"no {self._spec.name} call found in the call block: it holds text that is not a call of "
                         "this format (is the format right? `streamparse detect` names a template's)"
                         if wrapper.holds_text else "the call block is empty: no call inside it")
                self._keep_wrapper_raw(found)
                self._reject_wrapper_text([error], INVALID_JSON)
            self._leave_wrapper()
        else:
            if not wrapper.calls:
                self._reject_wrapper_text(["text inside the call block that is not a call"], INVALID_JSON,
                                          only_if_text=True)
            return self._enter(found, self._return_mode, match.start(), text, match.end())
        return match.end()

    def _wrapper_text(self, text: str) -> None:
        """Text of a wrapper outside calls: content where the wrapper says so (`text_is_content`);
        otherwise, before its first call, kept for a rejection, up to `max_call_chars`."""
        wrapper = self._wrapper
        if not text or wrapper is None:
            return
        if wrapper.spec.text_is_content:
            self._wrapper_content(wrapper, text)
        elif not wrapper.calls:
            self._keep_wrapper_raw(text)

    def _keep_wrapper_raw(self, text: str) -> None:
        """Kept for a rejection of the wrapper, up to `max_call_chars`."""
        wrapper = self._wrapper
        assert wrapper is not None
        limit = self._max_call_chars
        if limit is not None and wrapper.raw_length + len(text) > limit:
            text = text[: max(0, limit - wrapper.raw_length)]
            wrapper.raw_length = limit + 1  # past the limit: nothing more is kept
        else:
            wrapper.raw_length += len(text)
        if text:
            wrapper.raw.append(text)

    def _wrapper_content(self, wrapper: OpenWrapper, text: str) -> None:
        """Whitespace between a wrapper's markers is framing; a stretch with other text is content, as written."""
        if not wrapper.text_seen:
            if _NON_SPACE.search(text) is None:
                hold_merged(wrapper.ws, text)
                return
            wrapper.text_seen = True
            text = "".join(wrapper.ws) + text
            wrapper.ws = []
        self._output.emit_text(self._region_of(self._return_mode), text)

    def _reject_wrapper_text(self, errors: list[str], status: str, only_if_text: bool = False) -> None:
        """What a wrapper held before its first call (an empty or junk call block) is reported, not dropped."""
        wrapper = self._wrapper
        assert wrapper is not None
        opener, *rest = wrapper.raw or [""]
        inner = "".join(rest)
        limit = self._max_call_chars
        if limit is not None and wrapper.raw_length > limit:
            status, errors = TOO_LONG, [f"the call block held more than max_call_chars={limit} characters "
                                        "before any call; raw holds its first max_call_chars characters"]
        elif only_if_text and not inner.strip():
            wrapper.raw = []
            wrapper.raw_length = 0
            return
        self._settler.reject_text(status, errors, opener + inner, wrapper.position)
        wrapper.raw = []
        wrapper.raw_length = 0

    def _leave_wrapper(self) -> None:
        self._wrapper = None
        self._mode = self._return_mode

    def _in_envelope(self, text: str, pos: int) -> int:
        envelope = self._envelope
        assert envelope is not None
        return self._envelope_result(envelope, text, pos, envelope.scanner.scan(self._view, pos))

    def _envelope_result(self, envelope: OpenEnvelope, text: str, pos: int, result: ScanResult) -> int:
        self._scanned += result.safe - pos
        self._add_body(envelope, text[pos: result.safe])
        if result.end is None:
            return self._hold(text, result.safe)
        self._end_envelope(text[result.safe: result.end], complete=True)
        return result.end

    def _add_body(self, envelope: OpenEnvelope, piece: str) -> None:
        if not piece:
            return
        envelope.length += len(piece)
        limit = self._max_call_chars
        if limit is not None and envelope.length > limit:
            # A runaway call: keep its first max_call_chars characters, stop buffering and streaming it.
            room = limit - (envelope.length - len(piece))
            if room > 0:
                envelope.body.append(piece[:room])
                if envelope.streamer is not None:  # the streamer sees exactly the kept text
                    self._settler.stream(envelope.streamer.feed(piece[:room]))
            envelope.too_long = True
            envelope.streamer = None
            return
        envelope.body.append(piece)
        if envelope.streamer is not None:
            self._settler.stream(envelope.streamer.feed(piece))

    def _end_envelope(self, closer: str, complete: bool) -> None:
        envelope = self._envelope
        assert envelope is not None
        # A body whose scanner found it can no longer be a call (`JsonValueScanner.broken`) is read
        # as complete when the output ends: what is wrong with it is not the cut.
        complete = complete or getattr(envelope.scanner, "broken", False)
        if envelope.anchor is not None and self._anchored is not None:
            self._anchored.ended(self, closer, complete)
            return
        finished = Envelope(envelope.opener, "".join(envelope.body), closer, complete, envelope.wrapped,
                            envelope.decoded)
        self._envelope = None
        results: list[CallResult] = []
        if not (envelope.too_long and complete):
            try:
                results, text = calls_and_text(envelope.spec.body.parse(finished, self._tools))
                self._output.emit_text(self._region_of(self._return_mode), text)
            except RecursionError:
                results = [Rejection(INVALID_JSON, ["the call is nested too deeply to be read"])]
            except Exception as error:  # a visitor bug must not end the user's stream
                results = [Rejection(INVALID_JSON, [f"internal error reading this call: {error!r}"])]
        # A runaway call is `too_long`; cut off by the end of the output it is `truncated`, unless its
        # kept first characters read as a call (a kind whose end tag is optional at the end).
        if envelope.too_long and (complete or any(isinstance(result, ParsedCall) for result in results)):
            results = [Rejection(TOO_LONG, [
                f"the call was {envelope.length} characters long, more than max_call_chars={self._max_call_chars}; "
                "raw holds its first max_call_chars characters"])]
        if not results and envelope.spec.no_call_is_content and not envelope.too_long:
            self._output.emit_text(self._region_of(self._return_mode), finished.raw)
        elif not results and not (envelope.spec.no_call_is_framing and not envelope.too_long):
            results = [Rejection(TRUNCATED if not complete else INVALID_JSON, ["no call in the envelope"])]
        self._settler.settle(results, finished, envelope.position)
        self._after_envelope(envelope.wrapped, complete)

    def _after_envelope(self, wrapped: bool, complete: bool) -> None:
        """Back to the wrapper or region the envelope was opened in."""
        if wrapped and self._wrapper is not None:
            self._wrapper.calls += 1
            self._mode = _WRAPPER
        else:
            self._mode = self._return_mode
            self._absorb = bool(self._full.trailers) and complete

    # ----------------------------------------------------------------- end of output

    def _settle_carry(self) -> None:
        """Nothing more can extend the held-back text: decide what it is, without leaving the region."""
        carry, self._carry = self._carry, ""
        if not carry:
            return
        if self._mode in messages.MODES:
            messages.settle_carry(self, carry)
            return
        if self._mode == _START:  # an incomplete reasoning opener is text
            if self._forced:
                self._enter_reasoning(self._all_reasoning_closers, self._received - len(carry))
            else:
                self._mode = _CONTENT
                self._ended_reasoning(0)
        if self._mode in (ANCHOR, TRAILING) and self._anchored is not None:  # a lead that did not complete
            self._anchored.before_text(self)
        if self._mode == _ENVELOPE:
            assert self._envelope is not None
            # A closer held because a longer one could have followed it (`EnvelopeScanner.at_end`) is the closer.
            ending = getattr(self._envelope.scanner, "at_end", None)
            found = ending(carry) if ending is not None else None
            if found is not None and found.end is not None:
                self._add_body(self._envelope, carry[:found.safe])
                self._end_envelope(carry[found.safe:found.end], complete=True)
                rest = carry[found.end:]  # read again where the envelope returned to (received once already)
                self._received -= len(rest)
                self._run(rest)
                self._settle_carry()
                return
            self._add_body(self._envelope, carry)
        elif self._mode == _WRAPPER:
            wrapper = self._wrapper
            assert wrapper is not None
            if not wrapper.calls or wrapper.spec.text_is_content:
                self._wrapper_text(carry)
            elif carry.strip():
                whitespace = "".join(wrapper.ws)
                self._leave_wrapper()
                self._output.emit_text(self._region_of(self._mode), whitespace + carry)
            else:
                hold_merged(wrapper.ws, carry)
        else:
            self._absorb = False
            # A framing marker held because a longer delimiter could have started with it is framing.
            marker = self._sets.in_content.starting(carry) if self._mode == _CONTENT else None
            if marker is not None and (marker in self._sets.framing
                                       or (marker in self._sets.trailing_framing and not carry[len(marker):].strip())):
                carry = carry[len(marker):]
            self._output.emit_text(self._region_of(self._mode), carry)

    def _finish(self) -> None:
        self._settle_carry()
        if self._messages is not None:
            messages.end_of_output(self)
        if self._mode == _ENVELOPE:
            self._end_envelope("", complete=False)
        if self._anchored is not None:  # after the envelope: one read as complete waits for what follows
            self._anchored.finish(self)
        if self._mode == _WRAPPER:
            wrapper = self._wrapper
            assert wrapper is not None
            if not wrapper.calls:
                self._reject_wrapper_text(["the output ended inside a call block with no call"], TRUNCATED)
            self._leave_wrapper()
        if self._output.reasoning.deferred:  # forced-open reasoning that never closed: the answer
            self._output.hand_over(self._output.reasoning, self._output.content)
            self._ended_reasoning(self._reasoning_from or 0)
        # Reasoning that never ended runs to the end of the output; no reasoning at all ends at 0.
        state = self._messages
        in_reasoning = self._reasoning_from is not None or (
            state is not None and self._mode == messages.BODY and state.region is self._output.reasoning)
        self._ended_reasoning(self._received if in_reasoning else 0)


def _fixed_state(options: Options) -> tuple[Options, dict[str, Any]]:
    """A parser's attributes that depend on its options only, with the state every parser starts
    in: worked out once per `Options` (a server or a loop of `parse()` calls shares one) and set
    with one `__dict__` update. Kept for the last `_FIXED_SIZE` options, with the options
    themselves (so that an id is not reused while it is a key)."""
    spec: FormatSpec = get_format(options.format)
    suffix = options.marker_suffix
    if suffix is None and spec.marker_suffix is not None and options.prompt is not None:
        suffix = spec.marker_suffix.in_prompt(options.prompt)  # the rendered prompt's spelling
    # `MarkerSuffix.learned` while the suffix is still to be learned from the output
    learning = spec.marker_suffix.learned if suffix is None and spec.marker_suffix is not None else ""
    if suffix is not None:
        spec = get_format(options.format, suffix)
    require_special = options.special_tokens == "require"
    if require_special and not spec.special:
        raise ValueError(f"format {spec.name!r} declares no special tokens, so token-aware mode cannot "
                         "tell its delimiters from text; use special_tokens='ignore'")
    forced = options.thinking_forced_open or (
        options.prompt is not None and spec.ends_inside_reasoning(options.prompt))
    deferred = forced and spec.forced_reasoning_needs_closer
    prompted = forced and bool(spec.reasoning) and not spec.ignores_forced_open
    if spec.reasoning_always_open:
        forced = True
        deferred = spec.forced_reasoning_needs_closer
    if not spec.reasoning or spec.ignores_forced_open:  # a format without reasoning ignores thinking_forced_open
        forced = False
    # Call openers are looked for in reasoning where they are calls there (extracted, or ending it).
    calls_end_reasoning = spec.ends_reasoning_at_calls(forced)
    in_reasoning = options.tool_calls_in_reasoning == "extract" or calls_end_reasoning
    full = delimiter_sets(spec, in_reasoning, frozenset())  # built once per format
    specials = frozenset(spec.special) if require_special else frozenset()
    ordinary = delimiter_sets(spec, in_reasoning, specials) if specials else full
    progressive = options.emit_calls == "progressive"
    # `FormatSpec.framing_after_reasoning`: Granite's `<response>` / `</response>` ("" when none).
    answer_opener, answer_closer = spec.framing_after_reasoning or ("", "")
    state: dict[str, Any] = {
        "options": options,
        "_spec": spec,
        "_progressive": progressive,
        "_max_call_chars": options.max_call_chars,
        "_full": full,
        "_openers_to_envelope": full.envelope_of,
        "_openers_to_wrapper": full.wrapper_of,
        "_closer_of": full.closer_of,
        "_all_reasoning_closers": full.reasoning_closers,
        "_calls_end_reasoning": calls_end_reasoning,
        "_answer_opener": answer_opener,
        "_answer_closer": answer_closer,
        "_specials": specials,
        "_ordinary": ordinary,
        "_sets": ordinary,
        "_look_alikes": LookAlikes(specials) if specials else None,
        "_tools": ToolSet(options.tools),  # (holds nothing that changes: shared)
        "_closed": False,
        "_message": None,
        "_mode": messages.OUTSIDE if spec.messages is not None else _START,
        "_forced": forced,
        "_prompted": prompted,  # the flag or the prompt opened reasoning (not `reasoning_always_open` alone)
        "_deferred": deferred,
        "_carry": "",  # held back: it could still start a delimiter
        "_received": 0,  # characters received so far (after decoding): positions for the log
        "_reasoning_closers": full.reasoning_closers,
        "_absorb": False,  # a bare call just ended: a wrapper closer after whitespace is its own
        "_answer_expected": False,  # reasoning just closed: an answer opener may follow (framing)
        "_answer_open": False,  # an answer opener was framing: its closer is framing too
        "_scanned": 0,  # characters looked at, re-looks at held-back text included
        "_view": "",  # the text envelope scanners see (look-alikes blanked in token-aware mode)
        "_return_mode": _CONTENT,  # the region a wrapper or envelope was opened in
        "_wrapper": None,
        "_envelope": None,
        # Envelope bodies need no per-piece bookkeeping (fast path in feed): no streamer, no limit,
        # no look-alikes to blank out.
        "_plain_body": not progressive and options.max_call_chars is None and not require_special,
        # `FormatSpec.reasoning_lead`: framing after a reasoning opener, matched once it was read.
        "_lead": regex.compile(spec.reasoning_lead) if spec.reasoning_lead else None,
        "_lead_pending": False,
        "_reasoning_end": None,  # where the reasoning ended in the output (`reasoning_end`)
        "_reasoning_from": None,  # where the reasoning's text starts in the output, once it opened
        "_resumed": False,  # the text starts after a reasoning block (`after_reasoning`)
        # Openers that count only after whitespace (`EnvelopeSpec.after_space`), and the character
        # before the text being read (the last one of the previous chunk's, "" at the start).
        "_spaced": full.spaced_openers,
        "_previous": "",
        # The body kinds that read an envelope found whole (`spec.WholeBody`), by opener: only where
        # the body needs no per-piece work (`_plain_body`).
        "_whole_of": {opener: whole for opener, envelope in full.envelope_of.items()
                      if (whole := getattr(envelope.body, "whole", None)) is not None}
        if not progressive and options.max_call_chars is None and not require_special else {},
        # `MarkerSuffix.learned`, compiled, while the suffix is still to be learned from the output.
        "_learning": regex.compile(learning) if learning else None,
    }
    made = (options, state)
    with _FIXED_LOCK:
        _FIXED[id(options)] = made
        while len(_FIXED) > _FIXED_SIZE:
            del _FIXED[next(iter(_FIXED))]
    return made


# What `_fixed_state` works out from the format's declaration alone: replaced when the output fixes
# the marker suffix (`StreamParser._learned`).
_DECLARED = ("_spec", "_full", "_openers_to_envelope", "_openers_to_wrapper", "_closer_of", "_all_reasoning_closers",
             "_calls_end_reasoning", "_answer_opener", "_answer_closer", "_specials", "_ordinary", "_sets",
             "_look_alikes", "_reasoning_closers", "_lead", "_spaced", "_whole_of")

_FIXED: dict[int, tuple[Options, dict[str, Any]]] = {}
# The options a learned marker suffix makes of a parser's, by their id and the suffix (kept with them).
_LEARNED: dict[tuple[int, str], tuple[Options, Options]] = {}
_FIXED_SIZE = 64
_FIXED_LOCK = threading.Lock()


StreamParser.READERS = {
    _START: StreamParser._start,
    _REASONING: StreamParser._in_text,
    _CONTENT: StreamParser._in_text,
    _WRAPPER: StreamParser._in_wrapper,
    _ENVELOPE: StreamParser._in_envelope,
    **messages.READERS,
    ANCHOR: lambda parser, text, pos: parser._anchored.read_position(parser, text, pos),  # type: ignore[union-attr]
    TRAILING: lambda parser, text, pos: parser._anchored.read_trailing(parser, text, pos),  # type: ignore[union-attr]
}
