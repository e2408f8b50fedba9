"""A format's whole output as one grammar tree, from its declaration and its body kinds' layouts.

The pieces, in output order (each from `FormatSpec`, never written per format):
- reasoning: optional, or forced when the prompt opened it (`thinking_forced_open`, or a format
  whose output always starts inside reasoning), up to its closer; a format whose forced-open output
  needs its closer to be reasoning may also skip it;
- content: text in which none of the format's delimiters occurs (a call opener in it would open a call);
- the calls: envelopes (opener, then the body kind's `body_grammar`) inside the format's wrapper
  when it declares one, separated by a little whitespace (and the wrapper's framing markers);
- the end: a little whitespace after the last call; nothing else.

`tool_choice` decides which of these may occur (`Choice`): "none" has no calls; "auto" content and
then, optionally, calls; "required" and a named function calls only (after reasoning).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..grammar_ir import (
    EMPTY,
    SPACE,
    Alt,
    CallLayout,
    GrammarUnsupported,
    Lit,
    Members,
    Node,
    Regex,
    Repeat,
    Seq,
    Special,
    Text,
    alt,
    optional,
    seq,
)
from ..spec import FormatSpec
from ..validation import Tools

FRAMING_SPACE = SPACE  # between and around calls (`</tool_call>\n<tool_call>`)
_MODES = ("auto", "required", "none")


@dataclass(frozen=True)
class Choice:
    """What `tool_choice` and `parallel_tool_calls` allow: `mode` "none" | "auto" | "required",
    the tools that may be called, and the most calls (None: no bound)."""

    mode: str
    names: tuple[str, ...]
    most: int | None


def _function_name(entry: object, where: str) -> str:
    """The name in `{"type": "function", "function": {"name": ...}}`; ValueError saying the shape otherwise."""
    function = entry.get("function") if isinstance(entry, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(entry, Mapping) or entry.get("type") != "function" or not isinstance(name, str):
        raise ValueError(f"{where} must look like {{'type': 'function', 'function': {{'name': ...}}}}, "
                         f"got {entry!r}")
    return name


def _known(names: Iterable[str], tools: Tools | None, where: str) -> tuple[str, ...]:
    known = tools.names if tools is not None else ()
    for name in names:
        if name not in known:
            listed = ", ".join(map(repr, known)) or "none were given"
            raise ValueError(f"{where} names the tool {name!r}, which is not among the tools ({listed}); "
                             f"name one of them, or pass it in tools=")
    return tuple(names)


def choice_of(tool_choice: object, tools: Tools | None, parallel_tool_calls: bool) -> Choice:
    """`tool_choice` as OpenAI takes it, checked against the tools: "auto", "required", "none",
    `{"type": "function", "function": {"name": ...}}` (exactly one call of that tool), or
    `{"type": "allowed_tools", "allowed_tools": {"mode": "auto"|"required", "tools": [...]}}`."""
    if not isinstance(parallel_tool_calls, bool):
        raise TypeError(f"parallel_tool_calls must be True or False, got {parallel_tool_calls!r}")
    most = None if parallel_tool_calls else 1
    every = tools.names if tools is not None else ()
    if isinstance(tool_choice, str):
        if tool_choice not in _MODES:
            raise ValueError(f"tool_choice must be 'auto', 'required', 'none', a named function {{'type': "
                             f"'function', 'function': {{'name': ...}}}} or allowed_tools; got {tool_choice!r}")
        if tool_choice == "required" and not every:
            raise ValueError("tool_choice='required' needs tools: pass tools=, or use 'auto' or 'none'")
        return Choice(tool_choice, every if tool_choice != "none" else (), most)
    if isinstance(tool_choice, Mapping) and tool_choice.get("type") == "allowed_tools":
        allowed = tool_choice.get("allowed_tools")
        if not isinstance(allowed, Mapping) or allowed.get("mode") not in ("auto", "required") \
                or not isinstance(allowed.get("tools"), list) or not allowed["tools"]:
            raise ValueError("tool_choice allowed_tools must look like {'type': 'allowed_tools', 'allowed_tools': "
                             "{'mode': 'auto' or 'required', 'tools': [{'type': 'function', 'function': "
                             f"{{'name': ...}}}}, ...]}}}}; got {tool_choice!r}")
        names = [_function_name(entry, "each allowed_tools entry") for entry in allowed["tools"]]
        return Choice(str(allowed["mode"]), _known(dict.fromkeys(names), tools, "tool_choice allowed_tools"), most)
    if isinstance(tool_choice, Mapping):
        name = _function_name(tool_choice, "a named tool_choice")
        return Choice("required", _known((name,), tools, "tool_choice"), 1)
    raise ValueError(f"tool_choice must be 'auto', 'required', 'none', a named function or allowed_tools; "
                     f"got {type(tool_choice).__name__} {tool_choice!r}")


def parameters_of(tools: Tools, name: str) -> Mapping[str, Any]:
    """The tool's parameters schema, `{"type": "object"}` when it gave none (or an empty one), with
    `null` allowed for every property its object does not require: the tools check reads such a null
    as "not given" (`validation._optional_null`), so the grammar takes it too."""
    schema = tools.schema(name)
    if schema is True or not schema:
        return {"type": "object"}
    if schema is False:
        raise GrammarUnsupported(f"tool {name!r} has the parameters schema false: no call of it can be valid")
    return _optional_nullable(schema)  # type: ignore[no-any-return]


_NULL = {"type": "null"}


def _optional_nullable(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_optional_nullable(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: _optional_nullable(value) for key, value in schema.items() if key != "properties"}
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        required = schema.get("required", ())
        out["properties"] = {key: (sub if key in required or sub is True else {"anyOf": [sub, _NULL]})
                             for key, sub in ((k, _optional_nullable(v)) for k, v in properties.items())}
    return out


@dataclass(frozen=True)
class Output:
    """A format's output in its parts: what `tool_choice` allows before the calls (`lead`: reasoning
    and content, or reasoning only), the calls (None: no call is allowed), whether they may be left
    out, an unclosed reasoning block that calls may follow directly (formats whose call opener ends
    reasoning), and what may close the output (trailing framing such as GigaChat's stop marker)."""

    lead: Node
    calls: Node | None
    calls_optional: bool
    open_reasoning: Node | None = None
    end: Node = EMPTY
    content: Node = FRAMING_SPACE

    @property
    def whole(self) -> Node:
        if self.calls is None:
            return seq(self.lead, self.end)
        # The whitespace after the calls ends where a closing marker begins (a syntax may need to know:
        # a marker that is text, not a special token, could otherwise be taken for another call's start).
        closing = tuple(way.text for way in _ways(self.end) if isinstance(way, Lit) and way.text)
        tail = seq(self.calls, Regex(FRAMING_SPACE.pattern, stops=closing) if closing else FRAMING_SPACE)
        # With calls optional, content may follow them too (LFM2 writes its answer after the call).
        out = seq(self.lead, optional(seq(self.calls, self.content)) if self.calls_optional else tail)
        if self.open_reasoning is not None:
            out = alt(out, seq(self.open_reasoning, tail))
        return seq(out, self.end)


def _ways(node: Node) -> list[Node]:
    """The first pieces `node` may begin with (the options of a repeated alternative of markers)."""
    if isinstance(node, Repeat):
        return _ways(node.item)
    if isinstance(node, Alt):
        return [way for option in node.options for way in _ways(option)]
    return [node]


def envelope_output(spec: FormatSpec, tools: Tools | None, choice: Choice, thinking_forced_open: bool) -> Output:
    """The grammar of everything a format of envelopes (not headed messages: `output.output_grammar`)
    may write under `choice`, as its parts."""
    forced = spec.reasoning_always_open or (thinking_forced_open and not spec.ignores_forced_open)
    reasoning = _reasoning(spec, forced)
    content = _content(spec)
    # What may close the output: trailing framing (GigaChat's stop marker), and the format's framing
    # markers after the last call (Kimi K3's `<|close|>message<|sep|>` after its tools channel).
    closing = (*spec.trailing_framing, *spec.framing)
    end = Repeat(alt(*map(Lit, closing)), 0, 2, FRAMING_SPACE) if closing else EMPTY
    mark = spec.special
    if choice.mode == "none" or not choice.names or tools is None:
        if spec.anchors and not spec.envelopes:
            content = _not_a_call(spec)
        return Output(mark_special(seq(reasoning, content), mark), None, False, end=mark_special(end, mark))
    if spec.anchors and not spec.envelopes:
        anchored = _anchored(spec, tools, choice, reasoning)
        return Output(mark_special(anchored, mark), None, False, end=mark_special(end, mark))
    calls = mark_special(_calls(spec, tools, choice), mark)
    open_reasoning = None
    if spec.ends_reasoning_at_calls(forced) and spec.reasoning:
        stops = tuple(dict.fromkeys((*(closer for _, closer in spec.reasoning), *spec.call_openers)))
        opened = alt(*(Lit(opener) for opener, _ in spec.reasoning))
        open_reasoning = mark_special(Text(stops) if forced else seq(opened, Text(stops)), mark)
    # (Before required calls, the whitespace ends where a call or a framing marker begins.)
    before = Regex(FRAMING_SPACE.pattern, stops=tuple(dict.fromkeys((*call_openers(spec), *spec.framing))))
    if forced and spec.reasoning_yields_to_calls:  # calls where the output starts: no reasoning
        open_reasoning = before if open_reasoning is None else alt(open_reasoning, before)
    lead = seq(reasoning, content) if choice.mode == "auto" else seq(reasoning, before, _framing(spec))
    if any(getattr(envelope.body, "ends_output", False) for envelope in spec.envelopes):
        # An envelope that runs to the end of the output (no closer) would take what follows it.
        return Output(mark_special(lead, mark), calls, choice.mode == "auto", open_reasoning)
    return Output(mark_special(lead, mark), calls, choice.mode == "auto", open_reasoning, mark_special(end, mark),
                  mark_special(content, mark))


def reasoning_part(spec: FormatSpec, thinking_forced_open: bool) -> Node:
    """The reasoning the format's output may (or, forced open, must) start with, as `envelope_output`
    writes it: what may stand before an answer held to a JSON schema (`serve`'s response_format)."""
    forced = spec.reasoning_always_open or (thinking_forced_open and not spec.ignores_forced_open)
    return mark_special(_reasoning(spec, forced), spec.special)


def content_stops(spec: FormatSpec) -> tuple[str, ...]:
    """What content text may not hold: every delimiter the format reads, and its reserved strings."""
    return tuple(dict.fromkeys((*spec.delimiters, *spec.reserved)))


def _framing(spec: FormatSpec) -> Node:
    """Framing markers alone, whitespace after each: what may stand before required calls
    (Solar Open's `<|begin|>assistant` after reasoning)."""
    framing = [marker for marker in spec.framing if marker not in spec.call_openers]
    return Repeat(seq(alt(*map(Lit, framing)), FRAMING_SPACE)) if framing else EMPTY


def _content(spec: FormatSpec) -> Node:
    """Content: text, with the format's framing markers between pieces of it (they are dropped:
    Command R7B's `<|START_RESPONSE|>`); where the format frames the answer after reasoning
    (Granite's `<response>…</response>`), also the framed answer."""
    text: Node = Text(content_stops(spec))
    framing = [marker for marker in spec.framing if marker not in spec.call_openers]
    if framing:
        text = seq(text, Repeat(seq(alt(*map(Lit, framing)), text)))
    if spec.framing_after_reasoning is None:
        return text
    opener, closer = spec.framing_after_reasoning
    return alt(text, seq(Lit(opener), text, optional(seq(Lit(closer), text))))


def _reasoning(spec: FormatSpec, forced: bool) -> Node:
    if not spec.reasoning:
        return EMPTY
    # Where a call opener ends reasoning, reasoning cannot hold one.
    also = spec.call_openers if spec.ends_reasoning_at_calls(forced) else ()
    if forced:
        inside = alt(*(seq(Text((closer, *also)), Lit(closer)) for _, closer in spec.reasoning))
        return optional(inside) if spec.forced_reasoning_needs_closer else inside
    # The block opens at the start, after optional whitespace (GLM-4.5/4.6 write `⏎<think>`); it holds
    # none of its opener's closers (an opener declared in several pairs has several).
    closers: dict[str, tuple[str, ...]] = {}
    for opener, closer in spec.reasoning:
        closers[opener] = (*closers.get(opener, ()), closer)
    blocks = alt(*(seq(Lit(opener), Text((*closers[opener], *also)), Lit(closer)) for opener, closer in spec.reasoning))
    # The whitespace before it ends where its opener begins (a syntax may need to know: an opener that is
    # text, not a special token, would otherwise be read on into as content).
    space = Regex(FRAMING_SPACE.pattern, stops=tuple(dict.fromkeys(opener for opener, _ in spec.reasoning)))
    return optional(seq(space, blocks))


def _calls(spec: FormatSpec, tools: Tools, choice: Choice) -> Node:
    """One or more calls (at most `choice.most`), in the format's envelopes and wrapper."""
    envelopes: list[Node] = []
    unlaid: list[str] = []
    for envelope in spec.envelopes:
        body = _body(envelope.body, tools, choice)
        if body is None:
            unlaid.append(type(envelope.body).__name__)
            continue
        # Every spelling the format reads (GigaChat 3 and 3.1 open calls differently); the opener's
        # last `body_lead` characters are the body's own start (`functools[`); a kind that `writes_opener`
        # writes it with the call (an imported field's open pattern, where what follows depends on it).
        openers = EMPTY if getattr(envelope.body, "writes_opener", False) else \
            alt(*(Lit(opener[:len(opener) - envelope.body_lead]) for opener in envelope.openers))
        envelopes.append(seq(openers, body))
    if not envelopes:
        raise GrammarUnsupported(f"format {spec.name!r}: its body kind ({', '.join(unlaid)}) has no layout yet")
    one = alt(*envelopes)
    # Whitespace between calls ends at the next call or at the block's closer (it holds no delimiter),
    # which a syntax may need to know: content may follow the calls, beginning where it does.
    space: Node = Regex(FRAMING_SPACE.pattern, stops=tuple(stop for stop in content_stops(spec) if stop[:1].strip()))
    if all(getattr(envelope.body, "calls_adjacent", False) for envelope in spec.envelopes):
        space = EMPTY  # a body that ends only where the next call begins (`TemplateCalls.calls_adjacent`)
    if not spec.wrappers:
        return Repeat(one, 1, choice.most, space)
    # Every wrapper the format reads, each with its own closers (DeepSeek V3.2's `function_calls`
    # block and V4's `tool_calls` block).
    blocks: list[tuple[Node, Node]] = []
    for wrapper in spec.wrappers:
        between: Node = space
        if wrapper.framing:
            between = seq(space, optional(Lit(wrapper.framing[0])), space)
        inside = seq(alt(*map(Lit, wrapper.openers)), FRAMING_SPACE, Repeat(one, 1, choice.most, between), space)
        blocks.append((inside, alt(*map(Lit, wrapper.closers))))
    # The last block may be left open: the output's end closes it (DeepSeek V3 and Solar Open
    # templates write no closer after their calls).
    last = alt(*(seq(inside, optional(closer)) for inside, closer in blocks))
    if choice.most == 1:
        return last
    # (The whitespace between blocks ends where the next block opens.)
    again = Regex(FRAMING_SPACE.pattern, stops=call_openers(spec))
    closed = Repeat(alt(*(seq(inside, closer) for inside, closer in blocks)), 1, None, again)
    return seq(optional(seq(closed, again)), last)


def call_openers(spec: FormatSpec) -> tuple[str, ...]:
    """The text each constrained call block starts with: the wrappers' openers, or each envelope's."""
    if spec.wrappers:
        return tuple(dict.fromkeys(opener for wrapper in spec.wrappers for opener in wrapper.openers))
    return tuple(dict.fromkeys(opener[:len(opener) - envelope.body_lead]
                               for envelope in spec.envelopes for opener in envelope.openers))


def _not_a_call(spec: FormatSpec) -> Node:
    """Content of a format whose calls are anchored by position: text that cannot begin a call
    (it does not start with a bracket, and holds no trigger character); where an anchor says content
    stands only after its openers (`AnchorSpec.content_openers`), text after one of them."""
    stops = content_stops(spec) + tuple(anchor.trigger for anchor in spec.anchors if anchor.trigger)
    openers = _content_openers(spec)
    if openers:
        return optional(seq(alt(*map(Lit, openers)), Text(stops)))
    return optional(seq(Regex(r"[^ \t\r\n{\[]"), Text(stops)))


def _content_openers(spec: FormatSpec) -> tuple[str, ...]:
    return tuple(dict.fromkeys(opener for anchor in spec.anchors for opener in anchor.content_openers))


def _anchored(spec: FormatSpec, tools: Tools, choice: Choice, reasoning: Node) -> Node:
    """The output of a format whose calls are anchored by position (`AnchorSpec`): content alone; or
    calls where the output starts, or after one of their markers (framing and content before it),
    or after content where a trigger character begins them; each anchor's calls separated by its
    separator. Anchors whose kind has no layout (Llama's `python` code) are left out."""
    ways: list[Node] = []
    if choice.mode == "auto":
        ways.append(_not_a_call(spec))
    # What may stand before a marker that calls follow: framing markers, then (with "auto") content
    # that cannot itself begin a call (so that no reading of the text is left to the lexer).
    before = seq(_framing(spec), _not_a_call(spec)) if choice.mode == "auto" else _framing(spec)
    for anchor in spec.anchors:
        kind = anchor.body
        if not isinstance(kind, CallLayout):
            continue
        calls = alt(*(kind.call_grammar(name, parameters_of(tools, name)) for name in choice.names))
        separator = Lit(anchor.separator) if anchor.separator_required else optional(Regex(anchor.separator))
        between = seq(FRAMING_SPACE, separator, FRAMING_SPACE) if anchor.separator else FRAMING_SPACE
        body = kind.body_grammar(calls, choice.most is None and kind.calls_per_envelope() is None)
        run = Repeat(body, 1, 1 if anchor.must_end_output else choice.most, between)  # (one envelope ends the output)
        if anchor.at_start:  # no whitespace first: llguidance cannot begin a lexeme-free way with it
            ways.append(run)
        if anchor.after and anchor.content_openers:  # (a text then a literal: one way, for Lark's lazy lexeme)
            text = Text(content_stops(spec)) if choice.mode == "auto" else EMPTY
            ways.append(seq(_framing(spec), alt(*map(Lit, anchor.after)), FRAMING_SPACE, run))
            ways.append(seq(alt(*map(Lit, anchor.content_openers)), text, alt(*map(Lit, anchor.after)),
                            FRAMING_SPACE, run))
        elif anchor.after:
            ways.append(seq(before, alt(*map(Lit, anchor.after)), FRAMING_SPACE, run))
        if anchor.trigger:
            ways.append(seq(_not_a_call(spec) if choice.mode == "auto" else EMPTY, run))
    if not ways:
        raise GrammarUnsupported(f"format {spec.name!r}: none of its anchored kinds has a layout")
    return seq(reasoning, alt(*ways))


def _body(kind: object, tools: Tools, choice: Choice) -> Node | None:
    """An envelope body of this kind holding calls of the chosen tools (several, for a list kind,
    when `choice` allows more than one); None when the kind has no layout."""
    if isinstance(kind, CallLayout):
        calls = alt(*(kind.call_grammar(name, parameters_of(tools, name)) for name in choice.names))
        return kind.body_grammar(calls, choice.most is None and kind.calls_per_envelope() is None)
    layouts = getattr(kind, "layouts", None)
    if layouts is None:
        return None
    bodies = []
    closers = getattr(kind, "closers", ())
    for chosen in layouts():
        body = _body(chosen, tools, choice)
        if body is not None:  # the choosing kind's closer ends a body whose kind has none (LFM2's pythonic list)
            bodies.append(seq(body, SPACE, Lit(closers[0])) if closers and not getattr(chosen, "closers", ()) else body)
    return alt(*bodies) if bodies else None


def mark_special(node: Node, special: Sequence[str]) -> Node:
    """The tree with every occurrence of a special token inside a `Lit` made a `Special`."""
    if not special:
        return node
    ordered = sorted(set(special), key=len, reverse=True)
    return _marked(node, ordered)


def _marked(node: Node, special: list[str]) -> Node:
    if isinstance(node, Lit):
        return _split(node.text, special)
    if isinstance(node, Seq):
        return seq(*(_marked(item, special) for item in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_marked(option, special) for option in node.options))
    if isinstance(node, Repeat):
        separator = None if node.separator is None else _marked(node.separator, special)
        return Repeat(_marked(node.item, special), node.min, node.max, separator)
    if isinstance(node, Members):
        return Members(tuple((_marked(member, special), required) for member, required in node.members),
                       _marked(node.separator, special), node.at_least_one)
    return node


def _split(text: str, special: list[str]) -> Node:
    parts: list[Node] = []
    start = pos = 0
    while pos < len(text):
        token = next((s for s in special if text.startswith(s, pos)), None)
        if token is None:
            pos += 1
            continue
        parts += [Lit(text[start:pos]), Special(token)]
        pos = start = pos + len(token)
    parts.append(Lit(text[start:]))
    return seq(*parts)
