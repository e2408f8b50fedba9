"""A format derived from a chat template: `derive_format(chat_template) -> FormatSpec`.

The template is rendered on probe conversations that differ in one thing (llama.cpp's autoparser does
the same, "differential analysis"): an assistant turn with content only, with reasoning, with one call
of one argument, of two arguments, of none, with two calls; sentinel names, argument names, values and
call ids. An assistant turn rendered after the conversation's generation prompt is the text the model
writes; where the sentinels land in it places each part of the layout:

- the end of a turn (what follows the content: stripped, and framing where a server leaves it in);
- the reasoning block (what comes before and after the reasoning sentinel), or, for a template that
  never renders reasoning, its generation prompt's open tag with the mirrored closer the template names;
- the calls, in one of three layouts on the existing body kinds: a JSON call object or list (`json_call`:
  the keys that hold the name, the arguments, the id), a name then JSON arguments (`header_json`, with a
  grammar made for the markers found), or a name then tagged parameters (`tagged_params`, likewise);
- per call, the markers around one call (what the one-call and two-call renders share before and after
  each), and a wrapper around the calls (what is left).

Nothing is looked up among the declared formats. The derived declaration must read back every probe
render as the probe message; one that does not is refused. A part that cannot be placed raises
`DeriveError` naming it. The template is untrusted code: every render goes through `ChatTemplate`'s
sandbox, and the whole derivation runs within one deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .bodies.first_character import FirstCharacter
from .bodies.header_json import HeaderJson
from .bodies.json_call import JsonCall
from .bodies.tagged_params import TaggedParams
from .grammar import define_grammar
from .spec import AnchorSpec, BodyKind, EnvelopeSpec, FormatSpec, WrapperSpec
from .types import Message

__all__ = ["Derivation", "DeriveError", "derive", "derive_format"]

# Sentinels: plain words no template writes by itself (names and ids of letters and digits: templates
# check them; Mistral's accept only ids of nine).
_USER = "askzqprobe"
_CONTENT = "contentzqmark"
_REASONING = "reasonzqmark"
_NAMES = ("alphazqfn", "betazqfn")
_KEYS = ("qzqarg", "rzqarg")
_VALUES = ("XXXXzq", "YYYYzq")
_IDS = ("zqcallid1", "zqcallid2")
_BOOL_KEY = "bzqarg"
_THINKING_KWARGS: tuple[dict[str, Any], ...] = ({}, {"enable_thinking": True}, {"thinking": True})
_DEADLINE = 20.0  # seconds for the whole derivation

# A marker a template writes: a special-token-like piece (`<|x|>`, `<｜x｜>`, `<x>`, `</x>`, `[X]`).
_MARKER = re.compile(r"<[|｜][^<>]*?[|｜]>|</?[A-Za-z_][^<>\s]*>|\[/?[A-Z_]+\]|<[A-Za-z_]+[=:]")
_WS = " \t\r\n"


class DeriveError(ValueError):
    """The template's layout could not be derived: `part` names what could not be placed."""

    def __init__(self, part: str, why: str) -> None:
        super().__init__(f"derive_format: could not place the {part}: {why}")
        self.part = part


