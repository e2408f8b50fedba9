"""A Hugging Face transformers `response_template` (transformers 5.25, `transformers/utils/chat_parsing/`;
stored as `response_template` in a model directory's `tokenizer_config.json`) as a `FormatSpec`:
`format_from_response_template(template)`.

A template is a flat set of fields, one open at a time, each between an `open` and a `close` delimiter
(literals, or `open_pattern` / `close_pattern` regular expressions), the one without `open` holding the
rest. Its fields map onto a declaration by their output key:
- `reasoning_content` (or `reasoning`, `thinking`): reasoning, its open and close literals the tag pairs;
  opened at `\\A` (where the output starts): reasoning every output starts in, unless it starts with a call
  opener (`FormatSpec.reasoning_always_open`, `reasoning_yields_to_calls`);
- `content`: the answer; its own `open` / `close` delimiters are framing (dropped where they stand);
- `tool_calls`: the call envelope, opened where a literal its open pattern starts with appears and
  ended at the literal its close pattern ends with (a close pattern that is only a lookahead of
  literals is a stop; no close: the end of the output); an open pattern that consumes only whitespace
  and looks ahead for text that starts with a literal (`\\s*(?=\\[[A-Za-z_][\\w.]*\\()`) is an anchor, as the
  declared `pythonic` finds its list: where the literal's first character stands in content and the
  lookahead (bounded, `LOOKAHEAD_REPEAT`) matches, the literal left in the body. A JSON field whose
  transform writes `{"function": {"name", "arguments"}}` from the call object's own members, between literal
  delimiters, is hermes's body kind (`json_call`: progressive, grammars); every other call field is
  the `template_calls` kind, which reads the finished envelope with transformers' semantics.
What has no place is refused with a `ValueError` naming the construct and the field.

The template's patterns come from a downloaded directory, so they are untrusted: a pattern longer
than `MAX_PATTERN` characters, one that repeats a repetition or an alternation (`(a+)+`, `(a|aa)*`: the
classic catastrophic backtracking), or one that refers back to a group is refused; every match of one
runs under the `regex` module's timeout (`bodies.template_calls.PATTERN_SECONDS`), so one envelope
costs at most about that per pattern matched (a lazy `.*?` run over unclosed tags is quadratic).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import regex  # type: ignore[import-untyped]

from .bodies.json_call import JsonCall
from .bodies.template_calls import CONTENT_PARSERS, TemplateCalls
from .bodies.template_layout import is_space_repeat
from .spec import AnchorSpec, EnvelopeSpec, FormatSpec
from .types import Message

if sys.version_info >= (3, 11):
    import re._constants as _sre
    import re._parser as _sre_parse
else:  # pragma: no cover
    import sre_constants as _sre
    import sre_parse as _sre_parse

MAX_PATTERN = 2000
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
_TEMPLATE_KEYS = {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
_FIELD_KEYS = {"open", "open_pattern", "close", "close_pattern", "content", "content_args", "repeats", "join",
               "optional", "transform", "transform_each"}
_CALL_SHAPE = {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.arguments}"}}


def format_from_response_template(template: Mapping[str, Any], *, name: str = "response_template") -> FormatSpec:
    """The format a transformers `response_template` describes, as a `FormatSpec` usable wherever a
    format is (`parse`, `stream`, `StreamParser`, `grammar_for`, `register_format`). `ValueError`
    naming the construct for a template transformers would refuse, or one this mapping has no place
    for (docs/formats.md lists them)."""
    try:
        return _imported(template, name)
    except RecursionError:
        raise ValueError("the response_template is nested too deeply to read") from None


def _imported(template: Mapping[str, Any], name: str) -> FormatSpec:
    fields = _checked(template)
    reasoning: list[tuple[str, str]] = []
    framing: list[str] = []
    envelopes: list[EnvelopeSpec] = []
    anchors: list[AnchorSpec] = []
    for field_name, field in fields.items():
        scope = f"response_template field {field_name!r}"
        if field_name in REASONING_FIELDS:
            openers = [""] if _opens_at_start(field) else _literal_delimiters(scope, field, "open")
            closers = _literal_delimiters(scope, field, "close")
            if not openers or not closers:
                raise ValueError(f"{scope}: reasoning needs an open and a close delimiter (streamparse reads "
                                 "reasoning between tags)")
            reasoning += [(opener, closer) for opener in openers for closer in closers]
        elif field_name == "content":
            framing += _literal_delimiters(scope, field, "open") + _literal_delimiters(scope, field, "close")
        elif field_name == "tool_calls":
            looking = _lookahead_anchors(scope, field)
            if looking:
                anchors += looking
            elif _opens_without_literal(field) and not _implicit(fields):
                anchors.append(_anchor(scope, field, fields))
            else:
                envelopes.append(_envelope(scope, field))
        else:
            raise ValueError(f"{scope}: a message has content, reasoning_content and tool_calls; a field named "
                             f"{field_name!r} has no place in it (rename it to one of those)")
    # A content opener that an anchored call field reads where a field may begin is not framing elsewhere.
    framing = [marker for marker in framing if not any(marker in anchor.content_openers for anchor in anchors)]
    render = _renderer(tuple(reasoning[:1]), envelopes[0] if envelopes else None)
    # transformers opens the reasoning field wherever its opener stands, not only at the start; a field
    # opened at `\A` (the opener "") where the output starts, unless another field's opener is there.
    at_start = any(not opener for opener, _ in reasoning)
    return FormatSpec(name=name, aliases=(), reasoning=tuple(dict.fromkeys(reasoning)), envelopes=tuple(envelopes),
                      anchors=tuple(anchors), render=render, framing=tuple(dict.fromkeys(framing)),
                      reasoning_reopens=any(opener for opener, _ in reasoning),
                      reasoning_always_open=at_start, reasoning_yields_to_calls=at_start)


# ----------------------------------------------------------------- what transformers accepts

def _checked(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's fields, checked as transformers' loader checks them (and the patterns bounded)."""
    if not isinstance(template, Mapping):
        raise ValueError(f"a response_template is a dict (tokenizer_config.json's 'response_template'), got "
                         f"{type(template).__name__}")
    if template.get("version", 1) != 1:
        raise ValueError(f"unsupported response_template version {template.get('version')!r} (version 1 is read)")
    unknown = set(template) - _TEMPLATE_KEYS
    if unknown:
        hint = " (the legacy x-regex response_schema is not read: transformers 5.25 drops it too)" \
            if {"properties", "x-regex"} & unknown else ""
        raise ValueError(f"unknown keys in response_template: {sorted(unknown)}{hint}")
    if ("start_anchor" in template) == ("start_anchor_pattern" in template):
        raise ValueError("a response_template defines one of 'start_anchor' or 'start_anchor_pattern'")
    if "start_anchor_pattern" in template:
        _pattern("response_template", "start_anchor_pattern", template["start_anchor_pattern"])
    defaults = template.get("defaults", {})
    if not isinstance(defaults, Mapping) or set(defaults) - {"role"}:
        raise ValueError("response_template.defaults: only 'role' has a place in a streamparse Message "
                         f"(got {sorted(defaults) if isinstance(defaults, Mapping) else defaults!r})")
    fields = template.get("fields")
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError("response_template.fields must be a non-empty dict")
    implicit = [n for n, f in fields.items() if isinstance(f, Mapping) and "open" not in f and "open_pattern" not in f]
    if len(implicit) > 1:
        raise ValueError(f"at most one response_template field may have no 'open'/'open_pattern'; found {implicit}")
    for field_name, field in fields.items():
        _check_field(f"response_template field {field_name!r}", field)
    return {str(n): dict(f) for n, f in fields.items()}


