"""Body kind `object_literal`: `call:NAME{key:value,…}`, an object literal with bare keys and a
quote token (Gemma 4), declared by its grammar (`formats/<name>.peg`, rule names as below).

The envelope ends at its closer written outside a string (strings run between two `quote` tokens
and hold any text), or at a `stop` (a next call's opener: the call was not closed, `invalid_json`).
The grammar reads the body once; its visitor turns the rules into values: `string` (raw text),
`number` (an int, or a float with `.` or an exponent), `word` (`true`, `false`, `null`/`None`),
`object` (a repeated key keeps its last value), `array`. The values are written, not retyped by
the schema. In progressive mode a call starts (id and name) when its header is read; its arguments
are sent whole when it closes: a repeated key keeps its last value (Decision 3), so a later member
may change any text already sent (as for glm45's `repeated_key_last_wins`).

Cost: the scanner finds the closer with `str.find` and tells whether it is inside a string by
counting the quotes before it (C speed, however many strings the body holds). A body is read by
`_Reader`: respelled as JSON and read by jiter or Python's decoder where that reads it as the
grammar does (`_as_json`: as the templates write it, its JSON text is then the arguments'
`json_text`), else walked with the grammar's terminals; the grammar's tree is built only to say
where a body that is not a call goes wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import jiter
import regex  # type: ignore[import-untyped]
from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node, NodeVisitor

from ..grammar import load_grammar
from ..grammar_ir import GrammarUnsupported, Lit, Repeat, Text, alt, seq
from ..grammar_ir import Node as GrammarNode
from ..grammar_ir import Regex as Pattern
from ..scanning import ScanResult, WalkSource, delimiters_of
from ..schema_typing import resolve_ref
from ..spec import CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent, empty_body
from ..strict_json import ENTRIES_COUNTED, entries, json_text
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet
from .argument_layout import in_order

_WORDS = {"true": True, "false": False, "null": None, "None": None}


@dataclass(frozen=True)
class ObjectLiteral:
    """The `object_literal` body kind, declared with one format's grammar and tokens."""

    grammar: str  # formats/<grammar>.peg
    quote: str  # the string quote token, the same at both ends (`<|"|>`)
    closer: str  # the envelope's closer (`<tool_call|>`)
    stops: tuple[str, ...] = ()  # end an unclosed call outside a string (the next call's opener)
    call_tag: str = "the call"  # how the call is named in error messages

    def scanner(self) -> QuoteAwareScanner:
        return QuoteAwareScanner(self.closer, self.stops, self.quote)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> HeaderStreamer:
        return HeaderStreamer(self.grammar)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        empty = empty_body(envelope, self.call_tag, f"{self.call_tag} is empty")
        if empty is not None:
            return empty
        if not envelope.complete:
            return [Rejection(TRUNCATED, [f"the output ended inside {self.call_tag} before {self.closer}"])]
        if not envelope.closer:
            return [Rejection(INVALID_JSON, [f"{self.call_tag} is not closed by {self.closer}"])]
        body = envelope.body
        try:
            read = _reader(self.grammar).call(body)
            name, arguments, written = read if read is not None else (
                *_VISITOR.visit(load_grammar(self.grammar).parse(body)), None)
        except ParseError as error:
            pos = error.pos
            return [Rejection(INVALID_JSON, [f"unexpected text at character {pos}: {body[pos:pos + 30]!r}"])]
        if not name:
            return [Rejection(INVALID_JSON, [f"{self.call_tag} has no function name"])]
        return [ParsedCall(name, arguments, written if written is not None else json_text(arguments))]

    def write_call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """A call's body as the template writes it: `call:NAME{…}` (the envelope's tags around it)."""
        return f"call:{name}{self.write(dict(arguments))}"

    def write(self, value: Any) -> str:
        """`value` as the template's `format_argument` writes it: keys sorted (`dictsort`), bare where
        the grammar reads them bare, strings between two quote tokens, raw; `true`/`false`, `None`,
        numbers as Python prints them."""
        if isinstance(value, str):
            return f"{self.quote}{value}{self.quote}"
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "None"
        if isinstance(value, dict):
            return "{" + ",".join(f"{self._key(k)}:{self.write(v)}" for k, v in sorted(value.items())) + "}"
        if isinstance(value, list):
            return "[" + ",".join(map(self.write, value)) + "]"
        return repr(value)

    def _key(self, key: str) -> str:
        return key if _BARE.fullmatch(key) else f"{self.quote}{key}{self.quote}"

    # ------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> GrammarNode:
        """`call:NAME{…}` with the arguments as the template's `format_argument` writes them: keys
        bare and sorted (`dictsort`), strings between two quote tokens, raw; `true`/`false`, `None`,
        numbers; each value's shape from its schema (`LiteralLayout`). A tool whose schema names no
        properties is called with no arguments, as in the other kinds (`argument_layout`)."""
        if "{" in name or name != name.strip() or not name:
            raise GrammarUnsupported(f"the tool name {name!r} cannot be written in a {self.call_tag} call "
                                     "(the name runs to the first '{'); rename it")
        if not parameters.get("properties") and not any(key in parameters for key in ("anyOf", "oneOf", "$ref")):
            return Lit(f"call:{name}{{}}")  # a tool whose schema names no properties: no arguments
        return seq(Lit(f"call:{name}"), LiteralLayout(self.quote, parameters).value(parameters, 0))

    def body_grammar(self, calls: GrammarNode, many: bool) -> GrammarNode:
        """One call, then the envelope's closer."""
        return seq(calls, Lit(self.closer))

    def calls_per_envelope(self) -> int | None:
        return 1


