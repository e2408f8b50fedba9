"""A format's declaration as Hugging Face transformers' `response_template` (transformers 5.25,
`transformers/utils/chat_parsing/`), for the engines that read one (`parse_response`, vLLM and
SGLang's `response_template` tool parser).

A response template is a flat set of fields, one open at a time, each between an `open` and a
`close` delimiter (the one without `open` holds the rest: content), whose text a content parser
reads once the field closes. A declaration maps onto it where its layout is that flat: reasoning
between tags, content with framing markers dropped, calls whose body is one JSON call object (or one
list of them) between an opener and a closer. What it cannot say is refused with a `ValueError`
naming the construct (the list is in docs/formats.md).

The template starts reading where the prompt ends: `start_anchor_pattern` (transformers truncates
the prefix after the anchor's last match) matches the whole prefix up to a reasoning opener it ends
with, so a prompt that opens reasoning (`thinking_forced_open`) opens the reasoning field. Pass the
model's own assistant header as `start_anchor` to use transformers' usual anchor instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import regex  # type: ignore[import-untyped]

from .bodies.json_call import JsonCall
from .registry import get_format
from .spec import FormatLike, FormatSpec
from .types import Message, ToolCall

REASONING, CONTENT, TOOL_CALLS = "reasoning_content", "content", "tool_calls"


def response_template(format: FormatLike, *, start_anchor: str | Sequence[str] | None = None) -> dict[str, Any]:
    """transformers' `response_template` for `format` (a name, alias or `FormatSpec`): a dict to
    store as `response_template` in `tokenizer_config.json` or pass to `parse_response`. Its output
    keys: `content`, `reasoning_content`, `tool_calls` (`{"type": "function", "function": {"name",
    "arguments"}}`). `start_anchor`: the text (or texts) the prompt's assistant turn ends with; by
    default, the end of the prompt. `ValueError` naming the construct for a format the template
    language cannot express (or that this exporter does not write yet)."""
    spec = get_format(format)
    missing = _missing(spec)
    if missing:
        raise ValueError(f"format {spec.name!r} cannot be written as a transformers response_template: {missing}")
    template: dict[str, Any] = {"version": 1, "defaults": {"role": "assistant"}}
    if start_anchor is None:
        # The whole prefix, up to a reasoning opener it ends with (anchored at its start: one match).
        openers = "|".join(regex.escape(opener) for opener, _ in spec.reasoning)
        tail = f"(?:{openers})\\s*\\Z|\\Z" if openers else "\\Z"
        template["start_anchor_pattern"] = f"\\A.*?(?={tail})"
    else:
        template["start_anchor"] = start_anchor if isinstance(start_anchor, str) else list(start_anchor)
    fields: dict[str, Any] = {}
    if spec.reasoning:
        fields[REASONING] = {"open": _literals(opener for opener, _ in spec.reasoning),
                             "close": _literals(closer for _, closer in spec.reasoning), "content": "text"}
    if spec.envelopes:
        fields[TOOL_CALLS] = _calls(spec)
    content: dict[str, Any] = {"content": "text", "repeats": True, "join": ""}
    if spec.framing:
        # A framing marker ends a stretch of content; the stretches are joined (the markers dropped).
        content["close"] = _literals(spec.framing)
    fields[CONTENT] = content
    template["fields"] = fields
    return template


def _literals(texts: Any) -> str | list[str]:
    unique = list(dict.fromkeys(texts))
    return unique[0] if len(unique) == 1 else unique


def _calls(spec: FormatSpec) -> dict[str, Any]:
    """The tool_calls field: each envelope's opener to its closer, read as JSON."""
    (envelope,) = spec.envelopes
    body = envelope.body
    assert isinstance(body, JsonCall)  # `_missing` refused every other kind
    name, arguments = body.name_keys[0], _arguments_key(spec, body)
    # A call list's transform sees each element's members; a call object's, the object as `content`.
    at = "" if body.call_list else "content."
    call = {"type": "function", "function": {"name": f"{{{at}{name}}}", "arguments": f"{{{at}{arguments}}}"}}
    # Whitespace before an opener is the separator between calls (or after content), not content.
    opener = "|".join(regex.escape(text) for text in sorted(envelope.openers, key=len, reverse=True))
    field: dict[str, Any] = {"open_pattern": f"\\s*(?:{opener})", "close": _literals(body.closers),
                             "content": "json", "transform": call}
    if body.call_list:
        field["transform_each"] = True  # one list per output: a second one replaces it
    else:
        field["repeats"] = True
    return field


