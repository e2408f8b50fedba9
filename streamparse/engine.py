"""The one incremental engine: text regions, envelopes and wrappers, for every format.

Cost (kept, not hoped for): every character is searched once by a compiled delimiter
alternation or by an envelope scanner. The only text looked at again is the held-back suffix,
shorter than the longest delimiter. Whitespace whose role is unknown waits in a list, never
rescanned, and is joined once when later text shows it is inner. Envelope bodies are collected
as a list of pieces and joined once, when the envelope ends, for the format's grammar.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Unpack

from .options import OptionFields, Options, ToolsLike, make_options
from .registry import get_format
from .scanning import Delimiters, EnvelopeScanner, ScanResult
from .spec import (
    ArgumentsFragment,
    CallResult,
    CallStart,
    CallStreamer,
    Envelope,
    EnvelopeSpec,
    FormatSpec,
    ParsedCall,
    Rejection,
    WrapperSpec,
)
from .types import (
    INVALID_JSON,
    TOO_LONG,
    TRUNCATED,
    Delta,
    Message,
    RejectedCall,
    Token,
    ToolCall,
    ToolCallDelta,
)
from .validation import ToolSet

_START, _REASONING, _CONTENT, _WRAPPER, _ENVELOPE = "start", "reasoning", "content", "wrapper", "envelope"
_NON_SPACE = re.compile(r"\S")  # the same characters str.strip() keeps


@dataclass
class _Region:
    """Content or reasoning: what was emitted, and whitespace waiting to learn its role."""

    kind: str
    parts: list[str] = field(default_factory=list)
    pending_ws: list[str] = field(default_factory=list)
    pending_length: int = 0  # len("".join(pending_ws)), kept as it changes

    @property
    def started(self) -> bool:
        return bool(self.parts)


class _DelimiterSets:
    """The delimiter sets each region searches, built once per parser.

    Built twice in token-aware mode: for ordinary text, without the delimiters that are special
    tokens (so that text spelled by ordinary tokens never opens anything), and in full, for the
    moment a special token arrives."""

    def __init__(self, spec: FormatSpec, extract: bool, exclude: frozenset[str]) -> None:
        def keep(strings: Sequence[str]) -> list[str]:
            return [s for s in strings if s not in exclude]

        closer_of = dict(spec.reasoning)
        self.reasoning_openers = Delimiters(keep(list(closer_of)))
        # In token-aware mode a call starts only at a special token: an opener that is ordinary text
        # (Qwen3-Coder's `<function=`) counts only inside a wrapper that a special token opened.
        openers = [o for e in spec.envelopes for o in e.openers] + [o for w in spec.wrappers for o in w.openers]
        self.call_openers = Delimiters([] if exclude else openers)
        self.trailers = Delimiters(keep([c for w in spec.wrappers for c in w.closers]))
        self.wrappers = {id(w): Delimiters(keep([o for e in spec.envelopes for o in e.openers] + list(w.closers)))
                         for w in spec.wrappers}
        self._extract = extract
        self._exclude = exclude
        self._reasoning: dict[tuple[str, ...], Delimiters] = {}

    def reasoning(self, closers: tuple[str, ...]) -> Delimiters:
        found = self._reasoning.get(closers)
        if found is None:
            extra = self.call_openers.strings if self._extract else ()
            found = self._reasoning[closers] = Delimiters([c for c in closers if c not in self._exclude] + [*extra])
        return found


@lru_cache(maxsize=128)
def _delimiter_sets(spec: FormatSpec, extract: bool, exclude: frozenset[str]) -> _DelimiterSets:
    """Built once per format and options, not per parser: a server makes a parser per request."""
    return _DelimiterSets(spec, extract, exclude)


@dataclass
class _Started:
    """Progressive mode: a call whose id and name were already sent."""

    index: int
    id: str
    name: str
    sent: list[str] = field(default_factory=list)


class StreamParser:
    """Feed model output as it arrives; get `Delta`s; `close()` at the end; read `message`.

    `parse(text)` is this machine fed one chunk, so streamed and final results cannot drift."""

    def __init__(
        self,
        format: str = "hermes",
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
        self.options = options
        self._spec: FormatSpec = get_format(options.format)
        self._tools = ToolSet(options.tools)
        self._progressive = options.emit_calls == "progressive"
        self._extract = options.tool_calls_in_reasoning == "extract"
        self._id_factory = options.id_factory or self._spec.id_factory
        self._ids_used: set[str] = set()
        self._rejected_to_content = options.on_rejected == "content"
        max_call_chars = self._max_call_chars = options.max_call_chars
        self._require_special = options.special_tokens == "require"
        if self._require_special and not self._spec.special:
            raise ValueError(f"format {self._spec.name!r} declares no special tokens, so token-aware mode cannot "
                             "tell its delimiters from text; use special_tokens='ignore'")

        spec = self._spec
        self._openers_to_envelope: dict[str, EnvelopeSpec] = {
            opener: envelope for envelope in spec.envelopes for opener in envelope.openers
        }
        self._openers_to_wrapper: dict[str, WrapperSpec] = {
            opener: wrapper for wrapper in spec.wrappers for opener in wrapper.openers
        }
        self._closer_of = {opener: closer for opener, closer in spec.reasoning}
        self._all_reasoning_closers = tuple(dict.fromkeys(self._closer_of.values()))
        self._full = _delimiter_sets(spec, self._extract, frozenset())
        self._specials = frozenset(spec.special) if self._require_special else frozenset()
        self._ordinary = _delimiter_sets(spec, self._extract, self._specials) if self._specials else self._full
        self._sets = self._ordinary
        # Ordinary text shown to envelope scanners has its special-token look-alikes blanked out.
        specials = sorted(self._specials, key=len, reverse=True)
        self._special_pattern = re.compile("|".join(map(re.escape, specials))) if specials else None

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._decoding = False  # bytes were fed and the decoder may hold part of a character
        self._closed = False
        self._message: Message | None = None

        self._mode = _START
        self._forced = options.thinking_forced_open or (
            options.prompt is not None and self._spec.ends_inside_reasoning(options.prompt))
        self._carry = ""
        self._content = _Region("content")
        self._reasoning = _Region("reasoning")
        self._reasoning_closers: tuple[str, ...] = self._all_reasoning_closers
        self._absorb = False  # a bare call just ended: a wrapper closer after whitespace is its own
        self._calls: list[ToolCall] = []
        self._rejected: list[RejectedCall] = []
        self._ordinal = 0  # calls seen so far, accepted or not: the argument of id_factory
        self._stream_index = 0  # progressive mode: calls started so far
        self._out: list[Delta] = []
        self._scanned = 0  # characters looked at, re-looks at held-back text included
        self._restored: str | None = None  # the last rejected text put back into content
        self._view = ""
        # Envelope bodies need no per-piece bookkeeping (fast path in feed): no streamer, no limit,
        # no look-alikes to blank out.
        self._plain_body = not self._progressive and max_call_chars is None and not self._require_special

        # The open envelope, if any.
        self._envelope: EnvelopeSpec | None = None
        self._opener = ""
        self._body: list[str] = []
        self._body_length = 0
        self._too_long = False
        self._scanner: EnvelopeScanner | None = None
        self._streamer: CallStreamer | None = None
        self._started: dict[int, _Started] = {}
        self._wrapped = False
        self._return_mode = _CONTENT

        # The open wrapper, if any.
        self._wrapper: WrapperSpec | None = None
        self._wrapper_calls = 0
        self._wrapper_raw: list[str] = []  # its text while it has no call yet (for a rejection)
        self._wrapper_ws: list[str] = []  # whitespace after its last call

    # ----------------------------------------------------------------- public API

    def feed(self, chunk: str | bytes | bytearray | Token | Sequence[Token]) -> list[Delta]:
        """Consume the next piece of output; return what it makes certain.

        A chunk is text, UTF-8 bytes, a `Token`, or a sequence of `Token`s."""
        if chunk.__class__ is str and not self._decoding and not self._closed:  # the common case, first
            text: str = chunk
            if self._plain_body and self._mode == _ENVELOPE and not self._carry:
                # Inside a call body with nothing held back: most chunks are all body.
                result = self._scanner.scan(text, 0)  # type: ignore[union-attr]
                if result.end is None and result.safe == len(text):
                    self._body.append(text)
                    self._body_length += len(text)
                    self._scanned += len(text)
                    return []
                self._view = text
                pos = self._envelope_result(text, 0, result)
                if pos < len(text):
                    self._run(text[pos:])
                return self._take()
            self._run(text)
            return self._take()
        if self._closed:
            raise ValueError("feed() after close(): this parser has finished; create a new StreamParser")
        if isinstance(chunk, str):
            self._run(self._flush_decoder() + chunk)
        elif isinstance(chunk, (bytes, bytearray)):
            self._decoding = True
            self._run(self._decoder.decode(bytes(chunk)))
        elif isinstance(chunk, Token):
            self._token(chunk)
        elif isinstance(chunk, (list, tuple)) and all(isinstance(token, Token) for token in chunk):
            for token in chunk:
                self._token(token)
        else:
            raise TypeError(f"feed() takes str, bytes, a streamparse.Token or a list of Tokens; "
                            f"got {type(chunk).__name__}")
        return self._take()

    def _token(self, token: Token) -> None:
        self._run(self._flush_decoder())
        if token.special and token.text in self._specials:
            self._special_token(token.text)
        else:
            self._run(token.text)

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
        self._run(self._flush_decoder())
        self._closed = True
        self._finish()
        self._message = Message(
            content="".join(self._content.parts),
            reasoning="".join(self._reasoning.parts),
            tool_calls=list(self._calls),
            rejected=list(self._rejected),
        )
        return self._take()

    @property
    def message(self) -> Message:
        """The whole message; available after `close()`."""
        if self._message is None:
            raise ValueError("message is available after close(); call close() at the end of generation")
        return self._message

    @property
    def held_back(self) -> int:
        """Characters outside envelopes received but not yet emitted (delimiter prefix + whitespace)."""
        if self._closed:
            return 0
        region = self._region()
        pending = region.pending_length if region is not None else 0
        return len(self._carry) + pending if self._mode != _ENVELOPE else 0

    @property
    def scanned(self) -> int:
        """Characters the engine has looked at so far, counting every re-look at held-back text.

        The work measure behind the linear-time promise: at most the output's length plus, per
        chunk, what was held back (shorter than the longest delimiter)."""
        return self._scanned

    # ----------------------------------------------------------------- driving

    def _flush_decoder(self) -> str:
        if not self._decoding:
            return ""
        self._decoding = False
        return self._decoder.decode(b"", final=True)

    def _take(self) -> list[Delta]:
        out = self._out
        if out:
            self._out = []
        else:
            out = []
        return out

    def _run(self, text: str) -> None:
        """Drive the regions over `text`; each handler returns how far it got (no slicing of the rest)."""
        if not text:
            return
        if self._carry:
            text = self._carry + text
            self._carry = ""
        self._scanned += len(text)
        # What envelope scanners see: in token-aware mode, ordinary text with look-alikes of
        # special tokens blanked out (same length, so positions hold).
        self._view = text
        if self._special_pattern is not None and self._sets is self._ordinary and self._special_pattern.search(text):
            self._view = self._special_pattern.sub(lambda m: "\0" * len(m.group()), text)
        pos = 0
        end = len(text)
        while pos < end:
            if self._mode == _START:
                pos = self._start(text, pos)
            elif self._mode == _ENVELOPE:
                pos = self._in_envelope(text, pos)
            elif self._mode == _WRAPPER:
                pos = self._in_wrapper(text, pos)
            else:
                pos = self._in_text(text, pos)

    def _hold(self, text: str, pos: int) -> int:
        """Keep `text[pos:]` until the next chunk shows what it is."""
        self._carry = text[pos:]
        return len(text)

    def _region(self) -> _Region | None:
        if self._mode == _CONTENT:
            return self._content
        if self._mode == _REASONING:
            return self._reasoning
        return None

    # ----------------------------------------------------------------- text regions

    def _start(self, text: str, pos: int) -> int:
        """Leading whitespace is framing; a reasoning opener may follow it."""
        match = _NON_SPACE.search(text, pos)
        if match is None:
            return len(text)
        pos = match.start()
        openers = self._sets.reasoning_openers
        opener = openers.starting(text, pos)
        if opener is not None:
            self._enter_reasoning((self._closer_of[opener],) if not self._forced else self._all_reasoning_closers)
            return pos + len(opener)
        if openers.is_prefix(text, pos):
            return self._hold(text, pos)
        if self._forced:
            self._enter_reasoning(self._all_reasoning_closers)
        else:
            self._mode = _CONTENT
        return pos

    def _enter_reasoning(self, closers: tuple[str, ...]) -> None:
        self._mode = _REASONING
        self._reasoning_closers = closers

    def _text_delimiters(self) -> Delimiters:
        if self._mode == _CONTENT:
            return self._sets.call_openers
        return self._sets.reasoning(self._reasoning_closers)

    def _in_text(self, text: str, pos: int) -> int:
        region = self._content if self._mode == _CONTENT else self._reasoning
        if self._absorb:
            match = _NON_SPACE.search(text, pos)
            if match is None:
                self._emit_text(region, text[pos:])
                return len(text)
            start = match.start()
            trailers = self._sets.trailers
            trailer = trailers.starting(text, start)
            if trailer is None and trailers.is_prefix(text, start):
                self._emit_text(region, text[pos:start])
                return self._hold(text, start)
            self._absorb = False
            self._emit_text(region, text[pos:start])
            if trailer is not None:
                return start + len(trailer)
            pos = start
        delimiters = self._text_delimiters()
        match = delimiters.search(text, pos)
        if match is None:
            held = max(pos, delimiters.held_from(text))
            self._emit_text(region, text[pos:held])
            return self._hold(text, held)
        self._emit_text(region, text[pos: match.start()])
        found = match.group()
        if self._mode == _REASONING and found in self._reasoning_closers:
            self._reasoning.pending_ws.clear()
            self._reasoning.pending_length = 0
            self._mode = _CONTENT
        else:
            self._open(found, return_mode=self._mode)
        return match.end()

    def _emit_text(self, region: _Region, text: str) -> None:
        """Emit `text`, holding its trailing whitespace until later text shows it is inner."""
        if not text:
            return
        end = len(text.rstrip())
        if end:
            head = text[:end]
            if region.started:
                if region.pending_ws:
                    head = "".join(region.pending_ws) + head
                    region.pending_ws.clear()
                    region.pending_length = 0
            else:
                head = head.lstrip()
            region.parts.append(head)
            self._push(Delta(content=head) if region.kind == "content" else Delta(reasoning=head))
        if end < len(text) and region.started:
            region.pending_ws.append(text[end:])
            region.pending_length += len(text) - end

    def _push(self, delta: Delta) -> None:
        """Append a delta, merging text with the previous delta of the same kind (not yet handed out)."""
        if self._out and not delta.tool_calls:
            last = self._out[-1]
            if not last.tool_calls and bool(last.content) == bool(delta.content):
                last.content += delta.content
                last.reasoning += delta.reasoning
                return
        self._out.append(delta)

    # ----------------------------------------------------------------- wrappers and envelopes

    def _open(self, opener: str, return_mode: str) -> None:
        wrapper = self._openers_to_wrapper.get(opener)
        if wrapper is not None:
            self._mode = _WRAPPER
            self._wrapper = wrapper
            self._wrapper_calls = 0
            self._wrapper_raw = [opener]
            self._wrapper_ws = []
            self._return_mode = return_mode
            return
        envelope = self._openers_to_envelope[opener]
        if self._mode != _WRAPPER:
            self._return_mode = return_mode
        self._envelope = envelope
        self._opener = opener
        self._body = []
        self._scanner = envelope.body.scanner()
        self._started = {}
        self._streamer = envelope.body.streamer(self._tools) if self._progressive else None
        self._wrapped = self._mode == _WRAPPER
        self._mode = _ENVELOPE

    def _in_wrapper(self, text: str, pos: int) -> int:
        assert self._wrapper is not None
        delimiters = self._sets.wrappers[id(self._wrapper)]
        if self._wrapper_calls:
            match = _NON_SPACE.search(text, pos)
            if match is None:
                self._wrapper_ws.append(text[pos:])
                return len(text)
            start = match.start()
            if delimiters.starting(text, start) is None:
                if delimiters.is_prefix(text, start):
                    self._wrapper_ws.append(text[pos:start])
                    return self._hold(text, start)
                # Text after the calls, with no closer: the wrapper has ended; this is content.
                whitespace = "".join(self._wrapper_ws) + text[pos:start]
                self._leave_wrapper()
                self._emit_text(self._region_of(self._mode), whitespace)
                return start
            self._wrapper_ws.append(text[pos:start])
            pos = start
        match = delimiters.search(text, pos)
        if match is None:
            held = max(pos, delimiters.held_from(text))
            self._wrapper_text(text[pos:held])
            return self._hold(text, held)
        self._wrapper_text(text[pos: match.start()])
        found = match.group()
        if found in self._wrapper.closers:
            if not self._wrapper_calls:
                self._wrapper_raw.append(found)
                raw = "".join(self._wrapper_raw)
                self._reject_raw(INVALID_JSON, ["the call block is empty: no call inside it"], raw)
            self._leave_wrapper()
        else:
            self._flush_wrapper_junk()
            self._open(found, return_mode=self._return_mode)
        return match.end()

    def _wrapper_text(self, text: str) -> None:
        if text and not self._wrapper_calls:
            self._wrapper_raw.append(text)

    def _flush_wrapper_junk(self) -> None:
        """Text before the first call of a wrapper is reported, not silently dropped."""
        opener, *text = self._wrapper_raw or [""]
        if "".join(text).strip():
            raw = opener + "".join(text)
            self._reject_raw(INVALID_JSON, ["text inside the call block that is not a call"], raw)
        self._wrapper_raw = []

    def _leave_wrapper(self) -> None:
        self._wrapper = None
        self._wrapper_raw = []
        self._wrapper_ws = []
        self._mode = self._return_mode

    def _region_of(self, mode: str) -> _Region:
        return self._reasoning if mode == _REASONING else self._content

    def _in_envelope(self, text: str, pos: int) -> int:
        return self._envelope_result(text, pos, self._scanner.scan(self._view, pos))  # type: ignore[union-attr]

    def _envelope_result(self, text: str, pos: int, result: ScanResult) -> int:
        self._scanned += result.safe - pos
        self._add_body(text[pos: result.safe])
        if result.end is None:
            return self._hold(text, result.safe)
        self._end_envelope(text[result.safe: result.end], complete=True)
        return result.end

    def _add_body(self, piece: str) -> None:
        if not piece:
            return
        self._body_length += len(piece)
        if self._max_call_chars is not None and self._body_length > self._max_call_chars:
            # A runaway call: keep its first max_call_chars characters, stop buffering and streaming it.
            room = self._max_call_chars - (self._body_length - len(piece))
            if room > 0:
                self._body.append(piece[:room])
            self._too_long = True
            self._streamer = None
            return
        self._body.append(piece)
        if self._streamer is not None:
            for event in self._streamer.feed(piece):
                if isinstance(event, CallStart):
                    self._start_call(event)
                elif isinstance(event, ArgumentsFragment) and event.text:
                    started = self._started.get(event.k)
                    if started is not None:
                        started.sent.append(event.text)
                        self._push(Delta(tool_calls=[ToolCallDelta(started.index, arguments=event.text)]))

    def _start_call(self, event: CallStart) -> None:
        if event.k in self._started or not self._tools.known(event.name.strip()):
            return
        call_id = event.id if event.id is not None else self._new_id(self._ordinal + event.k)
        started = _Started(self._stream_index, call_id, event.name.strip())
        self._stream_index += 1
        self._started[event.k] = started
        self._push(Delta(tool_calls=[ToolCallDelta(started.index, id=call_id, name=started.name)]))

    def _new_id(self, ordinal: int) -> str:
        for _ in range(100):
            call_id = self._id_factory(ordinal)
            if call_id not in self._ids_used:
                break
        self._ids_used.add(call_id)
        return call_id

    def _end_envelope(self, closer: str, complete: bool) -> None:
        assert self._envelope is not None
        envelope = Envelope(self._opener, "".join(self._body), closer, complete, self._wrapped)
        self._body = []
        length, self._body_length = self._body_length, 0
        if self._too_long and complete:
            self._too_long = False
            results: list[CallResult] = [Rejection(TOO_LONG, [
                f"the call was {length} characters long, more than max_call_chars={self._max_call_chars}; "
                "raw holds its first max_call_chars characters"])]
        else:
            self._too_long = False
            try:
                results = self._envelope.body.parse(envelope, self._tools)
            except Exception as error:  # a visitor bug must not end the user's stream
                results = [Rejection(INVALID_JSON, [f"internal error reading this call: {error!r}"])]
        if not results:
            results = [Rejection(TRUNCATED if not complete else INVALID_JSON, ["no call in the envelope"])]
        for k, result in enumerate(results):
            self._settle(k, result, envelope)
        for k in sorted(set(self._started) - set(range(len(results)))):
            self._push(Delta(tool_calls=[ToolCallDelta(self._started[k].index, status=INVALID_JSON)]))
        self._ordinal += len(results)
        self._envelope = self._scanner = self._streamer = None
        if self._wrapped:
            self._wrapper_calls += 1
            self._mode = _WRAPPER
        else:
            self._mode = self._return_mode
            self._absorb = bool(self._full.trailers) and complete

    def _settle(self, k: int, result: CallResult, envelope: Envelope) -> None:
        started = self._started.get(k)
        if isinstance(result, ParsedCall):
            name = result.name.strip()
            verdict = self._tools.check(name, result.arguments)
            if verdict is None:
                self._accept(k, result, name, started, envelope.raw)
                return
            status, errors = verdict
            result = Rejection(status, errors, None, name)
        raw = result.raw if result.raw is not None else envelope.raw
        self._rejected.append(RejectedCall(result.status, list(result.errors), raw, result.name))
        if started is not None:
            self._push(Delta(tool_calls=[ToolCallDelta(started.index, status=result.status)]))
        if raw is not self._restored:  # several calls of one envelope share its text: put it back once
            self._restored = raw
            self._rejected_text(raw)

    def _accept(self, k: int, call: ParsedCall, name: str, started: _Started | None, raw: str) -> None:
        if started is not None:
            sent = "".join(started.sent)
            call_id = started.id
            rest = call.arguments_json[len(sent):] if call.arguments_json.startswith(sent) else ""
            index = started.index
            delta = ToolCallDelta(index, arguments=rest)
        else:
            call_id = call.id if call.id is not None else self._new_id(self._ordinal + k)
            index = self._stream_index if self._progressive else len(self._calls)
            self._stream_index += 1
            delta = ToolCallDelta(index, id=call_id, name=name, arguments=call.arguments_json)
        if delta.id is not None or delta.arguments:
            self._push(Delta(tool_calls=[delta]))
        self._calls.append(ToolCall(call_id, name, call.arguments, call.arguments_json, raw))

    def _reject_raw(self, status: str, errors: list[str], raw: str) -> None:
        self._rejected.append(RejectedCall(status, errors, raw, None))
        self._ordinal += 1
        self._rejected_text(raw)

    def _rejected_text(self, raw: str) -> None:
        """With `on_rejected="content"`, a rejected call's text goes back where it was written."""
        if self._rejected_to_content:
            self._emit_text(self._region_of(self._return_mode), raw)

    # ----------------------------------------------------------------- end of output

    def _settle_carry(self) -> None:
        """Nothing more can extend the held-back text: decide what it is, without leaving the region."""
        carry, self._carry = self._carry, ""
        if not carry:
            return
        if self._mode == _START:  # an incomplete reasoning opener is text
            self._mode = _REASONING if self._forced else _CONTENT
        if self._mode == _ENVELOPE:
            self._add_body(carry)
        elif self._mode == _WRAPPER:
            if not self._wrapper_calls:
                self._wrapper_text(carry)
            elif carry.strip():
                whitespace = "".join(self._wrapper_ws)
                self._leave_wrapper()
                self._emit_text(self._region_of(self._mode), whitespace + carry)
            else:
                self._wrapper_ws.append(carry)
        else:
            self._absorb = False
            self._emit_text(self._region_of(self._mode), carry)

    def _finish(self) -> None:
        self._settle_carry()
        if self._mode == _ENVELOPE:
            self._end_envelope("", complete=False)
        if self._mode == _WRAPPER:
            if not self._wrapper_calls:
                raw = "".join(self._wrapper_raw)
                self._reject_raw(TRUNCATED, ["the output ended inside a call block with no call"], raw)
            self._leave_wrapper()