# ----------------------------------------------------------------- the layout's values

_BARE = regex.compile(r"[^:{}\[\],<\s](?:[^:{}\[\],<]*[^:{}\[\],<\s])?")
_INTEGER = Pattern(r"-?(0|[1-9][0-9]*)")
_NUMBER = Pattern(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_FREE_KEY = Pattern(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# How deep a value the schema leaves open (no type, a free-form object) may nest: the grammar has no
# recursion, so an open value is written out to this depth.
OPEN_DEPTH = 4
_MAX_DEPTH = 32  # a schema nested (or `$ref`-looped) deeper than this has no grammar


class LiteralLayout:
    """JSON schemas as object-literal values (`call_grammar`): objects `{k:v,…}` with their
    properties sorted, arrays `[a,b]`, strings quoted raw, `true`/`false`, `None` (`null` read too),
    numbers; `enum`/`const` as their literals; `anyOf`/`oneOf`/type lists as alternatives; local
    `$ref`s followed. Not expressed: string `pattern`/`format`/lengths, number bounds,
    `uniqueItems`, `patternProperties` (the tools check still rejects such a value)."""

    def __init__(self, quote: str, root: Mapping[str, Any]) -> None:
        self._quote, self._root = quote, root

    def value(self, schema: Any, depth: int) -> GrammarNode:
        if depth > _MAX_DEPTH:
            raise GrammarUnsupported("the tool's schema nests too deep (or refers to itself): an object-literal "
                                     "grammar cannot follow it")
        if schema is True or not isinstance(schema, Mapping) or not schema:
            return self._open(OPEN_DEPTH)
        if isinstance(schema.get("$ref"), str):
            return self.value(resolve_ref(schema["$ref"], self._root), depth + 1)
        if "const" in schema:
            return self.literal(schema["const"])
        if isinstance(schema.get("enum"), list):
            return alt(*(self.literal(value) for value in schema["enum"]))
        for keyword in ("anyOf", "oneOf"):
            if isinstance(schema.get(keyword), list):
                return alt(*(self.value(branch, depth + 1) for branch in schema[keyword]))
        if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            return self.value(schema["allOf"][0], depth + 1)
        declared = schema.get("type")
        kinds = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
        if not kinds:
            return self._open(OPEN_DEPTH) if "properties" not in schema else self._object(schema, depth)
        return alt(*(self._typed(kind, schema, depth) for kind in kinds))

    def literal(self, value: Any) -> GrammarNode:
        """A constant as the template writes it."""
        if isinstance(value, str):
            return self._string(Lit(value))
        if isinstance(value, bool):
            return Lit("true" if value else "false")
        if value is None:
            return alt(Lit("None"), Lit("null"))
        if isinstance(value, (int, float)):
            return Lit(repr(value))
        if isinstance(value, list):
            return seq(Lit("["), *_joined([self.literal(item) for item in value]), Lit("]"))
        if isinstance(value, Mapping):
            pairs = [seq(self._key(key), Lit(":"), self.literal(value[key])) for key in sorted(value)]
            return seq(Lit("{"), *_joined(pairs), Lit("}"))
        raise GrammarUnsupported(f"the schema constant {value!r} is not JSON data")

    def _typed(self, kind: str, schema: Mapping[str, Any], depth: int) -> GrammarNode:
        if kind == "string":
            return self._string(Text((self._quote,)))
        if kind == "integer":
            return _INTEGER
        if kind == "number":
            return _NUMBER
        if kind == "boolean":
            return alt(Lit("true"), Lit("false"))
        if kind == "null":
            return alt(Lit("None"), Lit("null"))
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object":
            return self._object(schema, depth)
        raise GrammarUnsupported(f"the schema type {kind!r} is not a JSON type")

    def _string(self, inside: GrammarNode) -> GrammarNode:
        return seq(Lit(self._quote), inside, Lit(self._quote))

    def _key(self, key: str) -> GrammarNode:
        if _BARE.fullmatch(key):
            return Lit(key)
        if self._quote in key:
            raise GrammarUnsupported(f"the key {key!r} holds the quote token {self._quote}: it cannot be written")
        return self._string(Lit(key))

    def _object(self, schema: Mapping[str, Any], depth: int) -> GrammarNode:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            if schema.get("additionalProperties", True) is False:
                return Lit("{}")
            return self._open_object(OPEN_DEPTH - 1)
        listed = schema.get("required")
        required: list[Any] = listed if isinstance(listed, list) else []
        parts = [(seq(self._key(key), Lit(":"), self.value(properties[key], depth + 1)), key in required)
                 for key in sorted(properties)]
        return seq(Lit("{"), in_order(parts, Lit(",")), Lit("}"))

    def _array(self, schema: Mapping[str, Any], depth: int) -> GrammarNode:
        items = schema.get("items")
        item = self.value(items, depth + 1) if isinstance(items, Mapping) else self._open(OPEN_DEPTH - 1)
        least = schema.get("minItems", 0)
        most = schema.get("maxItems")
        least = least if isinstance(least, int) and least >= 0 else 0
        most = most if isinstance(most, int) and most >= least else None
        if most == 0:
            return Lit("[]")
        return seq(Lit("["), Repeat(item, least, most, Lit(",")), Lit("]"))

    def _open(self, depth: int) -> GrammarNode:
        """Any value, nesting at most `depth` levels."""
        scalars = [self._string(Text((self._quote,))), _NUMBER, Lit("true"), Lit("false"), Lit("None")]
        if depth <= 0:
            return alt(*scalars)
        inner = self._open(depth - 1)
        return alt(*scalars, seq(Lit("["), Repeat(inner, 0, None, Lit(",")), Lit("]")), self._open_object(depth))

    def _open_object(self, depth: int) -> GrammarNode:
        inner = self._open(depth - 1)
        return seq(Lit("{"), Repeat(seq(_FREE_KEY, Lit(":"), inner), 0, None, Lit(",")), Lit("}"))


def _joined(parts: list[GrammarNode]) -> list[GrammarNode]:
    """The parts with `,` between them."""
    out: list[GrammarNode] = []
    for index, part in enumerate(parts):
        out += [Lit(","), part] if index else [part]
    return out


class QuoteAwareScanner:
    """Ends a body at its closer outside a string, or before a stop outside a string; a string runs
    from one quote token to the next.

    Cost: whether the first closer or stop is outside strings is told by the parity of the quotes
    before it (`str.count`), so the text is looked at by `str.find` and `str.count` alone (C speed,
    however many strings it holds); the loop turns once per delimiter found inside a string and
    once per chunk that ends inside one. The delimiters are looked for in windows that grow
    fourfold (`_WINDOW` first): each turn reads about twice the text up to what it finds."""

    def __init__(self, closer: str, stops: tuple[str, ...], quote: str) -> None:
        self._closer, self._quote = closer, quote
        self._delimiters = delimiters_of((closer, *stops, quote))
        self._ends = _ends_of(quote, self._delimiters.strings)
        firsts = {d[0] for d in self._delimiters.strings}
        self._first = firsts.pop() if len(firsts) == 1 else None  # the delimiters' one first character
        self._in_string = False

    def scan(self, text: str, pos: int) -> ScanResult:
        start, quote, size = pos, self._quote, len(text)
        while True:
            if self._in_string:
                close = text.find(quote, pos)
                if close < 0:
                    return ScanResult(max(self._delimiters.held_from(text), start))
                self._in_string = False
                pos = close + len(quote)
            if self._first is not None and text.find(self._first, pos) < 0:  # (most chunks of a stream)
                return ScanResult(max(self._delimiters.held_from(text), start))
            limit, found, low, window = size, None, pos, _WINDOW  # the first closer or stop: `found` at `limit`
            while True:
                high = min(size, low + window)  # delimiters starting in text[low:high], before `limit`
                for end in self._ends:  # (longest first: of two starting at one place, the longer is kept)
                    at = text.find(end, low, min(high, limit) + len(end) - 1)
                    if at >= 0:
                        limit, found = at, end
                if found is not None or high == size:
                    break
                low, window = high, window * 4
            if text.count(quote, pos, limit) % 2:  # the last quote before `limit` opens a string it is in
                self._in_string = True
                pos = text.rfind(quote, pos, limit) + len(quote)
            elif found is None:  # the end of the text, where a delimiter may be starting: held back
                return ScanResult(max(self._delimiters.held_from(text), start))
            else:
                return ScanResult(limit, limit + len(found) if found == self._closer else limit)


_WINDOW = 512  # text past which `QuoteAwareScanner` looks for the delimiters in growing windows


@cache
def _ends_of(quote: str, delimiters: tuple[str, ...]) -> tuple[str, ...]:
    """The delimiters but the quote (longest first), where `QuoteAwareScanner` may tell strings by
    counting quotes: no quote token overlaps another, and no delimiter lies inside one or starts
    with its end (held back after a string, it would be read again as outside it)."""
    if any((d != quote and d in quote) or any(d.startswith(quote[i:]) for i in range(1, len(quote)))
           for d in delimiters):
        raise ValueError(f"a delimiter overlaps the quote token {quote!r}: strings cannot be told by counting quotes")
    return tuple(d for d in delimiters if d != quote)


class HeaderStreamer:
    """Progressive mode: the call starts once its header (up to the object's `{`) is read."""

    def __init__(self, grammar: str) -> None:
        self._header = load_grammar(grammar)["header"].re
        self._head: list[str] = []
        self._done = False

    def feed(self, body: str) -> list[StreamEvent]:
        if self._done:
            return []
        brace = body.find("{")
        if brace < 0:
            self._head.append(body)
            return []
        self._done = True
        header = "".join(self._head) + body[:brace]
        match = self._header.fullmatch(header)
        name = match.group("name").strip() if match is not None else ""
        return [CallStart(0, name)] if name else []


class _Fail(Exception):
    """The body does not read as the grammar's `call` here (the grammar then says why)."""


class _Reader:
    """What `_VISITOR` makes of the grammar's tree, read with the grammar's own terminals and no
    tree (a PEG reads deterministically: the same matches, the same result). Cost: one regex match
    per terminal, instead of a parse node and a visit per rule (a 70K-character string is one match)."""

    def __init__(self, grammar: str) -> None:
        rules = load_grammar(grammar)
        self.header, self.ws, self.bare_key, self.text, self.number, self.word = (
            _as_re(rules[name].re) for name in ("header", "ws", "bare_key", "text", "number", "word"))
        self.quote: str = rules["quote"].literal

    def call(self, body: str) -> tuple[str, dict[str, Any], str | None] | None:
        """The call's name, its arguments and their `json_text` where that is the text they were
        read from (else None); None where the body does not read as the grammar's `call`."""
        head = self.header.match(body)
        if head is None or not body.startswith("{", head.end()):
            return None
        name = head.group("name").strip()
        found = _as_json(body, head.end(), self.quote)
        if found is not None:
            return name, *found
        try:
            arguments, pos = self._object(body, head.end())
        except _Fail:
            return None
        return (name, arguments, None) if self.ws.match(body, pos).end() == len(body) else None

    def _skip(self, body: str, pos: int) -> int:
        return int(self.ws.match(body, pos).end())

    def _string(self, body: str, pos: int) -> tuple[str, int]:
        start = pos + len(self.quote)
        end = self.text.match(body, start).end()
        if not body.startswith(self.quote, end):
            raise _Fail
        return body[start:end], end + len(self.quote)

    def _object(self, body: str, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        pos = self._skip(body, pos + 1)
        while not body.startswith("}", pos):
            if body.startswith(self.quote, pos):
                key, pos = self._string(body, pos)
            else:
                bare = self.bare_key.match(body, pos)
                if bare is None:
                    raise _Fail
                key, pos = bare.group().strip(), bare.end()
            pos = self._skip(body, pos)
            if not body.startswith(":", pos):
                raise _Fail
            out[key], pos = self._value(body, self._skip(body, pos + 1))
            pos = self._separator(body, self._skip(body, pos), "}")
        return out, pos + 1

    def _array(self, body: str, pos: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos = self._skip(body, pos + 1)
        while not body.startswith("]", pos):
            value, pos = self._value(body, pos)
            out.append(value)
            pos = self._separator(body, self._skip(body, pos), "]")
        return out, pos + 1

    def _separator(self, body: str, pos: int, closer: str) -> int:
        """After a member: `,` and whitespace (a trailing one before `closer` is tolerated), or `closer`."""
        if body.startswith(",", pos):
            return self._skip(body, pos + 1)
        if not body.startswith(closer, pos):
            raise _Fail
        return pos

    def _value(self, body: str, pos: int) -> tuple[Any, int]:
        if body.startswith(self.quote, pos):
            return self._string(body, pos)
        if body.startswith("{", pos):
            return self._object(body, pos)
        if body.startswith("[", pos):
            return self._array(body, pos)
        number = self.number.match(body, pos)
        if number is not None:
            text = number.group()
            return (float(text) if "." in text or "e" in text or "E" in text else int(text)), number.end()
        word = self.word.match(body, pos)
        if word is None:
            raise _Fail
        return _WORDS[word.group()], word.end()


# `_as_json`: the place holder of the strings in the structure.
_STRING = "\x00"
_KEY_CHARACTERS = r'[^:{}\[\],<\x00"]++'  # (possessive: the class holds neither `"` nor `:`)
# Compact structure (`_compact`): where a bare key opens after `,` (key characters up to a `:`),
# an opening `"` put in after `{` that opens no key (`{` followed by anything but key characters
# and their closing `"`: put in after every `{`, it is taken back before `}` and a string key),
# where a string key ends, `None` as a value (before `,`, `}` or `]`; a key's is before `:`).
_KEY_AFTER_COMMA = re.compile(r",(?=" + _KEY_CHARACTERS + ":)")
_NO_KEY_AFTER_BRACE = re.compile(r'\{"(?!' + _KEY_CHARACTERS + '")')
_STRING_KEY = re.compile(_STRING + ":")
_NONE = re.compile(r"None(?=[,}\]])")
_EMPTY_ARRAY = re.compile(r"\[\]")  # (a regex finds two characters faster than `str.count`)
_EMPTY_OBJECT = re.compile(r"\{\}")
# A string at least this long, where the strings are at least this many times as long as their
# structure, is read by jiter as a stand-in (`_stand_ins`).
_LONG_STRING = 256
# Spaced structure (`_spaced`): a bare key (after `{` or `,` and whitespace, before `:`, trimmed as
# the grammar's `bare_key` is), split off with what leads to it.
_BARE_KEY = re.compile(r"([{,][ \t\r\n]*+)([^:{}\[\],<\s\x00](?:[^:{}\[\],<\x00]*[^:{}\[\],<\s\x00])?)(?=[ \t\r\n]*:)")


def _as_json(body: str, pos: int, quote: str) -> tuple[dict[str, Any], str | None] | None:
    """The object literal `body[pos:]` (to the end, whitespace after it) respelled as JSON and read
    at C speed, where that reads it as the grammar does, with the value's `json_text` where that is
    the text read; None where it may not (the walk reads it then). Strings (raw text between quote
    tokens) and bare keys become JSON strings, `None` `null`; structure JSON would read otherwise
    (`"` and `\\` in it) is left to the walk, and so is anything JSON refuses (NaN, Infinity, a
    trailing `,`, `2.`, which the grammar reads).

    Cost: a few passes at C speed over the text and one C call per string to encode it, where the
    walk costs several Python calls per value; written as the templates write it (no whitespace
    between tokens), the keys are quoted by two substitutions rather than one by one."""
    parts = body[pos:].split(quote)
    if len(parts) % 2 == 0 or _STRING in body:  # a string that does not close, or the place holder in the text
        return None
    structure = _STRING.join(parts[0::2]).rstrip(" \t\r\n")
    if '"' in structure or "\\" in structure:
        return None
    raw = parts[1::2]
    strings = list(map(_encode_string, raw))
    if len(structure.split(None, 1)) == 1:  # no whitespace
        found = _compact(structure, raw, strings)
        if found is not None:
            return found
    value = _spaced(structure, strings)
    return (value, None) if value is not None else None


def _compact(structure: str, raw: list[str], strings: list[str]) -> tuple[dict[str, Any], str | None] | None:
    """`_as_json` of structure without whitespace (strings as `_STRING`; `raw` as read, `strings`
    encoded), spaced as `json.dumps` spaces it: each bare key's quotes put in by replacements at C
    speed. An opening quote is put in after a `,` followed by key characters and their `:`, and
    after every `{` (taken back before `}` and a string key), where it must be followed by key
    characters and its own key's closing `"`, else the object is not one the grammar reads (`{`
    opens a key, a string key or `}`). One opening quote per `:` that follows no string means
    every `:` follows a quoted key. No key written twice (the value's
    entries, `strict_json.entries`, are as many as the text's commas and non-empty containers)
    and every number spelled as `json.dumps` spells it (`_numbers_written`): the text read is the
    value's `json_text`.

    The structure is respelled before it is spaced (shorter text), and counts come from the lengths
    the replacements add (a `,` gains a space, a `:` a quote and a space, a `{` a quote), not from
    passes of their own."""
    string_keys = len(_STRING_KEY.findall(structure))
    keyed, more = _KEY_AFTER_COMMA.subn(',"', _NONE.sub("null", structure))
    spaced = keyed.replace(",", ", ")
    commas = len(spaced) - len(keyed)
    colons = spaced.replace(":", '": ')
    bare_keys = (len(colons) - len(spaced)) // 2 - string_keys
    keyed = colons.replace("{", '{"')
    braces = len(keyed) - len(colons)
    empty_objects = len(_EMPTY_OBJECT.findall(structure))
    if empty_objects:
        keyed = keyed.replace('{"}', "{}")
    opened = braces - empty_objects  # (a bare key or a string key opens each other object)
    if string_keys:
        keyed = keyed.replace(_STRING + '": ', _STRING + ": ").replace('{"' + _STRING, "{" + _STRING)
        opened -= structure.count("{" + _STRING)
    if opened + more != bare_keys or _NO_KEY_AFTER_BRACE.search(keyed):
        return None
    outside = keyed.split(_STRING)
    text = _interleaved(outside, strings)
    mostly_strings = not string_keys and len(text) - len(keyed) >= _LONG_STRING * len(keyed)
    stand_ins = _stand_ins(raw, strings) if mostly_strings else None
    read = text if stand_ins is None else _interleaved(outside, stand_ins)
    try:
        value = jiter.from_json(read.encode(), allow_inf_nan=False)
    except (ValueError, UnicodeEncodeError):  # not JSON, a lone surrogate
        return None
    if not isinstance(value, dict):
        return None
    if stand_ins is not None:
        _put_back(value, raw)
    # The entries written: a comma between two, one more in each container not empty.
    written = commas + braces - empty_objects + structure.count("[") - len(_EMPTY_ARRAY.findall(structure))
    once = ENTRIES_COUNTED and entries(value) == written  # else a key was written twice (its last value kept)
    return value, text if once and _numbers_written(structure) else None


def _stand_ins(raw: list[str], strings: list[str]) -> list[str] | None:
    """`strings` with each ASCII string of `raw` at least `_LONG_STRING` long as a stand-in
    `"\\u0000<index>"` (None where there is none): jiter then does not read again a string
    already read, `_put_back` puts it in. No string read holds `_STRING`, so none other reads as
    a stand-in; an ASCII string's JSON text reads as itself (a lone surrogate is left to jiter to
    refuse, as before).

    Cost: a Python step per string, and in `_put_back` per entry, where the strings are at least
    `_LONG_STRING` times as long as the structure (`_compact`): fewer steps than a 256th of the
    strings' characters, to save jiter a pass over the long strings' characters."""
    out = [f'"\\u0000{index}"' if len(text) >= _LONG_STRING and text.isascii() else string
           for index, (text, string) in enumerate(zip(raw, strings, strict=True))]
    return out if out != strings else None


def _put_back(value: Any, raw: list[str]) -> None:
    """Each stand-in (`_stand_ins`) among the values in `value`'s containers replaced by its string."""
    level = [value]
    while level:
        inner = []
        for container in level:
            for key, item in container.items() if isinstance(container, dict) else enumerate(container):
                if isinstance(item, str):
                    if item.startswith(_STRING):
                        container[key] = raw[int(item[1:])]
                elif isinstance(item, (dict, list)):
                    inner.append(item)
        level = inner


# `_numbers_written`: a number's shape, its digits told apart only as zero or not.
_SHAPE_OF = bytes(ord("0") if b == ord("0") else ord("1") if b in b"123456789" else b if b in b"-+.eE" else ord(" ")
                  for b in range(256))
_SHAPE = re.compile(r"(-?)(0|1[01]*)(?:\.([01]+))?")


def _numbers_written(structure: str) -> bool:
    """Whether every number in JSON `structure` (its strings taken out) is spelled as `json.dumps`
    spells its value. Told from the numbers' shapes (`_SHAPE_OF`: few, however many numbers): an
    integer but `-0`; a float without exponent, whose digits but leading zeros are at most 15 (so
    no shorter spelling reads as the same double) and whose fraction is `0` or ends in a non-zero
    digit, at most 15 digits before the point and at most three zeros after `0.` (`repr` writes
    smaller and larger values with an exponent). Shapes from keys' characters may only say no."""
    return all(map(_shape_written, set(structure.encode().translate(_SHAPE_OF).split())))


@lru_cache(maxsize=4096)  # shapes are few in what models write; keys' digits could make more
def _shape_written(shape: bytes) -> bool:
    if b"0" not in shape and b"1" not in shape:  # no digit: `true`, `false`, a key's letters
        return True
    match = _SHAPE.fullmatch(shape.decode())
    if match is None:
        return False
    sign, whole, fraction = match.groups()
    if fraction is None:
        return whole != "0" or not sign
    if len(whole) > 15 or not (fraction == "0" or fraction.endswith("1")):
        return False
    if whole == "0" and fraction != "0" and len(fraction) - len(fraction.lstrip("0")) > 3:
        return False
    return len((whole + fraction).lstrip("0")) <= 15


def _spaced(structure: str, strings: list[str]) -> dict[str, Any] | None:
    """`_as_json` of structure with whitespace: bare keys split off by a pattern and quoted one by one."""
    pieces = _BARE_KEY.split(structure)  # structure, lead, bare key, structure, …
    joined = "\x01".join(pieces[0::3])
    if "None" in joined:
        pieces[0::3] = joined.replace("None", "null").split("\x01")
    pieces[2::3] = map(_encode_string, pieces[2::3])
    try:
        value = _LITERAL_DECODER.decode(_interleaved("".join(pieces).split(_STRING), strings))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _interleaved(outside: list[str], strings: list[str]) -> str:
    """The text between the strings and the strings, in turn."""
    text = [""] * (2 * len(outside) - 1)
    text[0::2] = outside
    text[1::2] = strings
    return "".join(text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not an object-literal value")


_LITERAL_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_encode_string: Callable[[str], str] = json.encoder.encode_basestring


@cache
def _reader(grammar: str) -> _Reader:
    return _Reader(grammar)


def _as_re(pattern: Any) -> Any:
    """`pattern` compiled by `re` when `re` reads it (its fixed cost per match is a quarter of the
    `regex` module's, and a body is read with several matches per value); else `pattern`."""
    if pattern.flags != regex.compile("").flags:
        return pattern
    try:
        return re.compile(pattern.pattern)
    except re.error:
        return pattern


class _Visitor(NodeVisitor):  # type: ignore[misc]
    """The grammar's tree as (name, arguments)."""

    def visit_call(self, node: Node, children: list[Any]) -> tuple[str, dict[str, Any]]:
        return children[0], children[1]

    def visit_header(self, node: Node, children: list[Any]) -> str:
        return str(node.match.group("name")).strip()

    def visit_object(self, node: Node, children: list[Any]) -> dict[str, Any]:
        members = children[2]
        return dict(members[0]) if isinstance(members, list) and members else {}

    def visit_members(self, node: Node, children: list[Any]) -> list[tuple[str, Any]]:
        first, rest, _ = children
        return [first, *(pair for _, pair in (rest if isinstance(rest, list) else []))]

    def visit_pair(self, node: Node, children: list[Any]) -> tuple[str, Any]:
        return children[0], children[4]

    def visit_key(self, node: Node, children: list[Any]) -> str:
        key = children[0]
        return key if isinstance(key, str) else str(node.text).strip()

    def visit_bare_key(self, node: Node, children: list[Any]) -> str:
        return str(node.text).strip()

    def visit_array(self, node: Node, children: list[Any]) -> list[Any]:
        items = children[2]
        return items[0] if isinstance(items, list) and items else []

    def visit_items(self, node: Node, children: list[Any]) -> list[Any]:
        first, _, rest, _ = children
        return [first, *(value for _, value, _ in (rest if isinstance(rest, list) else []))]

    def visit_value(self, node: Node, children: list[Any]) -> Any:
        return children[0]

    def visit_string(self, node: Node, children: list[Any]) -> str:
        return str(node.children[1].text)

    def visit_number(self, node: Node, children: list[Any]) -> Any:
        text = str(node.text)
        if "." in text or "e" in text or "E" in text:
            return float(text)
        return int(text)

    def visit_word(self, node: Node, children: list[Any]) -> Any:
        return _WORDS[node.text]

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _Visitor()
