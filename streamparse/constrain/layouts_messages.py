"""The whole output of a headed-messages format (gpt-oss harmony, Functionary v3.2) as one grammar,
from its `MessageSpec.layout`: the headers its templates write, in the order they write messages.

    [reasoning message]  then  the answer (content)  or  [a content/preamble message] and the calls

The first message's header lacks what the generation prompt already wrote (`<|start|>assistant`,
`>>>`); a message another one follows ends with the layout's terminator (harmony's `<|end|>`); the
last one ends the output (its stop token, `<|return|>` or `<|call|>`, may be written: xgrammar's
built-in harmony tag requires it, a server cuts it off). A call
message's body is the tool's arguments as JSON (the `json_arguments` kind reads exactly that), or,
where the body kind `MessageSpec.call` makes says how it writes a call (`grammar_ir.CallLayout`: Muse
Glimmer's ATEM block), that.
Harmony's `<|call|>` ends generation, so one call message ends its output (`many_calls`); Functionary
writes one message per call, up to `parallel_tool_calls`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..grammar_ir import GrammarUnsupported, Json, Lit, Node, Regex, Repeat, Text, alt, optional, seq
from ..spec import BodyKind, FormatSpec, MessageLayout
from ..validation import Tools
from .assemble import Choice, Output, mark_special, parameters_of

# A content message followed by another one must not end in the first character of the next
# header's opener: `…>` then `>>>get_weather` would read as the recipient `>get_weather`.
_NAME_STOPS = ("<|", ">", "\n", " ")


def messages_output(spec: FormatSpec, tools: Tools | None, choice: Choice,
                    thinking_forced_open: bool = False) -> Output:
    """The grammar of everything the model of a headed-messages format may write under `choice`. With
    `thinking_forced_open`, where the format names the header such a prompt ends with
    (`MessageSpec.forced_open_header`), the output starts inside that reasoning message's body."""
    messages = spec.messages
    assert messages is not None
    layout = messages.layout
    if layout is None:
        raise GrammarUnsupported(f"format {spec.name!r} writes headed messages but declares no MessageLayout")
    stops = tuple(dict.fromkeys((*messages.openers, *messages.terminators, *spec.special)))
    writer = _Writer(layout, stops, messages.call)
    calls = choice.mode != "none" and bool(choice.names) and tools is not None
    after_reasoning: dict[bool, Node] = {}
    for first in (True, False):
        answer = writer.content(first)
        if not calls:
            after_reasoning[first] = answer
            continue
        assert tools is not None
        called = writer.calls(first, [(name, parameters_of(tools, name)) for name in choice.names], choice.most,
                              preamble=choice.mode == "auto")
        after_reasoning[first] = alt(answer, called) if choice.mode == "auto" else called
    whole = after_reasoning[True]
    if layout.reasoning is not None and thinking_forced_open and messages.forced_open_header:
        whole = seq(Text(stops), Lit(layout.end), after_reasoning[False])
    elif layout.reasoning is not None:
        whole = alt(seq(writer.message(layout.reasoning, Text(stops), True, ended=True), after_reasoning[False]),
                    whole)
    return Output(mark_special(whole, spec.special), None, False)


def _stop(token: str) -> Node:
    """The stop token that may end the output (servers cut it off; an engine may want it written)."""
    return optional(Lit(token)) if token else Lit("")


class _Writer:
    def __init__(self, layout: MessageLayout, stops: tuple[str, ...], kind: Callable[[str], BodyKind]) -> None:
        self._layout, self._stops, self._kind = layout, stops, kind

    def _body(self, name: str, parameters: Mapping[str, Any]) -> Node:
        """A call message's body: its kind's layout, or the arguments as JSON."""
        kind: Any = self._kind(name)
        if hasattr(kind, "call_grammar"):
            return kind.body_grammar(kind.call_grammar(name, parameters), False)  # type: ignore[no-any-return]
        return Json(parameters)

    def header(self, text: str, first: bool) -> Node:
        return Lit(text.removeprefix(self._layout.prompt_wrote) if first else text)

    def message(self, header: str, body: Node, first: bool, *, ended: bool) -> Node:
        return seq(self.header(header, first), body, Lit(self._layout.end) if ended else Lit(""))

    def content(self, first: bool) -> Node:
        """The answer, ending the output."""
        return seq(self.message(self._layout.content, Text(self._stops), first, ended=False),
                   _stop(self._layout.answer_stop))

    def _before_more(self) -> Node:
        """A body another message follows: without a terminator, it must not end in what starts the
        next header (Functionary's `>`), or the header would read from there."""
        if self._layout.end:
            return Text(self._stops)
        if len(self._stops) != 1 or len(set(self._stops[0])) != 1:
            raise GrammarUnsupported("a message body with no terminator must end before one repeated-character opener")
        # Text without the opener (a run of one character, `>>>`) that does not end in its character:
        # each shorter run of it is followed by another character.
        opener = self._stops[0]
        char = re.escape(opener[0])
        runs = "|".join(f"{char * count}[^{char}]" for count in range(len(opener)))
        return Regex(f"(?:{runs})*", stops=(opener,))

    def calls(self, first: bool, tools: list[tuple[str, Mapping[str, Any]]], most: int | None, *,
              preamble: bool) -> Node:
        """One call message or more, ending the output; with `preamble`, a content message may come
        first (under "required" and a named tool only an empty one: the calls come alone, as in every
        format)."""
        layout = self._layout

        def call(at_first: bool) -> Node:
            return alt(*(seq(self.header(self._call_header(name), at_first), self._body(name, parameters))
                         for name, parameters in tools))

        def run(at_first: bool) -> Node:
            if not layout.many_calls or most == 1:
                return seq(call(at_first), _stop(layout.call_stop))
            more = Repeat(seq(Lit(layout.end), call(False)), 0, None if most is None else most - 1)
            return seq(call(at_first), more, _stop(layout.call_stop))

        if layout.preamble is None:
            return run(first)
        # Under "required" a content message may come first only empty (what a render of the calls
        # alone keeps of it: Functionary's `all⏎` then `>>>`).
        body = self._before_more() if preamble else Lit("")
        before = self.message(layout.preamble, body, first, ended=True)
        return alt(seq(before, run(False)), run(first))

    def _call_header(self, name: str) -> str:
        if not name or any(stop in name for stop in (*_NAME_STOPS, *self._stops)):
            raise GrammarUnsupported(f"the tool name {name!r} cannot be written in a message header; rename it")
        return self._layout.call.replace("{name}", name)
