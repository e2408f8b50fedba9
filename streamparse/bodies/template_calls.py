"""Body kind `template_calls`: the call field of a Hugging Face transformers `response_template`
(transformers 5.25, `transformers/utils/chat_parsing/`) read with transformers' documented semantics,
for a template whose calls no other kind reads (`streamparse.format_from_response_template`).

The envelope opens at a literal the field's `open_pattern` starts with and ends at the literal its
`close_pattern` ends with (or a stop, or the end of the output: a field with no close). The finished
envelope is then read as transformers reads the field's region (held until it closes; no progressive
fragments): the open pattern matched at the opener (its named groups are captures), the close pattern
matched where the body ends (its captures win), the text between through the field's content parser
(`text`, `int`, `float`, `bool`, `json` with `unquoted_keys` / `string_delims` / `allow_non_json`,
`xml-inline` with `tag_pattern` / `value_parser` / `value_parser_by` / `merge_duplicates`, `kv-lines`,
`python-call-list`), then its `transform` (whole-string `{placeholder}`s, dotted into dicts; per list
element with `transform_each`). Each resulting `{"function": {"name", "arguments"}, "id"?}` is a call;
string arguments are typed by the tool's schema as transformers does when tools are given.

An envelope whose opener the open pattern does not match there holds no call (the format declares it
content, verbatim: transformers never opened the field). Where transformers raises (a body that is not
JSON, a transform naming a missing key), the call is rejected saying why; nothing raises. The template's
regular expressions are untrusted (a model directory's): `format_from_response_template` refuses nested
repetition, and every match here runs under `PATTERN_SECONDS` of the `regex` module's timeout (a pattern
that runs out rejects the call; the envelope is the same text under any chunking, so its reading is too).
A grammar writes a call from the same patterns (`template_layout.py`), the opener included.
Cost: one anchored match at the opener, one reverse match at the end, the content parser's one pass.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

import regex  # type: ignore[import-untyped]

from ..calls import arguments_of
from ..grammar_ir import Node
from ..scanning import ScanResult, WalkSource, delimiters_of
from ..spec import CallResult, Envelope, ParsedCall, Rejection
from ..strict_json import json_text
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet

if TYPE_CHECKING:
    from .template_layout import Field

# How long one match of a template's pattern may run (the `regex` module checks it as it goes).
PATTERN_SECONDS = 0.25
_STRUCTURED_TYPED = frozenset({"json", "python-call-list"})


class TemplateError(ValueError):
    """A field's value could not be read as transformers reads it (the call is rejected with this)."""


@cache
def compiled(pattern: str, reverse: bool = False) -> Any:
    """A template pattern as transformers compiles it (`regex`, DOTALL); `reverse` for one matched at the end."""
    return regex.compile(pattern, regex.DOTALL | (regex.REVERSE if reverse else 0))


def _run(method: Any, *args: Any) -> Any:
    try:
        return method(*args, timeout=PATTERN_SECONDS)
    except TimeoutError as error:
        raise TemplateError(f"the template's pattern ran out of time ({PATTERN_SECONDS} s) on this call") from error


