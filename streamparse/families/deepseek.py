"""DeepSeek R1 / V3 (fenced JSON calls) and V3.1 (`NAME<｜tool▁sep｜>{…}`): `<think>` reasoning.

Both formats wrap calls in `<｜tool▁calls▁begin｜>` … `<｜tool▁calls▁end｜>` (older spellings of
these outer markers included) around `<｜tool▁call▁begin｜>` … `<｜tool▁call▁end｜>` envelopes; they
differ only in the envelope body, which each reads with its own grammar (`formats/deepseek_r1.peg`,
`formats/deepseek_v3_1.peg`). Everything else — the scanner, the progressive streamer, the visitor
— is shared. Real V3/R1-Distill templates omit `<｜tool▁calls▁end｜>` after a single call and write
it again after later calls; the engine's wrapper rules (an unclosed wrapper ends with the output,
a closer right after a bare call belongs to that call) read both.
"""

from __future__ import annotations

import json
import re
from typing import Any

from parsimonious.exceptions import ParseError
from parsimonious.grammar import Grammar
from parsimonious.nodes import Node, NodeVisitor

from ..grammar import DECODER, ValueNode, load_grammar
from ..scanning import JsonAwareScanner
from ..spec import (
    ArgumentsFragment,
    CallResult,
    CallStart,
    Envelope,
    EnvelopeSpec,
    FormatSpec,
    ParsedCall,
    Rejection,
    StreamEvent,
    WrapperSpec,
    reasoning_block,
)
from ..types import INVALID_JSON, TRUNCATED, Message
from ..validation import ToolSet

THINK = ("<think>", "</think>")
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
# Older spellings of the outer markers (early R1 releases and quantisations).
CALLS_OPENERS = (CALLS_BEGIN, "<｜tool_calls_begin｜>", "<｜tool calls begin｜>", "<｜tool▁calls｜>")
CALLS_CLOSERS = (CALLS_END, "<｜tool_calls_end｜>", "<｜tool calls end｜>")

_JSON_WHITESPACE = " \t\n\r"


_IN_STRING = re.compile(r'["\\]')


# ----------------------------------------------------------------- reading an envelope body

class _CallVisitor(NodeVisitor):  # type: ignore[misc]
    """`body` → (name, arguments node); `header` → name. Shared by both grammars."""

    def visit_body(self, node: Node, children: list[Any]) -> tuple[str, ValueNode]:
        header, _, arguments, _ = children
        assert isinstance(arguments, ValueNode)
        return header, arguments

    def visit_header(self, node: Node, children: list[Any]) -> str:
        return next(child for child in children if isinstance(child, str))

    def visit_name(self, node: Node, children: list[Any]) -> str:
        return str(node.text).strip()

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _CallVisitor()