@dataclass(frozen=True)
class Derivation:
    """What the probes found, for inspection (`streamparse detect --show`), and the declaration built on it."""

    spec: FormatSpec
    kwargs: Mapping[str, Any]  # the template variables the probes were rendered with (thinking on)
    reasoning: tuple[str, str] | None
    forced_open: bool  # the generation prompt opens the reasoning block
    layout: str  # json_call, header_json or tagged_params
    found: Mapping[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """The derived layout, one part a line."""
        lines = [f"derived format {self.spec.name} (from probe renders; kwargs {dict(self.kwargs) or '-'})"]
        if self.reasoning:
            lines.append(f"  reasoning: {self.reasoning[0]!r} ... {self.reasoning[1]!r}"
                         + (" (opened by the generation prompt)" if self.forced_open else ""))
        else:
            lines.append("  reasoning: none")
        lines.append(f"  calls: {self.layout}")
        lines += [f"  {part}: {value!r}" for part, value in self.found.items()]
        return "\n".join(lines)


# ----------------------------------------------------------------- rendering the probes

def _tools() -> list[dict[str, Any]]:
    properties = {key: {"type": "string", "description": f"{key} probe"} for key in _KEYS}
    properties[_BOOL_KEY] = {"type": "boolean", "description": "flag probe"}
    return [{"type": "function", "function": {"name": name, "description": f"{name} probe",
                                              "parameters": {"type": "object", "properties": properties}}}
            for name in _NAMES]


def _call(index: int, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": _IDS[index], "type": "function",
            "function": {"name": _NAMES[index], "arguments": json.dumps(arguments)}}


def _message(content: str | None = None, reasoning: str | None = None,
             calls: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        turn["reasoning_content"] = reasoning
    if calls:
        turn["tool_calls"] = [_call(i, arguments) for i, arguments in enumerate(calls)]
    return turn


class _Renderer:
    """Renders a probe turn after the generation prompt; what the model writes is the difference."""

    def __init__(self, template: Any, kwargs: Mapping[str, Any]) -> None:
        self.template = template
        self.kwargs = dict(kwargs)
        self.tools: list[dict[str, Any]] = _tools()
        self.ends: tuple[str, ...] = ()

    def _render(self, messages: list[Mapping[str, Any]], generation: bool, given: tuple[str, str]) -> str:
        """Rendered in the sandbox, within its deadline, without `ChatTemplate.render`'s capability checks
        (a probe is what finds what the template renders); `given` is how a null content and the
        arguments are passed (`Capabilities.null_content`, `.arguments`)."""
        variables = self.template._variables(messages, self.tools or None, generation, self.kwargs, *given)
        return str(self.template._render_prepared(variables))

    def prompt(self) -> str:
        from .serve.errors import TemplateRenderError

        try:
            return self._render([{"role": "user", "content": _USER}], True, ("absent", "object"))
        except TemplateRenderError:
            if not self.tools:
                raise
        self.tools = []  # a template that cannot render tool lists (Apertus's wants other fields): none
        return self._render([{"role": "user", "content": _USER}], True, ("absent", "object"))

    def turn(self, message: Mapping[str, Any]) -> str | None:
        """The assistant turn as the model writes it (the end of turn cut off), or None where the
        template refuses it. Calls are given as transformers gives them, else as the template takes them."""
        from .serve.errors import TemplateRenderError

        full = None
        for given in (("absent", "object"), ("empty", "object"), ("absent", "text"), ("empty", "text")):
            try:
                prompt = self.prompt()
                full = self._render([{"role": "user", "content": _USER}, message], False, given)
            except TemplateRenderError:
                continue
            if not message.get("tool_calls") or ((_NAMES[0] in full or _IDS[0] in full) and not _python_repr(full)):
                break
        if full is None:
            return None
        at = len(prompt)
        if not full.startswith(prompt):  # the turn does not continue the prompt: from where they part,
            at = _shared(prompt, full)  # at a marker's or a line's start
            while at and full[at - 1] not in _WS + ">]":
                at -= 1
        return self.cut_end(full[at:])

    def cut_end(self, text: str) -> str:
        text = text.rstrip(_WS)
        cut = True
        while cut:
            cut = False
            for end in self.ends:
                if end and text.endswith(end):
                    text = text[:-len(end)].rstrip(_WS)
                    cut = True
        return text


# ----------------------------------------------------------------- text helpers

def _shared(a: str, b: str) -> int:
    """How many characters `a` and `b` start with alike."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: str, b: str) -> str:
    """The longest common end of `a` and `b` that starts where a marker or whitespace does."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    found = a[len(a) - n:]
    while found and found[0] not in _WS + "<[{":
        found = found[1:]
    return found


def _common_prefix(a: str, b: str) -> str:
    """The longest common start of `a` and `b` that ends where a marker or whitespace does."""
    found = a[:_shared(a, b)]
    while found and found[-1] not in _WS + ">]}":
        found = found[:-1]
    return found


def _markers(text: str) -> list[str]:
    """`text` cut into markers at whitespace outside angle brackets (`<invoke name="` is one)."""
    pieces, piece, depth = [], "", 0
    for char in text.strip(_WS):
        depth += (char == "<") - (char == ">" and depth > 0)
        if char in _WS and depth == 0:
            if piece:
                pieces.append(piece)
            piece = ""
        else:
            piece += char
    return [*pieces, piece] if piece else pieces


def _python_repr(text: str) -> bool:
    """Whether a render printed the probe arguments with Python's `repr` (`{'qzqarg': 'XXXXzq'}`): a
    template that takes them as JSON text (Apriel 1.5) is then given them so."""
    return any(f"'{value}'" in text for value in _VALUES) and not any(f'"{value}"' in text for value in _VALUES)


def _tokens(text: str) -> list[str]:
    """`_markers`, each cut further into the special-token-like markers it is made of, where it is
    made only of them (`</tool_calls><｜hy_eos｜>` is two)."""
    out: list[str] = []
    for piece in _markers(text):
        parts = _MARKER.findall(piece)
        out += parts if parts and "".join(parts) == piece else [piece]
    return out


def _json_at(text: str, value: Any) -> tuple[int, int] | None:
    """Where a JSON text equal to `value` starts and ends in `text` (the first), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{\"]", text):
        try:
            found, end = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if found == value:
            return match.start(), end
    return None


def _word(text: str, word: str, start: int = 0) -> int:
    at = text.find(word, start)
    if at < 0:
        raise DeriveError("call layout", f"the sentinel {word!r} is not in the rendered call {text!r}")
    return at


# ----------------------------------------------------------------- the parts

@dataclass
class _Found:
    kwargs: dict[str, Any]
    ends: tuple[str, ...]
    content_framing: tuple[str, ...]
    reasoning: tuple[str, str] | None
    forced_open: bool
    renders: dict[str, tuple[dict[str, Any], str]]  # probe name: (message, what the model writes)


def _end_of_turn(renderer: _Renderer) -> tuple[tuple[str, ...], str]:
    """The end-of-turn markers (what follows the content) and what precedes the content."""
    renderer.ends = ()
    text = renderer.turn(_message(_CONTENT))
    if text is None or _CONTENT not in text:
        raise DeriveError("content", "the template does not render an assistant turn's content")
    at = text.index(_CONTENT)
    return tuple(_tokens(text[at + len(_CONTENT):])), text[:at]


def _mirrored_tags(text: str) -> list[tuple[str, str]]:
    """Reasoning tag pairs the template text names: `<X>`/`</X>` or `[X]`/`[/X]` whose name speaks of thinking."""
    pairs = []
    for opener in dict.fromkeys(re.findall(r"<[A-Za-z_]*(?:think|reason)[A-Za-z_]*>|\[[A-Z_]*(?:THINK|REASON)[A-Z_]*\]",
                                           text, re.IGNORECASE)):
        closer = f"</{opener[1:]}" if opener.startswith("<") else f"[/{opener[1:]}"
        if closer in text:
            pairs.append((opener, closer))
    return pairs


def _reasoning(template: Any, ends: tuple[str, ...], before_content: str,
               text_of_template: str) -> tuple[dict[str, Any], tuple[str, str] | None, bool, tuple[str, ...]]:
    """(kwargs, reasoning tags, forced open, content framing) from the reasoning probe, thinking on."""
    for kwargs in _THINKING_KWARGS:
        renderer = _Renderer(template, kwargs)
        renderer.ends = ends
        try:
            prompt = renderer.prompt()
        except Exception:
            continue
        for message in (_message(_CONTENT, _REASONING), _message(None, _REASONING, [{_KEYS[0]: _VALUES[0]}])):
            text = renderer.turn(message)
            if text is None or _REASONING not in text:
                continue
            at = text.index(_REASONING)
            opener = text[:at].strip(_WS)
            after = text[at + len(_REASONING):]
            closer_text = after[:after.index(_CONTENT)] if _CONTENT in after else after
            closer = closer_text.strip(_WS)
            forced = not opener
            if forced:  # the generation prompt wrote the opener: its last marker
                tail = _tokens(prompt)
                opener = tail[-1] if tail else ""
            framing = before_content.strip(_WS)
            if closer and framing.startswith(closer):  # the content turn's empty block, closed
                framing = framing[len(closer):].strip(_WS)
            if framing and closer.endswith(framing):  # the content's own opener after the reasoning's closer
                closer = closer[:-len(framing)].strip(_WS)
            if not opener or not closer or _CONTENT in closer:
                raise DeriveError("reasoning block", f"the reasoning renders as {text!r}: no opener and closer "
                                                     "around it")
            closer = _markers(closer)[0] if _MARKER.fullmatch(_markers(closer)[0]) else closer
            empty = re.match(r"\s*(?:" + re.escape(opener) + r")?\s*" + re.escape(closer) + r"\s*", before_content)
            content_framing = tuple(_markers(before_content[empty.end():] if empty else before_content))
            return kwargs, (opener, closer), forced, content_framing
    # No reasoning rendered: the prompt's open tag (or one the template names), closed by its mirror.
    renderer = _Renderer(template, {})
    prompt_tail = _markers(renderer.prompt())[-1:] if before_content.strip(_WS) == "" else []
    for opener, closer in _mirrored_tags(text_of_template):
        forced = bool(prompt_tail) and prompt_tail[0] == opener
        return {}, (opener, closer), forced, tuple(_markers(before_content))
    return {}, None, False, tuple(_markers(before_content))


def _probe(template: Any, text_of_template: str) -> _Found:
    base = _Renderer(template, {})
    ends, before_content = _end_of_turn(base)
    kwargs, reasoning, forced, framing = _reasoning(template, ends, before_content, text_of_template)
    renderer = _Renderer(template, kwargs)
    renderer.ends = ends
    probes = {
        "content": _message(_CONTENT),
        "one_call": _message(None, None, [{_KEYS[0]: _VALUES[0]}]),
        "two_arguments": _message(None, None, [{_KEYS[0]: _VALUES[0], _KEYS[1]: _VALUES[1]}]),
        "no_arguments": _message(None, None, [{}]),
        "two_calls": _message(None, None, [{_KEYS[0]: _VALUES[0]}, {_KEYS[0]: _VALUES[1]}]),
        "boolean": _message(None, None, [{_BOOL_KEY: True}]),
    }
    if reasoning is not None:
        probes["reasoning"] = _message(_CONTENT, _REASONING)
    renders: dict[str, tuple[dict[str, Any], str]] = {}
    for name, message in probes.items():
        text = renderer.turn(message)
        if name == "two_calls" and text is not None and _NAMES[1] not in text:
            text = None  # the template renders only the first call of a turn (GigaChat 3.1)
        if text is not None and (name != "reasoning" or _REASONING in text):
            renders[name] = (message, _strip_lead(text, reasoning, framing))
    return _Found(kwargs, ends, framing, reasoning, forced, renders)


def _strip_lead(text: str, reasoning: tuple[str, str] | None, framing: tuple[str, ...]) -> str:
    """A call render without what precedes every turn: an empty reasoning block, the content's framing."""
    text = text.lstrip(_WS)
    if reasoning is not None:
        empty = re.match(r"(?:" + re.escape(reasoning[0]) + r")?\s*" + re.escape(reasoning[1]) + r"\s*", text)
        if empty and _REASONING not in text:
            text = text[empty.end():]
    for marker in framing:
        if text.startswith(marker):
            text = text[len(marker):].lstrip(_WS)
    return text


# ----------------------------------------------------------------- calls

@dataclass
class _Calls:
    layout: str
    body: BodyKind
    opener: str
    wrapper: WrapperSpec | None
    reserved: tuple[str, ...]
    untyped: bool
    found: dict[str, str]
    ends: tuple[str, ...] = ()  # markers that end a turn with calls
    anchor: AnchorSpec | None = None  # the call has no opener: it is found by where it stands


def _split_call_markers(prefix: str, middle: str, suffix: str) -> tuple[str, str, str, str]:
    """The per-call opener and closer (what every call has before and after it), and the wrapper's
    opener and closer (the rest of the text before the first call and after the last)."""
    opener = _common_suffix(prefix, middle)
    closer = _common_prefix(middle[:len(middle) - len(opener)], suffix)
    return (opener.strip(_WS), closer.strip(_WS), prefix[:len(prefix) - len(opener)].strip(_WS),
            suffix[len(closer):].strip(_WS))


def _envelope_markers(opener: str, closer: str, wrap_open: str,
                      wrap_close: str) -> tuple[str, str, WrapperSpec | None, tuple[str, ...]]:
    """Markers split at whitespace: the last of a per-call opener (and the first of its closer) is the
    call's own; those before it wrap the call (Qwen3-Coder's `<tool_call>` around `<function=`). Markers
    after the calls that close nothing end the turn (Hy3's `<｜hy_eos｜>`, Functionary's `<|eom_id|>`):
    the fourth item."""
    opens, closes = _markers(opener), _markers(closer)
    outer_open = [*_markers(wrap_open), *opens[:-1]]
    outer_close = [*closes[1:], *_tokens(wrap_close)]
    ends = tuple(outer_close[len(outer_open):])
    outer_close = outer_close[:len(outer_open)]
    wrapper = None
    if outer_open and len(outer_close) == len(outer_open):
        wrapper = WrapperSpec((" ".join(outer_open),), (" ".join(outer_close),)) if len(outer_open) == 1 \
            else WrapperSpec((outer_open[-1],), (outer_close[0],))
    elif outer_open and not outer_close and not closes:  # no closer anywhere: the whole prefix opens the call,
        # as written up to the call (its last newline too: a grammar then writes it, GigaChat 3's header)
        return f"{wrap_open}{opener}".lstrip(_WS) if wrap_open.strip(_WS) else opener.lstrip(_WS), "", None, ends
    elif outer_open:
        raise DeriveError("call wrapper", f"an opener {outer_open!r} without a closer {outer_close!r} around the "
                                          "calls")
    return (opens[-1] if opens else ""), (closes[0] if closes else ""), wrapper, ends


def _json_calls(found: _Found) -> _Calls | None:
    """One JSON call object (or list of them) per envelope: `{"name": N, "arguments": {...}}`."""
    text = found.renders["one_call"][1]
    start = None
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = json.JSONDecoder().raw_decode(text, match.start())
        except ValueError:
            continue
        objects = value if isinstance(value, list) else [value]
        if objects and isinstance(objects[0], dict) and (_NAMES[0] in objects[0].values()
                                                         or list(objects[0]) == [_NAMES[0]]):
            start = match.start()
            break
    if start is None:
        return None
    call = objects[0]
    by_key = list(call) == [_NAMES[0]]  # {"NAME": {arguments}} (Apertus)
    if by_key:
        call = {"name": _NAMES[0], "arguments": call[_NAMES[0]]}
    name_key = next(key for key, item in call.items() if item == _NAMES[0])
    argument_key = next((key for key, item in call.items() if item == {_KEYS[0]: _VALUES[0]}
                         or item == json.dumps({_KEYS[0]: _VALUES[0]})), None)
    if argument_key is None:
        raise DeriveError("call arguments", f"the call object {call!r} holds no member with the arguments")
    id_key = next((key for key, item in call.items() if item == _IDS[0]), None)
    listed = isinstance(value, list)
    two = found.renders.get("two_calls")
    pieces = _json_values(two[1]) if two else []
    if not two or (listed and len(pieces) == 1):  # both calls in one list (or one call only): one envelope
        wire = two[1] if two else text
        span = pieces[0] if two else _json_values(text)[0]
        opener, closer, wrapper, ends = _envelope_markers(wire[:span[0]], wire[span[1]:], "", "")
    elif len(pieces) == 2:
        (s1, e1), (s2, e2) = pieces
        opener, closer, wrapper, ends = _envelope_markers(*_split_call_markers(two[1][:s1], two[1][e1:s2], two[1][e2:]))
    else:
        raise DeriveError("second call", f"two calls render as {two[1]!r}")
    if not opener and (listed or closer or wrapper):
        raise DeriveError("call opener", f"nothing marks where a call starts in {text!r}")
    if not opener:  # a bare call object, the whole turn (Llama 3.x): anchored at the start of the output
        first = json.dumps(next(iter(objects[0])))
        space = r"[ \t\r\n]{0,64}"
        anchor = AnchorSpec(lead=rf"\{{{space}{re.escape(first)}{space}:", at_start=True, may_be_content=True,
                            body=JsonCall("hermes", closers=(), tag="the call object", end_at_value=True,
                                          call_keys=tuple(call), name_keys=(name_key,),
                                          argument_keys=(argument_key,)))
        return _Calls("json_call", anchor.body, "", None, (), False, ends=ends, anchor=anchor,
                      found={"call": "a bare JSON object, the whole output", "name key": name_key,
                             "arguments key": argument_key})
    body = JsonCall("call_list" if listed else "hermes", closers=(closer,) if closer else (), tag=opener,
                    stops=(opener,) if not closer else (), id_keys=(id_key,) if id_key else (),
                    end_at_value=not closer, call_list=listed, name_keys=(name_key,), argument_keys=(argument_key,),
                    named_by_key=by_key)
    return _Calls("json_call", body, opener, wrapper, (), False, ends=ends, found=
                  {"call opener": opener, "call closer": closer, "name key": name_key, "arguments key": argument_key,
                   **({"id key": id_key} if id_key else {}), **({"list": "yes"} if listed else {})})


def _json_values(text: str) -> list[tuple[int, int]]:
    """The top-level JSON objects and lists in `text` that hold a probe name, where each starts and ends."""
    found: list[tuple[int, int]] = []
    at = 0
    decoder = json.JSONDecoder()
    while True:
        match = re.compile(r"[\[{]").search(text, at)
        if match is None:
            return found
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            at = match.start() + 1
            continue
        if any(name in json.dumps(value) for name in _NAMES):
            found.append((match.start(), end))
        at = end


def _header_json(found: _Found) -> _Calls | None:
    """A name, a separator, the JSON arguments: `[TOOL_CALLS]NAME[ARGS]{...}`, `NAME<｜tool▁sep｜>{...}`."""
    text = found.renders["one_call"][1]
    place = _json_at(text, {_KEYS[0]: _VALUES[0]})
    name_at = text.find(_NAMES[0])
    if place is None or name_at < 0 or name_at > place[0]:
        return None
    separator = text[name_at + len(_NAMES[0]):place[0]]
    two = found.renders.get("two_calls")
    if two is None:  # the template renders one call a turn: its markers are all around it
        opener, closer, wrapper, ends = _envelope_markers(text[:name_at], text[place[1]:], "", "")
    else:
        wire = two[1]
        n1, n2 = _word(wire, _NAMES[0]), _word(wire, _NAMES[1])
        a1, a2 = _json_at(wire, {_KEYS[0]: _VALUES[0]}), _json_at(wire, {_KEYS[0]: _VALUES[1]})
        if a1 is None or a2 is None:
            raise DeriveError("second call", f"two calls render as {wire!r}")
        opener, closer, wrapper, ends = _envelope_markers(*_split_call_markers(wire[:n1], wire[a1[1]:n2], wire[a2[1]:]))
    if not opener:
        raise DeriveError("call opener", f"nothing marks where a call starts in {wire!r}")
    trail = ""
    if closer and not _MARKER.fullmatch(closer):  # text before the closing marker (DeepSeek's fence)
        marks = _MARKER.findall(closer)
        if marks:
            trail, closer = closer[:closer.rindex(marks[-1])].strip(_WS), marks[-1]
    with_id = _IDS[0] in separator
    if with_id:
        id_mark, after_id = separator.split(_IDS[0], 1)
        header = f'ws name ws {_lit(id_mark.strip(_WS))} ws id ws {_lit(after_id.strip(_WS))}'
        header_ends: tuple[str, ...] = (id_mark.strip(_WS), after_id.strip(_WS))
        layout = f"{{name}}{id_mark}{{id}}{after_id}{{arguments}}{trail}"
    else:
        header = f"ws name ws {_lit(separator.strip(_WS))}" if separator.strip(_WS) else "ws name ws"
        header_ends = (separator.strip(_WS),) if separator.strip(_WS) else ("{",)
        layout = f"{{name}}{separator}{{arguments}}{trail}"
    if not separator.strip(_WS):
        header = 'ws name ws &"{"'
    grammar = define_grammar("\n".join([
        "body = header lead json_object trail",
        f"header = {header}",
        *(['id = ~r"[^\\s\\[\\]{}<>]*"'] if with_id else []),
        'name = ~r"[^\\s\\[\\]{}<>|｜\\"]+"',
        "lead = ws",
        f"trail = ws {_lit(trail)} ws" if trail else "trail = ws",
        'ws = ~r"[ \\t\\n\\r]*"',
    ]))
    stops = (opener,) if not closer else ()
    named: BodyKind = HeaderJson(grammar, header_ends, f"NAME{separator.strip(_WS)}",
                                 closers=(closer,) if closer else (), stops=stops,
                                 ends_at_object=not separator.strip(_WS), layout=(layout,))
    body = named
    if not closer:  # the call ends where its arguments do (Mistral's `[TOOL_CALLS]NAME[ARGS]{…}`)
        marks = [re.escape(mark.strip(_WS)) for mark in (separator.split(_IDS[0]) if with_id else [separator])]
        lead = r'\s*[^\s\[\]{}<>|｜"]+\s*' + (r"\s*[^\s\[\]{}<>]*\s*".join(marks)) + r'\s*(?=[{\["])'
        value_lead = define_grammar(f"value_lead = {_rx(lead)}")
        body = FirstCharacter(choices=((r"[\s\S]", named),), closers=(), stops=(opener,), tag=opener,
                              value_lead=(value_lead, "value_lead"))
    return _Calls("header_json", body, opener, wrapper, (), False, ends=ends, found=
                  {"call opener": opener, "call closer": closer, "name to arguments": separator,
                   **({"after arguments": trail} if trail else {})})


def _lit(text: str) -> str:
    """`text` as a grammar's string literal."""
    return json.dumps(text, ensure_ascii=False)


def _rx(pattern: str) -> str:
    """`pattern` as a grammar's regular expression (a raw string: only its quotes escaped)."""
    return '~r"' + pattern.replace('"', '\\"') + '"'


def _tagged_params(found: _Found) -> _Calls | None:
    """A name, then parameters each tagged with its key, values raw: `<function=N><parameter=K>V</parameter>`."""
    two_args = found.renders.get("two_arguments")
    if two_args is None:
        return None
    text = two_args[1]
    if f'"{_VALUES[0]}"' in text or any(word not in text for word in (_NAMES[0], *_KEYS, *_VALUES)):
        return None
    n, k1, v1 = _word(text, _NAMES[0]), _word(text, _KEYS[0]), _word(text, _VALUES[0])
    k2, v2 = _word(text, _KEYS[1]), _word(text, _VALUES[1])
    if not n < k1 < v1 < k2 < v2:
        return None
    head_tail, key_end = text[n + len(_NAMES[0]):k1], text[k1 + len(_KEYS[0]):v1]
    middle, tail = text[v1 + len(_VALUES[0]):k2], text[v2 + len(_VALUES[1]):]
    param_open_text = _common_suffix(head_tail, middle)
    param_close_text = _common_prefix(middle[:len(middle) - len(param_open_text)], tail)
    param_open, param_close = param_open_text.strip(_WS), param_close_text.strip(_WS)
    if not param_open or not param_close:
        raise DeriveError("argument tags", f"two arguments render as {text!r}: no tag opens and closes each")
    head_end = head_tail[:len(head_tail) - len(param_open_text)].strip(_WS)
    newline_framed = key_end.endswith("\n") and param_close_text.startswith("\n")
    key_close = key_end.strip(_WS)
    # The calls: two of them, one argument each.
    two = found.renders.get("two_calls")
    if two is None:
        raise DeriveError("second call", "the template refuses an assistant turn with two calls")
    wire = two[1]
    n1, n2 = _word(wire, _NAMES[0]), _word(wire, _NAMES[1])
    e1, e2 = _word(wire, _VALUES[0]) + len(_VALUES[0]), _word(wire, _VALUES[1]) + len(_VALUES[1])
    first_close = wire.index(param_close, e1) + len(param_close)
    last_close = wire.index(param_close, e2) + len(param_close)
    opener, closer, wrapper, ends = _envelope_markers(*_split_call_markers(wire[:n1], wire[first_close:n2],
                                                                     wire[last_close:]))
    if not opener or not closer:
        raise DeriveError("call markers", f"two calls render as {wire!r}: no marker opens and closes each call")
    if head_end:
        call_head = f'(?P<name>[^<>\\n"]*){re.escape(head_end)}'
        head_ends: tuple[str, ...] = (head_end, "<")
    else:
        call_head = "(?P<name>[^\\n<]*)(?P<closed>\\n)?"
        head_ends = ("\n", param_open, closer)
    key_pattern = r"[ \t\r\n]*".join(re.escape(part) for part in key_close.split())
    value_stop = "|".join(re.escape(tag[1:]) for tag in (param_close, param_open))
    first = re.escape(param_close[0])
    param_head = '(?P<name>[^<>\\n"]*)' + key_pattern
    grammar = define_grammar("\n".join([
        "call = call_head params ws",
        f"call_head = {_rx(call_head)}",
        "params = param*",
        "param = ws param_open param_head value param_close?",
        f"param_open = {_lit(param_open)}",
        f"param_head = {_rx(param_head)}",
        f"value = {_rx(f'[^{first}]*(?:{first}(?!{value_stop})[^{first}]*)*')}",
        f"param_close = {_lit(param_close)}",
        'ws = ~r"[ \\t\\r\\n]*"',
    ]))
    boolean = found.renders.get("boolean")
    python_values = boolean is not None and "True" in boolean[1]
    body = TaggedParams(grammar=grammar, param_open=param_open, param_close=param_close,
                        framing_newline=newline_framed, call_tag=f"{opener}…", call_close=closer,
                        wrapper_closers=wrapper.closers if wrapper else (),
                        head_ends=head_ends, param_head_ends=(key_close.split()[-1] if key_close else ">", "<"),
                        newline_before_next_element=not newline_framed, head_closer=head_end or "\n",
                        head_form="{name}" + head_end, param_form="{key}" + key_close.strip(),
                        python_values=python_values)
    return _Calls("tagged_params", body, opener, wrapper, (closer, param_open, param_close), True, ends=ends, found=
                  {"call opener": opener, "call closer": closer, "after the name": head_end,
                   "argument opener": param_open, "after the key": key_close, "argument closer": param_close})


# ----------------------------------------------------------------- the declaration

def _source(chat_template: Any) -> Any:
    from .serve.template import ChatTemplate, load_chat_template

    if isinstance(chat_template, ChatTemplate):
        return chat_template
    if isinstance(chat_template, os.PathLike):
        return load_chat_template(chat_template)
    if isinstance(chat_template, Mapping):  # a tokenizer_config.json's content
        source = chat_template.get("chat_template")
        if isinstance(source, list):
            source = tuple((str(t["name"]), str(t["template"])) for t in source if isinstance(t, Mapping))
        if not isinstance(source, (str, tuple)) or not source:
            raise ValueError("derive_format: the mapping has no 'chat_template' (a string or a list of "
                             "{'name', 'template'}); pass a tokenizer_config.json's content, a path or the template")
        tokens = {key: value for key, value in chat_template.items()
                  if key.endswith("_token") and isinstance(value, str)}
        return ChatTemplate(source, tokens)
    if isinstance(chat_template, str):
        return ChatTemplate(chat_template)
    raise TypeError(f"derive_format takes a chat template (its text, a path, a tokenizer_config mapping or a "
                    f"ChatTemplate), got {type(chat_template).__name__}")


def derive(chat_template: str | os.PathLike[str] | Mapping[str, Any] | Any) -> Derivation:
    """`derive_format`, with what the probes found (`Derivation.summary()`)."""
    from .serve.deadline import within

    template = _source(chat_template)
    if template.missing_special_tokens:  # a bare .jinja: render the tokens as themselves, as probes do
        from dataclasses import replace

        template = replace(template, special_tokens={**template.special_tokens,
                                                     **{name: "" for name in template.missing_special_tokens}})
    with within(_DEADLINE, "deriving a format from the chat template"):
        found = _probe(template, template.text)
        return _declare(template, found)


def derive_format(chat_template: str | os.PathLike[str] | Mapping[str, Any] | Any) -> FormatSpec:
    """A format declaration for a chat template no declared format matches, derived from probe renders of
    the template (module docstring). `chat_template`: the template's text, a path (a `.jinja`, a
    `tokenizer_config.json`, a model directory), a `tokenizer_config.json`'s content, or a `ChatTemplate`.
    Use the result wherever a format is accepted (`parse(text, format=spec)`), or register it.
    Raises `DeriveError` (a `ValueError`) naming the part of the layout it could not place."""
    return derive(chat_template).spec


def _declare(template: Any, found: _Found) -> Derivation:
    if "one_call" not in found.renders or _NAMES[0] not in found.renders["one_call"][1]:
        raise DeriveError("calls", "the template does not render an assistant turn's tool calls")
    calls = _json_calls(found) or _tagged_params(found) or _header_json(found)
    if calls is None:
        raise DeriveError("call layout", f"a call renders as {found.renders['one_call'][1]!r}: neither a JSON call "
                                         "object, nor a name then JSON arguments, nor tagged parameters")
    digest = hashlib.sha256(str(template.text).encode("utf-8")).hexdigest()[:10]
    render = TemplateWriter(template.source, tuple(sorted(template.special_tokens.items())),
                            tuple(sorted(found.kwargs.items())), found.ends)

    spec = FormatSpec(
        name=f"derived-{digest}",
        aliases=(),
        reasoning=(found.reasoning,) if found.reasoning else (),
        envelopes=(EnvelopeSpec(openers=(calls.opener,), body=calls.body),) if calls.anchor is None else (),
        anchors=(calls.anchor,) if calls.anchor is not None else (),
        wrappers=(calls.wrapper,) if calls.wrapper else (),
        render=render,
        source=render,
        reserved=calls.reserved,
        untyped_values=calls.untyped,
        framing=found.content_framing,
        trailing_framing=tuple(dict.fromkeys((*found.ends, *calls.ends))),
    )
    parts = dict(calls.found)
    if calls.wrapper is not None:
        parts["calls wrapped in"] = f"{calls.wrapper.openers[0]} ... {calls.wrapper.closers[0]}"
    if spec.framing or spec.trailing_framing:
        parts["framing"] = " ".join((*spec.framing, *spec.trailing_framing))
    derivation = Derivation(spec, found.kwargs, found.reasoning, found.forced_open, calls.layout, parts)
    _check(derivation, found)
    return derivation


@dataclass(frozen=True)
class TemplateWriter:
    """A derived format's `render`: the message as the template writes it; and its `source`, what it is
    derived again from in another process (`rebuilt`: the grammars a derived format defines live in the
    process that derived it), so that a derived `FormatSpec` pickles to an equal one (a spawned worker of
    `parse_many` gets it)."""

    source: str | tuple[tuple[str, str], ...]
    tokens: tuple[tuple[str, str], ...]
    kwargs: tuple[tuple[str, Any], ...]
    ends: tuple[str, ...]

    def __call__(self, message: Message) -> str:
        renderer = _Renderer(_template(self.source, self.tokens), dict(self.kwargs))
        renderer.ends = self.ends
        turn: dict[str, Any] = {"role": "assistant", "content": message.content or None}
        if message.reasoning:
            turn["reasoning_content"] = message.reasoning
        if message.tool_calls:
            turn["tool_calls"] = [{"id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
                                  for call in message.tool_calls]
        return renderer.turn(turn) or ""

    def rebuilt(self) -> FormatSpec:
        return _derived(self.source, self.tokens)


@lru_cache(maxsize=16)
def _derived(source: str | tuple[tuple[str, str], ...], tokens: tuple[tuple[str, str], ...]) -> FormatSpec:
    return derive(_template(source, tokens)).spec


@lru_cache(maxsize=16)
def _template(source: str | tuple[tuple[str, str], ...], tokens: tuple[tuple[str, str], ...]) -> Any:
    from .serve.template import ChatTemplate

    return ChatTemplate(source, dict(tokens))


def _check(derivation: Derivation, found: _Found) -> None:
    """The derived declaration must read every probe render back as its message."""
    from .api import parse

    for name, (message, text) in found.renders.items():
        if name == "boolean":
            continue
        got = parse(text, format=derivation.spec, tools=_tools(),
                    thinking_forced_open=found.forced_open and name == "reasoning")
        want_calls = [(call["function"]["name"], json.loads(call["function"]["arguments"]))
                      for call in message.get("tool_calls", ())]
        got_calls = [(call.name, call.arguments) for call in got.tool_calls]
        if got_calls != want_calls or (got.content or "").strip() != (message.get("content") or "") or (
                (got.reasoning or "").strip() != (message.get("reasoning_content") or "")):
            raise DeriveError(f"layout ({derivation.layout}, probe {name!r})",
                              f"the derived declaration reads {text!r} as content {got.content!r}, reasoning "
                              f"{got.reasoning!r}, calls {got_calls!r}; the probe wrote {want_calls!r}")