def _check_field(scope: str, field: Any) -> None:
    if not isinstance(field, Mapping):
        raise ValueError(f"{scope} must be a dict")
    unknown = set(field) - _FIELD_KEYS
    if unknown:
        raise ValueError(f"{scope}: unknown keys {sorted(unknown)}")
    if field.get("content", "text") not in CONTENT_PARSERS:
        raise ValueError(f"{scope}: unknown content parser {field.get('content')!r}; known: {list(CONTENT_PARSERS)}")
    for key in ("open", "close"):
        if key in field and f"{key}_pattern" in field:
            raise ValueError(f"{scope}: cannot specify both '{key}' and '{key}_pattern'")
        literals = field.get(key)
        if key in field and not ((isinstance(literals, str) and literals) or (isinstance(literals, list) and literals
                                 and all(isinstance(s, str) and s for s in literals))):
            raise ValueError(f"{scope}: '{key}' must be a non-empty string or a list of them")
        if f"{key}_pattern" in field:
            _pattern(scope, f"{key}_pattern", field[f"{key}_pattern"])
    if field.get("join") is not None and not field.get("repeats"):
        raise ValueError(f"{scope}: 'join' requires 'repeats': true")
    if field.get("transform_each") and field.get("transform") is None:
        raise ValueError(f"{scope}: transform_each is set but no transform was given")
    args = field.get("content_args", {})
    if not isinstance(args, Mapping):
        raise ValueError(f"{scope}: content_args must be a dict")
    if field.get("content") == "xml-inline":
        if not isinstance(args.get("tag_pattern"), str):
            raise ValueError(f"{scope}: xml-inline needs content_args.tag_pattern (groups 'key' and 'value')")
        _pattern(scope, "content_args.tag_pattern", args["tag_pattern"])
        if "key" not in compiled_groups(args["tag_pattern"]):
            raise ValueError(f"{scope}: content_args.tag_pattern must have a named group 'key'")
    for opener, closer in args.get("string_delims", []) if field.get("content") == "json" else ():
        if not (isinstance(opener, str) and isinstance(closer, str)):
            raise ValueError(f"{scope}: content_args.string_delims is a list of [open, close] strings")
    _check_transform(scope, field.get("transform"))