class _BodyReader:
    """Turns one envelope body into a call with a format's grammar; explains what is wrong if it cannot."""

    def __init__(self, grammar: str, shape: str) -> None:
        self._grammar_name = grammar
        self._shape = shape  # how a call starts, for error messages

    @property
    def grammar(self) -> Grammar:
        return load_grammar(self._grammar_name)

    def __call__(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        body = envelope.body
        if not body.strip():
            if not envelope.complete:
                return [Rejection(TRUNCATED, [f"the output ended right after {envelope.opener}"])]
            return [Rejection(INVALID_JSON, ["empty tool call: nothing between its markers"])]
        try:
            name, arguments = _VISITOR.visit(self.grammar.parse(body))
        except ParseError:
            if not envelope.complete:
                return [Rejection(TRUNCATED, ["the output ended inside the tool call before it was complete"])]
            return [Rejection(INVALID_JSON, [self._diagnose(body)])]
        if not name:
            status = TRUNCATED if not envelope.complete else INVALID_JSON
            return [Rejection(status, ["the call has no function name before its arguments"])]
        return [ParsedCall(name, arguments.value, arguments.text)]

    def _diagnose(self, body: str) -> str:
        grammar = self.grammar
        try:
            pos = grammar["header"].match(body).end
        except ParseError:
            return f"the call does not start with {self._shape}"
        pos = grammar["lead"].match(body, pos).end
        try:
            value, end = DECODER.raw_decode(body, pos)
        except ValueError as error:
            return f"the arguments are not valid JSON: {error}"
        if not isinstance(value, dict):
            return f"the arguments must be a JSON object, got {type(value).__name__}"
        return f"unexpected text after the arguments at character {end}: {body[end:end + 20]!r}"


# ----------------------------------------------------------------- progressive mode

_JSON_STRUCTURE = re.compile(r'["\[\]{}]')
_HEADER, _LEAD, _ARGUMENTS, _DONE = range(4)


class JsonAfterHeaderStreamer:
    """A call written as a header that names it, then a JSON object that is its arguments.

    The header ends at the first occurrence of each of `header_ends` in turn; it is read once with
    the grammar's `header` rule, which gives the name (sent at once). The text up to the object's
    `{` must match the `lead` rule. The object is then sent as the raw text the model writes —
    exactly the `arguments_json` the final parse keeps — with trailing whitespace held back, until
    it closes; nothing after it is sent. Cost: every character is looked at once (`str.find` and
    regex jumps); the header and lead are parsed once each.
    Could move to `streaming.py`: only the grammar and the header ends are the format's."""

    def __init__(self, grammar: str, header_ends: tuple[str, ...]) -> None:
        self._grammar = load_grammar(grammar)
        self._header_ends = header_ends
        self._phase = _HEADER
        self._step = 0  # which of `header_ends` is looked for
        self._tail = ""  # the end of the text searched so far, which could begin that marker
        self._held: list[str] = []  # header or lead text so far
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._pending_ws: list[str] = []  # whitespace at the end of the object text so far

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        text = body
        while text and self._phase != _DONE:
            if self._phase == _HEADER:
                text = self._read_header(text, events)
            elif self._phase == _LEAD:
                text = self._read_lead(text)
            else:
                text = self._read_arguments(text, events)
        return events

    def _read_header(self, text: str, events: list[StreamEvent]) -> str:
        marker = self._header_ends[self._step]
        window = self._tail + text
        found = window.find(marker)
        if found < 0:
            self._held.append(text)
            keep = len(marker) - 1
            self._tail = window[-keep:] if keep else ""
            return ""
        cut = found + len(marker) - len(self._tail)
        self._held.append(text[:cut])
        self._tail = ""
        self._step += 1
        if self._step == len(self._header_ends):
            header, self._held = "".join(self._held), []
            try:
                name = _VISITOR.visit(self._grammar["header"].parse(header))
            except ParseError:
                name = ""
            if not name:
                self._phase = _DONE
                return ""
            events.append(CallStart(0, name))
            self._phase = _LEAD
        return text[cut:]

    def _read_lead(self, text: str) -> str:
        brace = text.find("{")
        if brace < 0:
            self._held.append(text)
            return ""
        self._held.append(text[:brace])
        lead, self._held = "".join(self._held), []
        try:
            self._grammar["lead"].parse(lead)
        except ParseError:
            self._phase = _DONE
            return ""
        self._phase = _ARGUMENTS
        return text[brace:]

    def _read_arguments(self, text: str, events: list[StreamEvent]) -> str:
        pos, size = 0, len(text)
        while pos < size:
            if self._escaped:
                self._escaped = False
                pos += 1
            elif self._in_string:
                match = _IN_STRING.search(text, pos)
                if match is None:
                    break
                if match.group() == "\\":
                    self._escaped = True
                else:
                    self._in_string = False
                pos = match.end()
            else:
                match = _JSON_STRUCTURE.search(text, pos)
                if match is None:
                    break
                found = match.group()
                pos = match.end()
                if found == '"':
                    self._in_string = True
                elif found in "[{":
                    self._depth += 1
                else:
                    self._depth -= 1
                    if self._depth <= 0:
                        self._send(text[:pos], events)
                        self._phase = _DONE
                        return ""
        self._send(text, events)
        return ""

    def _send(self, text: str, events: list[StreamEvent]) -> None:
        end = len(text.rstrip(_JSON_WHITESPACE))
        if not end:
            if text:
                self._pending_ws.append(text)
            return
        out = "".join(self._pending_ws) + text[:end]
        self._pending_ws = [text[end:]] if end < len(text) else []
        events.append(ArgumentsFragment(0, out))


# ----------------------------------------------------------------- writing a message back

def _arguments_text(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def render_r1(message: Message) -> str:
    """The message as DeepSeek R1 / V3 writes it (the V3-0324 template's layout)."""
    out = reasoning_block(message) + message.content
    if message.tool_calls:
        calls = "\n".join(
            f"{CALL_BEGIN}function{SEP}{call.name}\n```json\n{_arguments_text(call.arguments)}\n```{CALL_END}"
            for call in message.tool_calls
        )
        out += CALLS_BEGIN + calls + CALLS_END
    return out


def render_v3_1(message: Message) -> str:
    """The message as DeepSeek V3.1 writes it (with an explicit `<think>` where there is reasoning)."""
    out = f"<think>{message.reasoning}</think>" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "".join(
            f"{CALL_BEGIN}{call.name}{SEP}{_arguments_text(call.arguments)}{CALL_END}" for call in message.tool_calls
        )
        out += CALLS_BEGIN + calls + CALLS_END
    return out


# ----------------------------------------------------------------- the formats

def _envelope(grammar: str, header_ends: tuple[str, ...]) -> EnvelopeSpec:
    return EnvelopeSpec(
        openers=(CALL_BEGIN,),
        scanner=lambda: JsonAwareScanner((CALL_END,), (CALL_BEGIN, *CALLS_CLOSERS)),
        streamer=lambda tools: JsonAfterHeaderStreamer(grammar, header_ends),
    )


_CALLS_BLOCK = WrapperSpec(openers=CALLS_OPENERS, closers=CALLS_CLOSERS)
# Added tokens of the DeepSeek V3 / R1 / V3.1 vocabulary (the older marker spellings are not).
_SPECIAL = (*THINK, CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END)

DEEPSEEK_R1 = FormatSpec(
    name="deepseek_r1",
    aliases=("deepseek_v3",),
    reasoning=(THINK,),
    envelopes=(_envelope("deepseek_r1", (SEP, "\n")),),
    wrappers=(_CALLS_BLOCK,),
    parse_envelope=_BodyReader("deepseek_r1", f"function{SEP}NAME and a newline"),
    render=render_r1,
    special=_SPECIAL,
)

DEEPSEEK_V3_1 = FormatSpec(
    name="deepseek_v3_1",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(_envelope("deepseek_v3_1", (SEP,)),),
    wrappers=(_CALLS_BLOCK,),
    parse_envelope=_BodyReader("deepseek_v3_1", f"NAME{SEP}"),
    render=render_v3_1,
    special=_SPECIAL,
)

FORMATS = (DEEPSEEK_R1, DEEPSEEK_V3_1)