@dataclass(frozen=True)
class TemplateCalls:
    """A transformers call field as a body kind. `content_args` and `transform` are kept as JSON text
    (a declaration is hashable); `head` is the field's open pattern, `tail` its close pattern
    (empty: the field has none), both matched as transformers matches them."""

    field: str
    head: str
    tail: str
    closers: tuple[str, ...]
    stops: tuple[str, ...] = ()
    content: str = "json"
    content_args: str = "{}"
    transform: str = ""
    transform_each: bool = False
    # How many characters of each stop are the body's (`}` of `}<|function_call|>`: a close `\}(?=…)`).
    stop_keeps: tuple[int, ...] = ()
    # The grammar writes the envelope's opener too: the open pattern from its first literal (an optional
    # group before the call's own opener is one of its spellings; `constrain/assemble.py`).
    writes_opener: ClassVar[bool] = True

    def scanner(self) -> LookaheadScanner:
        return LookaheadScanner(self.closers, self.stops, self.stop_keeps)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> None:
        return None  # read when the envelope closes, as transformers reads a region

    # ----------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> Node:
        from .template_layout import call_node  # (the grammar is written only when asked for)

        return call_node(self.layout(), name, parameters)

    def body_grammar(self, calls: Node, many: bool) -> Node:
        from .template_layout import body_node

        return body_node(self.layout(), calls, many)

    def calls_per_envelope(self) -> int | None:
        return None if self.transform_each else 1

    @property
    def calls_adjacent(self) -> bool:
        r"""A body that ends only at a stop (a close pattern's lookahead, `\}(?=\{"name")`: the stop `}{"name"`)
        ends where the next call begins right after it: a grammar writes nothing between two calls."""
        return bool(self.stops) and not self.closers

    @property
    def ends_output(self) -> bool:
        """An envelope with no closer runs to a stop or the end: nothing but whitespace may follow the calls."""
        return not self.closers

    def layout(self) -> Field:
        from .template_layout import Field

        return Field(self.field, self.head, self.tail, self.closers, self.content, self.content_args, self.transform,
                     self.transform_each)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        try:
            return self._read(envelope, tools)
        except TemplateError as error:
            ended = not envelope.complete and bool(self.closers)
            return [Rejection(TRUNCATED if ended else INVALID_JSON, [f"{self.field}: {error}"])]

    def _read(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        text = envelope.opener + envelope.body
        opened = _run(compiled(self.head).match, text)
        if opened is None:  # the field never opened (transformers reads the text as content): no call
            return []
        captures = {k: v for k, v in opened.groupdict().items() if v is not None}
        end = len(text)
        if self.tail and (envelope.complete or not self.closers):  # with no closer, a stop or the end closes
            whole = text + envelope.closer
            closed = _run(compiled(f"(?:{self.tail})\\Z", True).search, whole, opened.end())
            if closed is None:
                raise TemplateError("the text before the closer does not match the field's close pattern")
            end = min(closed.start(), end)
            captures.update({k: v for k, v in closed.groupdict().items() if v is not None})
        args = _loaded(self.content_args)
        value = parse_content(text[opened.end():end], self.content, args)
        if self.transform:
            value = _transformed(_loaded(self.transform), value, captures, self.transform_each)
        items = value if self.transform_each else [value]
        typed = self.content in _STRUCTURED_TYPED
        coerce = tools.given and "value_parser_by" not in args
        return [_call(item, tools, typed, coerce) for item in items]


class LookaheadScanner:
    """Ends at the first closer (consumed) or stop; a stop's first `keep` characters are the body's and the
    rest is left for what follows (a close pattern `P(?=A)`: the stop `PA`, keeping `P`). Where a closer
    is the start of a longer one (a close pattern's optional ending, `C(?:A|B)?`: closers `C`, `CA`, `CB`),
    the longest that matches wins, as transformers' greedy match takes it: a closer the text's end could
    still grow into a longer one is held (at most the longest closer's length) until the next text, or
    the end of the output (`at_end`), says which."""

    def __init__(self, closers: tuple[str, ...], stops: tuple[str, ...], keeps: tuple[int, ...]) -> None:
        self._closers = frozenset(closers)
        self._keeps = dict(zip(stops, keeps or (0,) * len(stops), strict=True))
        self._delimiters = delimiters_of((*closers, *stops))
        self._growing = frozenset(c for c in closers if any(o != c and o.startswith(c) for o in closers))

    def scan(self, text: str, pos: int) -> ScanResult:
        match = self._delimiters.search(text, pos)
        if match is None:
            return ScanResult(max(pos, self._delimiters.held_from(text)))
        if match.group() in self._closers:
            if match.group() in self._growing and self._delimiters.is_prefix(text, match.start()):
                return ScanResult(match.start())
            return ScanResult(match.start(), match.end())
        cut = match.start() + self._keeps.get(match.group(), 0)
        return ScanResult(cut, cut)

    def at_end(self, held: str) -> ScanResult | None:
        """The closer a held text starts with, when no more text comes (`EnvelopeScanner`)."""
        match = self._delimiters.search(held, 0) if self._growing else None
        return ScanResult(match.start(), match.end()) if match is not None and match.group() in self._closers \
            else None


@cache
def _loaded(text: str) -> Any:
    return json.loads(text)


def _call(item: Any, tools: ToolSet, typed: bool, coerce: bool) -> CallResult:
    """One transformed value as a call: `{"function": {"name", "arguments"}}` (OpenAI's shape), or a
    `{"name", "arguments"}` object (a transform of `{content}`)."""
    function = item.get("function", item) if isinstance(item, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        return Rejection(INVALID_JSON, [f"the field's value is not a call with a name: {_shown(item)}"])
    name = function["name"]
    raw = function.get("arguments", {})
    found = arguments_of(raw, "")
    if isinstance(found, str):
        return Rejection(INVALID_JSON, [f"$: {found}"], None, name)
    arguments = found[0]
    if coerce:
        arguments = _typed(arguments, tools.parameters(name), typed)
    try:
        arguments_json = json_text(arguments)
    except ValueError as error:
        return Rejection(INVALID_JSON, [f"the arguments cannot be JSON: {error}"], None, name)
    call_id = item.get("id") if isinstance(item, dict) else None
    return ParsedCall(name, arguments, arguments_json, call_id if isinstance(call_id, str) and call_id else None)


def _shown(value: Any) -> str:
    return repr(value)[:80]


# ----------------------------------------------------------------- typing by the tool's schema

def read_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a tool's parameter schema names, in its order (what `_coerced` tries)."""
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    found = [declared] if isinstance(declared, str) else [t for t in declared or () if isinstance(t, str)] \
        if isinstance(declared, list) else []
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or ():
            found += read_types(choice)
    if schema.get("nullable") and "null" not in found:
        found.append("null")
    return tuple(found)


def _coerced(raw: str, types: tuple[str, ...]) -> Any:
    """`raw` as the first of `types` it reads as (transformers' casting of tool-call arguments)."""
    for kind in types:
        try:
            if kind == "integer":
                try:
                    return int(raw)
                except ValueError:
                    number = float(raw)
                    if number.is_integer():
                        return int(number)
            elif kind == "number":
                number = float(raw)
                if math.isfinite(number):
                    return int(number) if number.is_integer() and "." not in raw else number
            elif kind == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            elif kind == "null" and raw.strip() in ("null", "None"):
                return None
            elif kind in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if kind == "object" else list):
                    return decoded
        except (ValueError, OverflowError):
            continue
    return raw


def _typed(arguments: dict[str, Any], parameters: Any, typed: bool) -> dict[str, Any]:
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return arguments
    out = dict(arguments)
    for key, value in arguments.items():
        types = read_types(properties.get(key))
        if not types or (typed and "string" in types):
            continue
        if isinstance(value, str):
            out[key] = _coerced(value, types)
        elif isinstance(value, list) and "array" not in types:
            out[key] = [_coerced(item, types) if isinstance(item, str) else item for item in value]
    return out


# ----------------------------------------------------------------- transforms

_PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}")