def _check_transform(scope: str, transform: Any) -> None:
    """transformers' rule: a string is a whole `{placeholder}` or a literal, never both."""
    if isinstance(transform, Mapping):
        for item in transform.values():
            _check_transform(scope, item)
    elif isinstance(transform, list):
        for item in transform:
            _check_transform(scope, item)
    elif isinstance(transform, str):
        found = regex.search(r"\{\w+(?:\.\w+)*\}", transform)
        if found and found.group() != transform:
            raise ValueError(f"{scope}: transform string {transform!r} mixes a {{placeholder}} with literal text")


def compiled_groups(pattern: str) -> set[str]:
    return set(regex.compile(pattern, regex.DOTALL).groupindex)


def _pattern(scope: str, key: str, pattern: Any) -> Any:
    """A template pattern, compiled and bounded: refused when too long or when it can backtrack exponentially."""
    if not isinstance(pattern, str):
        raise ValueError(f"{scope}: {key} must be a string")
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"{scope}: {key} is {len(pattern)} characters; streamparse reads patterns of at most "
                         f"{MAX_PATTERN} (an untrusted template's pattern is bounded)")
    try:
        regex.compile(pattern, regex.DOTALL)
    except regex.error as error:
        raise ValueError(f"{scope}: invalid {key} regex: {error}") from error
    try:
        parsed = _sre_parse.parse(pattern, _sre.SRE_FLAG_DOTALL)
    except Exception:
        return None
    why = _backtracking(parsed, False)
    if why:
        raise ValueError(f"{scope}: {key} {pattern!r} {why}, which can take exponential time on a crafted "
                         "output; write it without")
    return parsed


_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT))


def _backtracking(items: Any, inside: bool) -> str:
    """What in a parsed pattern can backtrack exponentially ('' if nothing the check sees): a repetition
    or an alternation inside a repetition (star height above one; `(a|aa)*`), or a backreference."""
    for op, av in items:
        if op in _REPEATS:
            _, high, sub = av
            if inside and (high == _sre.MAXREPEAT or high > 16):
                return "repeats a repetition"
            found = _backtracking(sub, inside or high > 1)
        elif op == _sre.SUBPATTERN:
            found = _backtracking(av[-1], inside)
        elif op == _sre.BRANCH:
            found = "repeats an alternation" if inside else \
                next((why for branch in av[1] if (why := _backtracking(branch, inside))), "")
        elif op in (_sre.GROUPREF, _sre.GROUPREF_EXISTS):
            found = "refers back to a group"
        else:
            found = _backtracking(av[1], inside) if op in (_sre.ASSERT, _sre.ASSERT_NOT) else ""
        if found:
            return found
    return ""


# ----------------------------------------------------------------- literals a pattern starts or ends with



_Prefixes = set[tuple[str, bool]]  # (literal, whether the literal is all the items matched)


def _prefixes(items: Any) -> _Prefixes:
    """The literals every match of `items` starts with (an empty one: no literal to find it by)."""
    found: _Prefixes = {("", True)}
    for op, av in items:
        grown: _Prefixes = set()
        for literal, whole in found:
            if not whole:
                grown.add((literal, False))
            elif is_space_repeat(op, av):
                grown.add((literal, not literal))
            else:
                grown |= {(literal + more, rest) for more, rest in _item_prefixes(op, av)}
        found = grown
        if len(found) > 16:
            return {("", False)}
    return found


