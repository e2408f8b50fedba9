"""What a call becomes: accepted or rejected, with its id, and the deltas that say so.

The body kinds say what they read (`ParsedCall` / `Rejection`, and in progressive mode
`CallStart` / `ArgumentsFragment` events); this module checks each call against the tools, gives
it an id, keeps the message's calls and rejections in output order, and makes the tool-call deltas
of both emit modes. Ids are unique within a message: a model-written id that repeats an earlier
one is replaced by a generated id, and a generated id is never one already used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent
from ..strict_json import encodable
from ..types import INVALID_JSON, TOO_LONG, Delta, RejectedCall, ToolCall, ToolCallDelta, made_tool_call
from ..validation import ToolSet
from .regions import Output

# One line per rejected call: status, tool name, position (the raw text only at DEBUG: it may hold user data).
logger = logging.getLogger("streamparse")


def loggable(text: str) -> str:
    """`text` with every character that is not printable (newlines, ANSI escapes, other control and
    format characters) written as its Python escape (`\\n`, `\\x1b`, `\\u2028`): what a model or a
    request wrote stays on its one log line and cannot forge another or restyle a terminal."""
    if text.isprintable():
        return text
    return "".join(character if character.isprintable() else repr(character)[1:-1] for character in text)


def _log_rejected(call: RejectedCall, position: int) -> None:
    if logger.isEnabledFor(logging.INFO):
        # The name and the errors are the model's words: escaped, one line whatever it wrote.
        logger.info("rejected tool call: status=%s tool=%s at character %d: %s", call.status,
                    None if call.name is None else loggable(call.name), position,
                    loggable("; ".join(call.errors)[:200]))
        logger.debug("rejected tool call raw text at character %d: %r", position, call.raw)


@dataclass
class _Started:
    """Progressive mode: a call whose id and name were already sent."""

    index: int
    id: str
    name: str
    sent: list[str] = field(default_factory=list)


class Settler:
    """The calls and rejections of one message, and the ids and deltas they get."""

    def __init__(self, tools: ToolSet, id_factory: Callable[[int], str], progressive: bool, output: Output,
                 rejected_text: Callable[[str], None] | None) -> None:
        self.calls: list[ToolCall] = []
        self.rejected: list[RejectedCall] = []
        self._tools = tools
        self._id_factory = id_factory
        self._progressive = progressive
        self._output = output
        self._rejected_text = rejected_text  # on_rejected="content": put a rejected call's text back
        self._ids_used: set[str] = set()
        self._ordinal = 0  # calls seen so far, accepted or not: the argument of id_factory
        self._stream_index = 0  # progressive mode: calls started so far
        self._started: dict[int, _Started] = {}  # calls of the open envelope already started
        self._decided: dict[int, str] = {}  # ids of the open envelope's calls decided while streaming
        self._restored: str | None = None  # the last rejected text put back

    # ----------------------------------------------------------------- progressive mode

    def stream(self, events: list[StreamEvent]) -> None:
        """What a body kind's streamer found certain in the open envelope."""
        for event in events:
            if isinstance(event, CallStart):
                self._start(event)
            elif isinstance(event, ArgumentsFragment) and event.text:
                started = self._started.get(event.k)
                if started is not None:
                    started.sent.append(event.text)
                    self._output.push(Delta(tool_calls=[ToolCallDelta(started.index, arguments=event.text)]))

    def _start(self, event: CallStart) -> None:
        name = event.name.strip()
        if event.k in self._started or event.k in self._decided:
            return
        if not encodable(name) or (event.id is not None and not encodable(event.id)):
            return  # a lone surrogate: not sent (the final check rejects the call)
        if not self._tools.known(name):
            if event.id is not None:  # not started, but its id counts as written, as in validated mode
                self._decided[event.k] = self._id_for(event.id, self._ordinal + event.k)
            return
        call_id = self._decided[event.k] = self._id_for(event.id, self._ordinal + event.k)
        started = _Started(self._stream_index, call_id, name)
        self._stream_index += 1
        self._started[event.k] = started
        self._output.push(Delta(tool_calls=[ToolCallDelta(started.index, id=call_id, name=name)]))

    # ----------------------------------------------------------------- ids

    def _call_id(self, k: int, written: str | None) -> str:
        """The id of call `k` of the open envelope: decided while it streamed, or now."""
        decided = self._decided.get(k)
        return decided if decided is not None else self._id_for(written, self._ordinal + k)

    def _id_for(self, written: str | None, ordinal: int) -> str:
        """The model's id when it wrote one not used before in this message, else a generated one.

        Every model-written id that is read counts as used, whatever becomes of its call (except in
        an envelope rejected `too_long`, which is not read), so both emit modes decide alike
        (progressive mode decides when a call starts, validated mode when it settles, in the same order)."""
        if written is not None and written not in self._ids_used:
            self._ids_used.add(written)
            return written
        call_id = self._id_factory(ordinal)
        for _ in range(8):  # a random factory that hit a used id: draw again
            if call_id not in self._ids_used:
                break
            call_id = self._id_factory(ordinal)
        else:  # a factory that keeps giving used ids: make this one unique with a suffix
            base, n = call_id, 1
            while call_id in self._ids_used:
                call_id, n = f"{base}_{n}", n + 1
        self._ids_used.add(call_id)
        return call_id

    # ----------------------------------------------------------------- settling

    def settle(self, results: list[CallResult], envelope: Envelope, position: int) -> None:
        """The calls one finished envelope holds, in order; `position` is where it starts in the output."""
        for k, result in enumerate(results):
            self._settle(k, result, envelope, position)
        if not self._decided:  # validated mode: nothing was started or decided while streaming
            self._ordinal += len(results)
            return
        for k in sorted(set(self._started) - set(range(len(results)))):
            self._output.push(Delta(tool_calls=[ToolCallDelta(self._started[k].index, status=INVALID_JSON)]))
        if any(isinstance(result, Rejection) and result.status == TOO_LONG for result in results):
            # Validated mode never reads a runaway envelope: the ids its calls took while they
            # streamed do not count as used either (how far the stream got depends on the chunking).
            self._ids_used -= set(self._decided.values())
        self._ordinal += len(results)
        self._started = {}
        self._decided = {}

    def _settle(self, k: int, result: CallResult, envelope: Envelope, position: int) -> None:
        started = self._started.get(k)
        if isinstance(result, ParsedCall):
            name = result.name.strip()
            verdict = self._tools.check(name, result.arguments, result.arguments_json)
            if verdict is None and started is not None and not result.arguments_json.startswith("".join(started.sent)):
                verdict = INVALID_JSON, ["the streamed arguments are not a prefix of the final arguments"]
            if verdict is None:
                self._accept(k, result, name, started, envelope.raw)
                return
            status, errors = verdict
            result = Rejection(status, errors, None, name, result.id)
        if result.id is not None and started is None:
            self._call_id(k, result.id)  # a written id counts as used
        raw = result.raw if result.raw is not None else envelope.raw
        rejected = RejectedCall(result.status, list(result.errors), raw, result.name)
        self.rejected.append(rejected)
        _log_rejected(rejected, position)
        if started is not None:
            self._output.push(Delta(tool_calls=[ToolCallDelta(started.index, status=result.status)]))
        if raw is not self._restored:  # several calls of one envelope share its text: put it back once
            self._restored = raw
            if self._rejected_text is not None:
                self._rejected_text(raw)

    def _accept(self, k: int, call: ParsedCall, name: str, started: _Started | None, raw: str) -> None:
        sending = self._output.sending
        if started is not None:
            call_id = started.id
            delta = ToolCallDelta(started.index, arguments=call.arguments_json[len("".join(started.sent)):]) \
                if sending else None
        else:
            call_id = self._call_id(k, call.id)
            index = self._stream_index if self._progressive else len(self.calls)
            self._stream_index += 1
            delta = ToolCallDelta(index, id=call_id, name=name, arguments=call.arguments_json) if sending else None
        if delta is not None and (delta.id is not None or delta.arguments):
            self._output.push(Delta(tool_calls=[delta]))
        self.calls.append(made_tool_call(call_id, name, call.arguments, call.arguments_json, raw))

    def reject_text(self, status: str, errors: list[str], raw: str, position: int) -> None:
        """Text in a call position that holds no call (an empty or junk call block)."""
        rejected = RejectedCall(status, errors, raw, None)
        self.rejected.append(rejected)
        _log_rejected(rejected, position)
        self._ordinal += 1
        if self._rejected_text is not None:
            self._rejected_text(raw)