def _arguments_key(spec: FormatSpec, body: JsonCall) -> str:
    """The member the format's calls hold their arguments in, of those the body reads: the one its
    `render` writes (a transform names one key)."""
    call = ToolCall(id="call_0", name="f", arguments={"k": 1}, arguments_json='{"k": 1}')
    written = spec.render(Message(tool_calls=[call]))
    found = [(written.find(f'"{key}"'), key) for key in body.argument_keys if f'"{key}"' in written]
    return min(found)[1] if found else body.argument_keys[0]


# The declaration's constructs the exported template lacks, by the field that declares them: what
# the template language has no construct for ("no construct"), or what it could say but this
# exporter does not write yet ("not written yet").
_NONE, _NOT_YET = "no construct", "not written yet"
_FORMAT_CONSTRUCTS = (
    ("messages", _NONE, "headed messages, whose header routes the body to reasoning, content or a call (a field "
                        "cannot route by what its open pattern captured)"),
    ("anchors", _NONE, "calls recognised by position and pattern, with no opener, that are content when they "
                       "hold no call (a field cannot be undone once opened)"),
    ("reasoning_always_open", _NONE, "reasoning with no opener that every output starts in, the answer when "
                                     "its marker never comes"),
    ("forced_reasoning_needs_closer", _NONE, "prompt-opened reasoning that is the answer unless it closes (a "
                                             "field cannot change its name after the fact)"),
    ("framing_after_reasoning", _NONE, "answer tags that are framing only right after the reasoning"),
    ("marker_suffix", _NOT_YET, "markers spelled with a per-checkpoint suffix (one template per suffix)"),
    ("reasoning_reopens", _NOT_YET, "reasoning blocks later in content joined to the first (a repeating, "
                                    "joined reasoning field)"),
    ("reasoning_lead", _NOT_YET, "a channel name read after the reasoning opener (an open pattern)"),
    ("calls_end_reasoning", _NOT_YET, "a call opener inside unclosed reasoning ending it (a lookahead close)"),
    ("calls_end_forced_reasoning", _NOT_YET, "a call opener ending prompt-opened reasoning"),
    ("leading_framing", _NOT_YET, "markers dropped only at the very start"),
    ("trailing_framing", _NOT_YET, "markers dropped only at the very end (a close pattern ending at \\Z)"),
    ("framing_in_reasoning", _NOT_YET, "framing markers dropped inside reasoning"),
    ("wrappers", _NOT_YET, "a calls block around the calls (its markers joined to each call's open and close "
                           "patterns)"),
)
_JSON_CONSTRUCTS = (
    ("named_by_key", _NONE, 'a call object keyed by the tool\'s name ({"NAME": {…}}): a transform cannot make a '
                            "key the name"),
    ("end_at_value", _NONE, "an envelope that ends where its JSON value ends, with no closer"),
    ("separated", _NONE, "call objects separated by whitespace (the json content parser reads one value)"),
    ("one_key", _NONE, "a whole-output object whose one key says whether it holds calls or the answer"),
)
# Body kinds other than `json_call`: whether transformers' content parsers could read them.
_KINDS = {
    "TaggedParams": (_NOT_YET, "tagged parameters (xml-inline with a tag pattern per dialect)"),
    "ObjectLiteral": (_NOT_YET, "an object literal (json with unquoted_keys and string_delims)"),
    "PythonicCalls": (_NOT_YET, "Python calls (python-call-list)"),
    "FirstCharacter": (_NONE, "a body kind chosen by the body's first characters (one field has one content "
                              "parser)"),
    "HeaderJson": (_NOT_YET, "a header naming the call before its JSON arguments (an open pattern capturing the "
                             "name)"),
    "TaggedTree": (_NONE, "parameters as nested tags (xml-inline reads one level)"),
}


def _missing(spec: FormatSpec) -> str:
    """What of `spec` the exported template lacks ('' if nothing): every construct, those the template
    language has no construct for first, then those this exporter does not write yet."""
    found = [(status, f"{construct} (`{name}`)") for name, status, construct in _FORMAT_CONSTRUCTS
             if getattr(spec, name)]
    if len(spec.envelopes) > 1:
        found.append((_NOT_YET, f"{len(spec.envelopes)} call envelopes (one tool_calls field opened by any of "
                                "them, where their bodies read alike) (`envelopes`)"))
    for envelope in spec.envelopes[:1]:
        kind = type(envelope.body).__name__
        if isinstance(envelope.body, JsonCall):
            found += [(status, f"{construct} (`JsonCall.{name}`)") for name, status, construct in _JSON_CONSTRUCTS
                      if getattr(envelope.body, name)]
        else:
            status, construct = _KINDS.get(kind, (_NOT_YET, "a body kind"))
            found.append((status, f"{construct} (`{kind}`)"))
    return "; ".join(f"{status}: {construct}" for status, construct in sorted(found, key=lambda f: f[0] != _NONE))