def _item_prefixes(op: Any, av: Any) -> _Prefixes:
    if op == _sre.LITERAL:
        return {(chr(av), True)}
    if op == _sre.SUBPATTERN:
        return _prefixes(av[-1])
    if op == _sre.BRANCH:
        return set().union(*(_prefixes(branch) for branch in av[1]))
    if op == _sre.IN and all(o == _sre.LITERAL for o, _ in av):
        return {(chr(a), True) for _, a in av}
    if op in _REPEATS and av[0] == 0 and av[1] == 1:
        return _prefixes(av[2]) | {("", True)}
    if op == _sre.AT and av in (_sre.AT_BEGINNING_STRING,):
        return {("", True)}
    return {("", False)}


def _literal_delimiters(scope: str, field: Mapping[str, Any], key: str) -> list[str]:
    """A reasoning or content field's `open` / `close` as literals (a pattern only where it is literal text
    after optional whitespace, alternatives and optional groups included; a close alternative that is the
    end of the text alone is dropped: the end closes anyway)."""
    if key in field:
        literals = field[key]
        return [literals] if isinstance(literals, str) else list(literals)
    pattern = field.get(f"{key}_pattern")
    if pattern is None:
        return []
    branches = _branches(pattern)
    if key == "close":
        branches = [branch for branch in branches if not _is_end(branch)]
    found: _Prefixes = set().union(*(_prefixes(branch) for branch in branches)) if branches else set()
    if not found or any(not whole or not literal for literal, whole in found):
        raise ValueError(f"{scope}: {key}_pattern {pattern!r} is not literal text; streamparse reads this field's "
                         f"delimiters as literals (write them as a list of strings in '{key}')")
    return sorted(literal for literal, _ in found)


def _branches(pattern: str) -> list[list[Any]]:
    """The top-level alternatives of a pattern, each a list of parsed items ([] where it cannot be parsed)."""
    try:
        parsed: list[Any] = list(_sre_parse.parse(pattern, _sre.SRE_FLAG_DOTALL).data)
    except Exception:
        return []
    if len(parsed) == 1 and parsed[0][0] == _sre.BRANCH:
        return [list(branch) for branch in parsed[0][1][1]]
    return [parsed]


def _is_end(items: list[Any]) -> bool:
    return len(items) == 1 and items[0][0] == _sre.AT and items[0][1] in (_sre.AT_END, _sre.AT_END_STRING)


def _suffix(items: list[Any]) -> str | None:
    """The literal text `items` end with (past trailing optional whitespace), or None where they end otherwise."""
    while items and is_space_repeat(*items[-1]):
        items = items[:-1]
    text = ""
    while items and items[-1][0] == _sre.LITERAL:
        text = chr(items[-1][1]) + text
        items = items[:-1]
    return text or None


def _optional_endings(items: list[Any]) -> list[str]:
    """`C(?:A|B)?`, literal text then an optional group of literal alternatives: the closers `C`, `CA`, `CB`
    (the scanner takes the longest that matches, as transformers' greedy match does); [] for anything else."""
    if not items or items[-1][0] not in _REPEATS or items[-1][1][:2] != (0, 1):
        return []
    base = _suffix(list(items[:-1]))
    endings = _prefixes(items[-1][1][2])
    if base is None or not endings or any(not whole or not literal for literal, whole in endings):
        return []
    return [base, *(base + literal for literal, _ in sorted(endings))]


def _envelope(scope: str, field: Mapping[str, Any]) -> EnvelopeSpec:
    open_pattern = field.get("open_pattern")
    if open_pattern is None:
        openers = _literal_delimiters(scope, field, "open")
        if not openers:
            raise ValueError(f"{scope}: the call field needs an 'open' or 'open_pattern' (calls are found by "
                             "their opener)")
        head = "|".join(regex.escape(opener) for opener in sorted(openers, key=len, reverse=True))
    else:
        head = open_pattern
        found = set().union(*(_prefixes(branch) for branch in _branches(open_pattern)))
        openers = sorted({literal for literal, _ in found})
        if not found or "" in openers:
            raise ValueError(f"{scope}: open_pattern {open_pattern!r} does not start with literal text (after optional "
                             "whitespace); streamparse finds a call's opener as a literal")
    closers, stops, keeps, tail = _closing(scope, field)
    content = field.get("content", "text")
    transform = field.get("transform")
    plain = isinstance(field.get("open"), (str, list)) or (open_pattern is not None and _is_literal(open_pattern))
    if content == "json" and not field.get("content_args") and transform == _CALL_SHAPE and field.get("repeats") \
            and plain and closers and not stops and not tail and not _captures(open_pattern):
        body: Any = JsonCall("hermes", closers=tuple(closers), tag=openers[0])
    else:
        body = _template_calls(scope, field, head, (closers, stops, keeps, tail))
    # An opener the open pattern does not match where it stands opened no field: its text is content.
    return EnvelopeSpec(openers=tuple(openers), body=body, no_call_is_content=isinstance(body, TemplateCalls))