def _transformed(transform: Any, value: Any, captures: Mapping[str, str], each: bool) -> Any:
    if not each:
        return _apply(transform, {**captures, "content": value})
    if not isinstance(value, list):
        raise TemplateError(f"transform_each needs a list, the content is {type(value).__name__}")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise TemplateError(f"transform_each needs a list of objects, got an element {_shown(item)}")
        out.append(_apply(transform, {**captures, **item}))
    return out


def _apply(transform: Any, scope: Mapping[str, Any]) -> Any:
    """A transform template filled from `scope`: a whole-string `{name.key}` is the value it names."""
    if isinstance(transform, dict):
        return {key: _apply(item, scope) for key, item in transform.items()}
    if isinstance(transform, list):
        return [_apply(item, scope) for item in transform]
    whole = _PLACEHOLDER.fullmatch(transform) if isinstance(transform, str) else None
    if whole is None:
        return transform
    root, *keys = whole.group(1).split(".")
    if root not in scope:
        raise TemplateError(f"the transform names {{{whole.group(1)}}}, which this call does not have")
    found = scope[root]
    for key in keys:
        if not isinstance(found, dict) or key not in found:
            raise TemplateError(f"the transform names {{{whole.group(1)}}}, which this call does not have")
        found = found[key]
    return found


# ----------------------------------------------------------------- content parsers

def parse_content(text: str, name: str, args: Mapping[str, Any]) -> Any:
    """`text` read by transformers' content parser `name` with `args` (`TemplateError` where it fails)."""
    try:
        return _PARSERS[name](text, args)
    except TemplateError:
        raise
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError, KeyError) as error:
        raise TemplateError(f"{name}: {str(error)[:200]}") from error


def _text(text: str, args: Mapping[str, Any]) -> str:
    return text.strip() if args.get("strip", True) else text


def _int(text: str, args: Mapping[str, Any]) -> int:
    return int(_text(text, args))


def _float(text: str, args: Mapping[str, Any]) -> float:
    return float(_text(text, args))


def _bool(text: str, args: Mapping[str, Any]) -> bool:
    return _text(text, args).lower() in ("true", "1")


_QUOTED_OR_BARE_KEY = r'"(?:\\.|[^"\\])*"|(?<=[{,])(\s*)(\w+)(\s*):'