def _template_calls(scope: str, field: Mapping[str, Any], head: str,
                    closing: tuple[list[str], list[str], tuple[int, ...], str]) -> TemplateCalls:
    """The `template_calls` kind reading the call field whose open pattern is `head`, ended as `_closing` says."""
    closers, stops, keeps, tail = closing
    transform = field.get("transform")
    return TemplateCalls(field=scope, head=head, tail=tail, closers=tuple(closers), stops=tuple(stops),
                         stop_keeps=keeps, content=field.get("content", "text"),
                         content_args=json.dumps(field.get("content_args", {}), sort_keys=True),
                         transform=json.dumps(transform, sort_keys=True) if transform is not None else "",
                         transform_each=bool(field.get("transform_each")))


# ----------------------------------------------------------------- fields opened where no literal stands

_STARTS = (_sre.AT_BEGINNING, _sre.AT_BEGINNING_STRING)
# How many times an unbounded repetition in a lookahead opener is tried before the text is content: the
# lookahead is what a position is held back for, so it is bounded (`_bounded`; docs/formats.md).
LOOKAHEAD_REPEAT = 128


def _opens_at_start(field: Mapping[str, Any]) -> bool:
    """Whether the field's open pattern is `\\A` (or `^`: transformers compiles no MULTILINE), optional
    whitespace beside it: the field opens where the text transformers reads starts, the output's first
    character (after the start anchor), and nowhere else."""
    pattern = field.get("open_pattern")
    branches = _branches(pattern) if isinstance(pattern, str) else []
    if len(branches) != 1:
        return False
    starts = [item for item in branches[0] if item[0] == _sre.AT and item[1] in _STARTS]
    return len(starts) == 1 and all(item in starts or is_space_repeat(*item) for item in branches[0])


def _lookahead_anchors(scope: str, field: Mapping[str, Any]) -> tuple[AnchorSpec, ...]:
    """A call field whose open pattern consumes only optional whitespace, then looks ahead for text that
    starts with a literal (`\\s*(?=\\[[A-Za-z_][\\w.]*\\()`, a pythonic call list): the call is found as the
    declared `pythonic` format finds its list, an anchor triggered by the literal's first character, the
    lookahead (`_bounded`) checked where it stands and the literal left in the body; where the lookahead
    does not match, the text is content. () for any other open pattern."""
    pattern = field.get("open_pattern")
    branches = _branches(pattern) if isinstance(pattern, str) else []
    if len(branches) != 1:
        return ()
    items = list(branches[0])
    while items and is_space_repeat(*items[0]):
        items = items[1:]
    if len(items) != 1 or items[0][0] != _sre.ASSERT or items[0][1][0] != 1:
        return ()
    assert isinstance(pattern, str)
    looked = pattern[pattern.find("(?=") + 3:-1]  # only whitespace stands before it: the first `(?=` is it
    found = _prefixes(items[0][1][1])
    if not found or any(not literal for literal, _ in found):
        return ()
    closing = _closing(scope, field)
    body = _template_calls(scope, field, pattern, closing)
    lead, ends_output = _bounded(looked), not body.closers and not body.stops
    return tuple(AnchorSpec(lead=lead, body=body, trigger=first, must_end_output=ends_output)
                 for first in sorted({literal[0] for literal, _ in found}))


def _bounded(pattern: str, cap: int = LOOKAHEAD_REPEAT) -> str:
    """`pattern` with each unbounded repetition (`*`, `+`, `{n,}`) made one of at most `cap`."""
    out: list[str] = []
    at, after_item = 0, False
    while at < len(pattern):
        token = _TOKEN.match(pattern, at)
        assert token is not None  # (every character is a token)
        text, at = token.group(), token.end()
        unbounded = _UNBOUNDED.fullmatch(text)
        if after_item and unbounded:
            low = unbounded.group(1) or ("1" if text == "+" else "0")
            text = f"{{{low},{max(int(low), cap)}}}"
        # What a repetition may follow: an item, not a repetition (a `+` or `?` after one is possessive or
        # lazy), an alternation or a group's opening.
        after_item = not (_UNBOUNDED.fullmatch(token.group()) or _COUNTED.fullmatch(text) or text in ("?", "(", "|")
                          or text.startswith("(?"))
        out.append(text)
    return "".join(out)


# A pattern's tokens: an escape, a class (`]` first in it is a member), a counted repetition, a group's
# opening with its flags or name, or one character.
_TOKEN = regex.compile(r"\\.|\[\^?\]?(?:\\.|[^\]])*\]|\{\d*,?\d*\}|\((?:\?(?:P?<[^>]*>|[:=!>|]|<[=!]|[a-zA-Z-]+:?))?|.",
                       regex.DOTALL)
_UNBOUNDED = regex.compile(r"[*+]|\{(\d+),\}")
_COUNTED = regex.compile(r"\{\d*,?\d*\}")


# ----------------------------------------------------------------- a call field opened by a pattern alone

# How long an unbounded repetition in a call's open pattern may run where it has no literal to be found by
# (`[^\n>]+`: a function name): text is held back while it could still become the opener, so at most this.
OPEN_REPEAT_CAP = 64