def _json(text: str, args: Mapping[str, Any]) -> Any:
    """JSON, after the dialect's rewrites: strings between custom delimiters, bare keys quoted."""
    working, strings = text, []
    delims = args.get("string_delims") or []
    if delims and ("\x01" in text or "\x02" in text):
        raise TemplateError("json: the text holds the characters \\x01/\\x02 the string_delims rewrite reserves")
    for opener, closer in delims:
        def keep(match: Any) -> str:
            strings.append(match.group(1))
            return f"\x01{len(strings) - 1}\x02"

        working = _run(compiled(regex.escape(opener) + r"(.*?)" + regex.escape(closer)).sub, keep, working)
    if args.get("unquoted_keys"):
        def quote(match: Any) -> str:
            return str(match.group(0)) if match.group(2) is None \
                else f'{match.group(1)}"{match.group(2)}"{match.group(3)}:'

        working = _run(compiled(_QUOTED_OR_BARE_KEY).sub, quote, working)
    for number, string in enumerate(strings):
        working = working.replace(f"\x01{number}\x02", json.dumps(string))
    try:
        return json.loads(working)
    except json.JSONDecodeError as error:
        if args.get("allow_non_json"):
            return _text(text, args)
        raise TemplateError(f"json: the body is not JSON: {error}") from error


def _sub(raw: str, parser: Any) -> Any:
    if parser is None:
        return raw
    return parse_content(raw, parser.get("name", "text"), parser.get("args", {}))


def _xml_inline(text: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """Tags as a dict: `tag_pattern`'s groups `key` and `value` for each match, left to right."""
    parser, merge = args.get("value_parser"), args.get("merge_duplicates", False)
    by = args.get("value_parser_by") or {}
    group, parsers = by.get("group"), by.get("parsers") or {}
    out: dict[str, Any] = {}
    merged: set[str] = set()
    for match in _run(_all_matches, compiled(args["tag_pattern"]), text):
        groups = match.groupdict()
        key = groups.get("key")
        value = _sub(groups.get("value") or "", parsers.get(groups.get(group), parser) if group else parser)
        if key in out and merge:
            if key not in merged:
                out[key] = [out[key]]
                merged.add(key)
            out[key].append(value)
        else:
            out[key] = value
    return out


def _all_matches(pattern: Any, text: str, timeout: float) -> list[Any]:
    """Every match of `pattern` in `text`, found within `timeout` seconds in all."""
    return list(pattern.finditer(text, timeout=timeout))


def _kv_lines(text: str, args: Mapping[str, Any]) -> dict[str, Any]:
    separator = args.get("kv_sep", ":")
    out: dict[str, Any] = {}
    for raw in text.split(args.get("line_sep", "\n")):
        line = _text(raw, args)
        if line and separator in line:
            key, value = line.split(separator, 1)
            out[_text(key, args)] = _sub(_text(value, args), args.get("value_parser"))
    return out


_CONSTANTS = {"True": True, "true": True, "False": False, "false": False, "None": None, "null": None}
_MAX_INTEGER = 2**53 - 1


def _python_call_list(text: str, args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`[f(a=1), g()]`: keyword arguments only, literal values (Python's or JSON's constants)."""
    tree = ast.parse(text.strip(), mode="eval").body
    if not isinstance(tree, ast.List):
        raise TemplateError("python-call-list: the body is not a list of calls")
    calls = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args or any(k.arg is None for k in node.keywords):
            raise TemplateError("python-call-list: each element must be NAME(keyword=value, ...)")
        arguments: dict[str, Any] = {}
        for keyword in node.keywords:
            assert keyword.arg is not None
            arguments[keyword.arg] = _literal(keyword.value, 0)
        calls.append({"name": _dotted(node.func), "arguments": arguments})
    return calls


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise TemplateError("python-call-list: a call must be named by a (dotted) name")


def _literal(node: ast.expr, depth: int) -> Any:
    if depth > 100:
        raise TemplateError("python-call-list: lists and dicts nested more than 100 levels deep")
    if (isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool))) or \
            (isinstance(node, ast.Constant) and node.value is None):
        if isinstance(node.value, int) and not isinstance(node.value, bool) and abs(node.value) > _MAX_INTEGER:
            raise TemplateError("python-call-list: integer outside the range of -(2^53 - 1) to 2^53 - 1")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
        return -_literal(node.operand, depth)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.List):
        return [_literal(item, depth + 1) for item in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise TemplateError("python-call-list: dict keys must be strings")
            if key.value in out:
                raise TemplateError(f"python-call-list: repeated name {key.value!r}")
            out[key.value] = _literal(value, depth + 1)
        return out
    raise TemplateError("python-call-list: expected a string, number, list, dict, True, False or None")


_PARSERS: dict[str, Any] = {"text": _text, "int": _int, "float": _float, "bool": _bool, "json": _json,
                            "xml-inline": _xml_inline, "kv-lines": _kv_lines, "python-call-list": _python_call_list}
CONTENT_PARSERS: Sequence[str] = tuple(_PARSERS)