def _implicit(fields: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a field holds the text outside the others (one without an opener): there transformers looks
    for an opener anywhere (the field is `_envelope`'s, and one opened by a pattern alone is refused)."""
    return any("open" not in field and "open_pattern" not in field for field in fields.values())


def _opens_without_literal(field: Mapping[str, Any]) -> bool:
    pattern = field.get("open_pattern")
    if pattern is None:
        return False
    found = set().union(*(_prefixes(branch) for branch in _branches(pattern)))
    return not found or any(not literal for literal, _ in found)


def _anchor(scope: str, field: Mapping[str, Any], fields: Mapping[str, Mapping[str, Any]]) -> AnchorSpec:
    """A call field whose open pattern starts with no literal text (Functionary v3.2's `(?P<name>[^\n>]+)\n`),
    in a template whose every field is opened (no implicit one: transformers drops the text outside them):
    an anchored envelope (`AnchorSpec`) tried where a field may begin, the start of the output (or after a
    reasoning block there), right after another field's literal closer (a content field's `>>>`), and right
    after its own closer, which is the separator between calls; transformers searches the text outside
    every field too, which it drops and streamparse keeps as content. The open pattern is matched there
    with each unbounded repetition capped at `OPEN_REPEAT_CAP` (the hold-back's bound), and not where
    another field's literal opener starts (`all\n`: the same match, and transformers' tie-break takes the
    other field, whose name sorts first)."""
    pattern = field["open_pattern"]
    closers, stops, _, tail = _closing(scope, field)
    if stops or tail or len(closers) > 1:
        raise ValueError(f"{scope}: open_pattern {pattern!r} does not start with literal text; a call field opened "
                         "by its pattern alone is read with one literal close (or none)")
    others = [opener for name, other in fields.items() if other is not field
              for opener in _literal_delimiters(f"response_template field {name!r}", other, "open")]
    after = [closer for name, other in fields.items() if other is not field and name not in REASONING_FIELDS
             for closer in _literal_delimiters(f"response_template field {name!r}", other, "close")]
    content = _literal_delimiters("response_template field 'content'", fields["content"], "open") \
        if "content" in fields else []
    yields = f"(?!{'|'.join(regex.escape(opener) for opener in others)})" if others else ""
    body = _template_calls(scope, field, pattern, ([], closers, (0,) * len(closers), ""))
    return AnchorSpec(lead=f"(?s){yields}(?:{_bounded(pattern, OPEN_REPEAT_CAP)})", body=body, at_start=True,
                      after=tuple(dict.fromkeys(after)), separator=closers[0] if closers else "",
                      separator_required=bool(closers), content_openers=tuple(content))


def _trailing_lookahead(pattern: str, branches: list[list[Any]]) -> tuple[str, list[str], int] | None:
    """`P(?=L1|L2|\\s*$)`, a close that ends where one of the literals (or the end) follows: the pattern
    before the lookahead (the text the close consumes), the stops (its last literal and each literal: the
    envelope ends after that literal where one follows it) and how much of each stop is the body's."""
    at = pattern.rfind("(?=")
    if len(branches) != 1 or at <= 0 or len(branches[0]) < 2 or branches[0][-1][0] != _sre.ASSERT:
        return None
    looked = _branches(pattern[at + 3:-1]) if pattern.endswith(")") else []
    if not looked or len(_branches(pattern[:at])) != 1:
        return None
    consumed = _suffix(list(branches[0][:-1]))
    if consumed is None:
        return None
    stops = []
    for alternative in looked:
        items = alternative
        while items and is_space_repeat(*items[0]):
            items = items[1:]
        if _is_end(items):
            continue
        found = _prefixes(items)
        if not found or any(not whole or not literal for literal, whole in found):
            return None
        stops += [consumed + literal for literal, _ in found]
    return (pattern[:at], stops, len(consumed)) if stops else None


def _is_literal(pattern: str) -> bool:
    found = set().union(*(_prefixes(branch) for branch in _branches(pattern)))
    return bool(found) and all(whole and literal for literal, whole in found)


def _captures(pattern: str | None) -> bool:
    return bool(pattern) and bool(compiled_groups(pattern or ""))


def _closing(scope: str, field: Mapping[str, Any]) -> tuple[list[str], list[str], tuple[int, ...], str]:
    """The call field's closers (consumed), stops (a lookahead: left for what follows, but for as many of
    their characters as the body keeps) and the close pattern the body is matched against at its end
    ('' where the closers say it all)."""
    if "close" in field:
        return _literal_delimiters(scope, field, "close"), [], (), ""
    pattern = field.get("close_pattern")
    if pattern is None:
        return [], [], (), ""  # the field runs to the end of the output, as transformers reads it
    branches = _branches(pattern)
    if not branches:
        raise ValueError(f"{scope}: close_pattern {pattern!r} uses syntax streamparse cannot take apart")
    ahead = _trailing_lookahead(pattern, branches)
    if ahead is not None:  # `P(?=A|…)`: the envelope ends after P where A follows it, or at the end
        tail, stops, keep = ahead
        return [], stops, (keep,) * len(stops), f"(?:{tail})\\s*"
    closers, stops = [], []
    for items in branches:
        if _is_end(items):
            continue  # `|\Z`: the end of the output ends the envelope anyway
        if len(items) == 1 and items[0][0] == _sre.ASSERT and items[0][1][0] == 1:
            looked = _prefixes(items[0][1][1])
            if looked and all(whole and literal for literal, whole in looked):
                stops += [literal for literal, _ in looked]
                continue
        literal = _suffix(items)
        if literal is None and (endings := _optional_endings(items)):
            closers += endings
            continue
        if literal is None:
            raise ValueError(f"{scope}: close_pattern {pattern!r} does not end with literal text (a lookahead or a "
                             "class after it); streamparse ends a call at a literal closer or a lookahead of literals")
        closers.append(literal)
    tail = pattern if closers and not _is_literal(pattern) else ""
    stops = sorted(set(stops))
    return sorted(set(closers)), stops, (0,) * len(stops), tail


# ----------------------------------------------------------------- writing a message back

def _renderer(reasoning: tuple[tuple[str, str], ...], envelope: EnvelopeSpec | None) -> Any:
    return Written(reasoning, envelope)


@dataclass(frozen=True)
class Written:
    """How an imported format writes a message: reasoning in its first tag pair, the content, then each
    call as a JSON call object between the envelope's first opener and closer (the template says how
    calls are read, not written: a call field read by another content parser is not written). Data, not a
    closure: an imported `FormatSpec` pickles, and two imports of one template are equal."""

    reasoning: tuple[tuple[str, str], ...]
    envelope: EnvelopeSpec | None

    def __call__(self, message: Message) -> str:
        reasoning, envelope = self.reasoning, self.envelope
        out = f"{reasoning[0][0]}{message.reasoning}{reasoning[0][1]}" if reasoning and message.reasoning else ""
        out += message.content
        if message.tool_calls:
            body = envelope.body if envelope is not None else None
            if not isinstance(body, JsonCall) or envelope is None:
                raise ValueError("an imported format whose calls are not JSON call objects cannot write calls")
            for call in message.tool_calls:
                payload = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
                out += f"{envelope.openers[0]}{payload}{body.closers[0]}"
        return out
