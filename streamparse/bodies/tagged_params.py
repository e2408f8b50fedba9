"""Body kind `tagged_params`: calls whose parameters are tagged text, read once.

Qwen3-Coder `<parameter=K>V</parameter>`, DSML `<｜DSML｜parameter name="K" string="true">V…`, GLM
`<arg_key>K</arg_key><arg_value>V</arg_value>`, MiniMax `<parameter name="K">V</parameter>`, Seed-OSS.
A dialect names its grammar (`formats/<name>.peg`, with the rule names `call_head`, `param_open`,
`param_head`, `value`, `param_close`, `ws` shared by every dialect: the tags are data), the literal
strings that open and close a parameter, where a header is known to end, whether one newline after
the opening tag and one before the closing tag are framing, and how a parameter's text becomes a
value (typing by the tool's schema, `schema_typing.py`). The grammar's `call_head` and `param_head`
regexes name the call and the parameter (group `name`); a `call_head` that may end without a
closing character (GLM's name runs to a newline or the first `<arg_key>`) says with an optional
group `closed` whether its end was written.

`arguments_json` is `json.dumps(arguments, ensure_ascii=False)`, except that an object or array
parameter written as strict JSON is written as the model wrote it (without the whitespace around
it), as the JSON formats keep the model's arguments text: it is read once and not written again.
The streamer sends exactly that text in order: `{`, then per parameter `"key": ` and either `"` +
the JSON-escaped string as the model writes it + `"` (a parameter that is a string whatever its
text), or the typed value once its parameter closes; the engine sends the final `}`. A framing
newline and the start of a closing tag are held back until the next text shows what they are, so
nothing is ever taken back; so is a newline at the end of a value whose dialect drops it when the
closing tag turns out to be missing.

A parameter name given twice rejects the call (`invalid_json`, naming the parameter): neither
value is clearly the one meant, and the streamed text would not be an object with unique keys.
A dialect that declares `repeated_key_last_wins` (GLM) keeps the last value instead, and its
`arguments_json` is the resulting object, strict JSON with each key once (at its first place). A
repeat can come at any point of the call and would change text already sent, so in progressive
mode such a dialect's call is started (id and name) as soon as its name is read and its arguments
are sent whole when it closes.

Cost: each body character is searched once (compiled alternations, regex jumps); the text
carried from one piece to the next is shorter than the longest tag, except a tag's own text (a
call or parameter header), which is kept as pieces and joined once when one of its ends arrives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from json.encoder import encode_basestring
from typing import Any

import regex  # type: ignore[import-untyped]
from parsimonious.exceptions import ParseError
from parsimonious.expressions import Literal, Regex
from parsimonious.nodes import Node, NodeVisitor

from ..grammar import load_grammar
from ..grammar_ir import EMPTY, GrammarUnsupported, Json, Lit, Text, alt, seq
from ..grammar_ir import Node as GrammarNode
from ..grammar_ir import Regex as Pattern
from ..scanning import ScanResult, WalkSource, delimiters_of
from ..schema_typing import Typed, property_schema, schema_types, typed
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent
from ..strict_json import json_text, strict_loads
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet
from .argument_layout import enum_strings, in_order, parameters_in_order, with_definitions
from .python_layout import python_container

# How a parameter's text becomes its value: (text without framing, `string` flag or None, the
# parameter's schema or None) -> `Typed` (the value, and its JSON text when that is the text as
# written). And whether that value is a string whatever the text is (then it streams): (flag,
# schema) -> bool.
ValueReader = Callable[[str, "str | None", Any], Typed]
StringTest = Callable[["str | None", Any], bool]


def untyped_value(text: str, flag: str | None, schema: Any) -> Typed:
    """Qwen3-Coder: the text is typed by the schema alone (FORMATS.md, "Typing by schema")."""
    return typed(text, schema)


def untyped_is_string(flag: str | None, schema: Any) -> bool:
    """A parameter whose schema allows no non-string type is its text, whatever the text."""
    return not schema_types(schema) - {"string"}


@dataclass(frozen=True)
class TaggedParams:
    """The `tagged_params` body kind, declared with the tags of one format; everything else is shared."""

    grammar: str  # formats/<grammar>.peg
    param_open: str  # e.g. "<parameter="
    param_close: str  # e.g. "</parameter>"
    framing_newline: bool  # one newline after the opening and one before the closing tag are framing
    call_tag: str  # how the call's tag is named in error messages, e.g. "<function=…>"
    call_close: str  # the envelope's closer, e.g. "</function>"
    wrapper_closers: tuple[str, ...]  # end a call whose closer is missing, outside a value
    value_of: ValueReader = untyped_value
    is_string: StringTest = untyped_is_string
    # Where the streamer knows a call header (`call_head`) or a parameter header (`param_head`) has
    # ended: the header's regex is matched on the text up to and including the first of these;
    # text after its match is read again as what follows the header.
    head_ends: tuple[str, ...] = (">", "<")
    param_head_ends: tuple[str, ...] = (">", "<")  # the first is the one a well-formed head ends with
    # A value whose closing tag is missing loses one newline (or `\r\n`) just before what ends it
    # (the next parameter, the call's end): whitespace between elements, not value.
    newline_before_next_element: bool = False
    # At the end of the output, a call whose last element is closed (its last value's closing tag,
    # or its head with no parameters) needs no end tag; cut inside a name, key or value it is
    # `truncated`. Otherwise every call the output cuts off is `truncated`.
    end_tag_optional: bool = False
    # A parameter given twice keeps its last value (progressive mode then sends the arguments when
    # the call closes); otherwise it rejects the call.
    repeated_key_last_wins: bool = False
    # What ends the call's head (named in the rejection of a head that does not end).
    head_closer: str = ">"
    # Attribute values (the call's and the parameters' names) decode `&quot;` and `&amp;` (Kimi K3
    # escapes exactly these two in attributes; values are never unescaped).
    unescape_attributes: bool = False
    # An element holding the whole arguments object as JSON instead of parameters: its opening tag
    # (its head is the grammar's `json_head`) and its closing tag (Kimi K3's `<|open|>json …`).
    json_element: tuple[str, str] | None = None
    # How a grammar writes a call (`call_grammar`): the call's head after the envelope's opener, with
    # `{name}` for the tool's name (and `{index}` for a call counter, Kimi K3's); a parameter's head
    # after `param_open`, with `{key}` and, for a dialect with a typing attribute, `{type}`, whose word
    # `type_words` gives per JSON type (`"json"`: every type not named); what closes the body before
    # the envelope's closer. `{ws}` is an optional newline: the templates write one between elements,
    # or none (GLM-4.7). Non-strings may also be spelled as Python's `str()` prints them where the
    # dialect's templates do (`python_values`: `True`, `None`, `{'k': [1, 'a']}`; the shared typing
    # reads JSON first, then Python): offered alongside JSON in every grammar of the dialect, so that
    # a model keeps the spelling its template taught it, whichever that was.
    head_form: str = "{name}>"
    param_form: str = "{key}>"
    tail_form: str = ""
    type_words: tuple[tuple[str, str], ...] = ()
    python_values: bool = False
    # The `json_element`'s head after its opener, as the template writes it (Kimi K3's ` type="object"<|sep|>`):
    # a grammar then also writes the arguments as that one element. Empty: parameters only.
    json_form: str = ""
    # A value that starts with this opener right after its parameter's head is the text up to the
    # first closer, whatever it holds (MiniCPM5's CDATA `<![CDATA[`…`]]>`): inside, no tag is looked
    # for (the call's end and the parameter tags are text); after the closer only whitespace and the
    # parameter's closing tag may follow (the grammar's `value` rule says so too). None: no bracket.
    raw_bracket: tuple[str, str] | None = None

    @property
    def closers(self) -> tuple[str, ...]:
        """What ends a body of this kind, consumed (as every kind that declares closers says):
        the call's end tag. A choosing kind (`first_character`) writes no closer of its own after it."""
        return (self.call_close,)

    def name_of(self, match: Any) -> str:
        """The `name` group of a call or parameter header, stripped (and unescaped when declared)."""
        name = _name(match)
        if self.unescape_attributes and "&" in name:
            return name.replace("&quot;", '"').replace("&amp;", "&")
        return name

    def scanner(self) -> XmlEnvelopeScanner:
        """A fresh scanner for one call body of this dialect."""
        return XmlEnvelopeScanner(self.call_close, self.wrapper_closers, self.param_open, self.param_close,
                                  self.raw_bracket, self.param_head_ends)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> XmlCallStreamer:
        """A fresh progressive streamer for one call body of this dialect."""
        return XmlCallStreamer(self, tools)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        """The call in a finished envelope (see `parse_call`)."""
        return parse_call(self, envelope, tools)

    # ------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> GrammarNode:
        """One call as the dialect's templates write it: the head naming `name`, then one parameter
        element per property in the schema's order (`argument_layout`), each required one once, a
        string as its raw text up to the closing tag, any other type as JSON matching its schema
        (with the typing attribute's word, where the dialect writes one), then the tail."""
        head = self._form(self.head_form, name=Lit(self._attribute(name)))
        self._check_writable("call_head", self.head_form, {"name": name})
        elements = in_order([(seq(_GAP, self._element(key, schema if required else _without_added_null(schema),
                                                      parameters)), required)
                              for key, schema, required in parameters_in_order(parameters)])
        if self.json_element is not None and self.json_form:
            opener, closer = self.json_element
            whole = seq(Lit(opener + self.json_form), Json(parameters), Lit(closer))
            elements = alt(elements, seq(_GAP, whole))
        return seq(head, elements, _GAP, self._form(self.tail_form))

    def body_grammar(self, calls: GrammarNode, many: bool) -> GrammarNode:
        """One call, then the envelope's closer."""
        return seq(calls, Lit(self.call_close))

    def calls_per_envelope(self) -> int | None:
        return 1

    def _element(self, key: str, schema: Any, root: Mapping[str, Any]) -> GrammarNode:
        """A parameter element: one option per typing word, each with the values written under it."""
        by_word: dict[str | None, list[GrammarNode]] = {}
        for word, value in self._values(schema, root):
            by_word.setdefault(word, []).append(value)
        framing = Lit("\n") if self.framing_newline else EMPTY
        close = seq(framing, Lit(self.param_close))
        options = []
        for word, values in by_word.items():
            self._check_writable("param_head", self.param_form, {"key": key, "type": word or ""})
            head = self._form(self.param_form, key=Lit(self._attribute(key)), type=Lit(word or ""))
            # The closing tag in each alternative: a raw text is then always followed by its own stop
            # (what llguidance's lazy lexeme needs).
            options.append(seq(Lit(self.param_open), head, framing, alt(*(seq(value, close) for value in values))))
        return alt(*options)

    def _values(self, schema: Any, root: Mapping[str, Any]) -> list[tuple[str | None, GrammarNode]]:
        """(typing word, value) pairs: a string is its raw text (one of its constants, if it names
        them), every other type JSON matching the schema."""
        types = schema_types(schema, root=root)
        out: list[tuple[str | None, GrammarNode]] = []
        if not types or "string" in types:
            constants = enum_strings(schema)
            texts = [alt(*(Lit(value) for value in constants))] if constants else self._raw_texts()
            out += [(self._word("string"), text) for text in texts]
        others = types - {"string"}
        if others:
            value = Json(with_definitions(_without_string(schema, types), root))
            spellings = self._python_spellings(_without_string(schema, types), others, root) \
                if self.python_values else []
            for kind in sorted(others):
                out.append((self._word(kind), alt(value, *spellings)))
        return out

    def _raw_texts(self) -> list[GrammarNode]:
        """A string's text up to the closing tag; with a `raw_bracket`, also the bracketed form, and
        the bare text then never holds the bracket's opener (the parser would read it as one). (Each
        its own option: a text directly followed by its stop is what llguidance's lazy lexeme needs.)"""
        stops = (self.param_close, self.param_open, self.call_close)
        if self.raw_bracket is None:
            return [Text(stops)]
        opener, closer = self.raw_bracket
        return [Text((*stops, opener)), seq(Lit(opener), Text((closer,)), Lit(closer))]

    @staticmethod
    def _python_spellings(schema: Any, others: set[str], root: Mapping[str, Any]) -> list[GrammarNode]:
        """A non-string value as Python's `str()` prints it: `True`/`False`, `None`, and a list or dict
        as its repr (`python_layout.REPR`), each only where the schema allows that type."""
        words: list[GrammarNode] = [Lit(word) for kind, spelled in _PYTHON_SPELLINGS.items() if kind in others
                                    for word in spelled]
        container = python_container(schema, root) if others & {"array", "object"} else None
        return words if container is None else [*words, container]

    def _word(self, kind: str) -> str | None:
        """The typing attribute's word for values of JSON type `kind`, or None without an attribute."""
        if not self.type_words:
            return None
        words = dict(self.type_words)
        return words.get(kind, words.get("json"))

    def _attribute(self, text: str) -> str:
        """A name as an attribute value is written (escaped where the dialect unescapes)."""
        return text.replace("&", "&amp;").replace('"', "&quot;") if self.unescape_attributes else text

    def _form(self, form: str, **parts: GrammarNode) -> GrammarNode:
        """`form` with its `{name}`-style placeholders replaced by `parts` (`{ws}`, `{index}` built in)."""
        nodes: list[GrammarNode] = []
        for index, piece in enumerate(_PLACEHOLDER.split(form)):
            if index % 2 == 0:
                nodes.append(Lit(piece))
            else:
                nodes.append(_GAP if piece == "ws" else _INDEX if piece == "index" else parts[piece])
        return seq(*nodes)

    def _check_writable(self, rule: str, form: str, values: Mapping[str, str]) -> None:
        """Raise `GrammarUnsupported` when the dialect's own grammar would not read `form` written
        with `values` back as the same name (a tool or key name holding the dialect's delimiters)."""
        filled = {"ws": "", "index": "1", **{part: self._attribute(value) if part != "type" else value
                                             for part, value in values.items()}}
        text = _PLACEHOLDER.sub(lambda match: filled[match.group(1)], form)
        pattern = load_grammar(self.grammar)[rule].re
        match = pattern.match(text)
        wanted = values["name"] if rule == "call_head" else values["key"]
        if match is None or match.end() != len(text) or self.name_of(match) != wanted or wanted != wanted.strip():
            what = "tool name" if rule == "call_head" else "parameter name"
            raise GrammarUnsupported(f"the {what} {wanted!r} cannot be written in a {self.call_tag} call: "
                                     "the format's tags would not read it back; rename it")


def strip_framing(raw: str) -> str:
    """The value without one leading and one trailing newline (`\\r\\n` counts as one)."""
    if raw.startswith("\r\n"):
        raw = raw[2:]
    elif raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\r\n"):
        return raw[:-2]
    if raw.endswith("\n"):
        return raw[:-1]
    return raw


def _escaped(text: str) -> str:
    """`text` as it appears inside a JSON string; escaping is per character, so pieces join.
    (`encode_basestring` is what `json.dumps(text, ensure_ascii=False)` calls, without building an
    encoder per call.)"""
    return encode_basestring(text)[1:-1]


def _flag(match: Any) -> str | None:
    """The header's typing attribute, group `string` or `type` (DSML's `string="true"`, Kimi K3's
    `type="number"`), or None."""
    number = _groups(match.re)[1] if match is not None else 0
    return match.group(number) if number else None


def _name(match: Any) -> str:
    """The header's `name` group, stripped."""
    name: str = match.group(_groups(match.re)[0])
    return name.strip()


@cache
def _groups(pattern: Any) -> tuple[int, int, int]:
    """The numbers of a header regex's groups `name`, `string` (or `type`) and `closed` (0 for one it
    lacks): the `regex` module finds a group by name slowly (a micro-second a call), by number at once."""
    index = pattern.groupindex
    return index["name"], index.get("string", index.get("type", 0)), index.get("closed", 0)


_TAGS, _HEAD, _LEAD, _BRACKET = range(4)  # what XmlEnvelopeScanner looks for next


class XmlEnvelopeScanner:
    """Ends a call body at the first `closer` (consumed), or at a `stop` (left for the enclosing
    wrapper) written outside a parameter value: a value holds any text but the parameter tags and
    the closer, so `</tool_call>` inside code is data, while after `</parameter>` it ends a call
    whose `</function>` is missing. With a `bracket` (`TaggedParams.raw_bracket`), a value that
    opens with it right after its parameter's head (which ends at the first of `head_ends`) is
    skipped to the bracket's closer, tags and all (a head ended by another of `head_ends` is
    malformed: no bracket follows it). (A general building block: it could move to
    `scanning.py`.)"""

    def __init__(self, closer: str, stops: tuple[str, ...], param_open: str, param_close: str,
                 bracket: tuple[str, str] | None = None, head_ends: tuple[str, ...] = (">", "<")) -> None:
        self._closer = closer
        self._stops = frozenset(stops)
        self._param_open = param_open
        self._delimiters = delimiters_of((closer, *stops, param_open, param_close))
        self._in_value = False
        self._bracket = bracket
        self._head_ends = delimiters_of(head_ends)
        self._head_end = head_ends[0]
        self._bracket_end = delimiters_of(bracket[1:]) if bracket is not None else None
        self._looking = _TAGS

    def scan(self, text: str, pos: int) -> ScanResult:
        while True:
            if self._looking != _TAGS:
                pos = self._in_head_or_bracket(text, pos)
                if self._looking != _TAGS:
                    return ScanResult(pos)
            match = self._delimiters.search(text, pos)
            if match is None:
                return ScanResult(max(self._delimiters.held_from(text), pos))
            found = match.group()
            if found == self._closer:
                return ScanResult(match.start(), match.end())
            if found not in self._stops:
                self._in_value = found == self._param_open
                if self._in_value and self._bracket is not None:
                    self._looking = _HEAD
            elif not self._in_value:
                return ScanResult(match.start(), match.start())
            pos = match.end()

    def _in_head_or_bracket(self, text: str, pos: int) -> int:
        """From a parameter's head to its value's first characters, and through a bracketed value:
        where tag searching goes on (all of `text` is read when `self._looking` is still not `_TAGS`;
        a possible start of the bracket's opener or closer is then given again)."""
        assert self._bracket is not None and self._bracket_end is not None
        if self._looking == _HEAD:
            end = self._head_ends.search(text, pos)
            if end is None:
                return max(self._head_ends.held_from(text), pos)
            if end.group() != self._head_end:  # a malformed head: the grammar rejects the call
                self._looking = _TAGS
                return end.start()
            self._looking, pos = _LEAD, end.end()
        opener = self._bracket[0]
        if self._looking == _LEAD:
            if text.startswith(opener, pos):
                self._looking, pos = _BRACKET, pos + len(opener)
            elif len(text) - pos < len(opener) and opener.startswith(text[pos:]):
                return pos  # it may still be the opener
            else:
                self._looking = _TAGS
                return pos
        found = self._bracket_end.search(text, pos)
        if found is None:
            return max(self._bracket_end.held_from(text), pos)
        self._looking = _TAGS
        return found.end()


# ----------------------------------------------------------------- the final parse


class _CallVisitor(NodeVisitor):  # type: ignore[misc]
    """The call's header match and its parameters as `(header match, raw value text, closed)`."""

    def visit_call(self, node: Node, children: list[Any]) -> tuple[Any, list[tuple[Any, str, bool]]]:
        head, params, _ = children
        return head, params

    def visit_call_head(self, node: Node, children: list[Any]) -> Any:
        return node.match

    def visit_params(self, node: Node, children: list[Any]) -> list[tuple[Any, str, bool]]:
        return list(children)

    def visit_param(self, node: Node, children: list[Any]) -> tuple[Any, str, bool]:
        _, _, head, value, _ = children
        return head, value, node.children[4].text != ""

    def visit_param_head(self, node: Node, children: list[Any]) -> Any:
        return node.match

    def visit_value(self, node: Node, children: list[Any]) -> str:
        return str(node.text)

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _CallVisitor()

# The shape every dialect's grammar has (the tags are its terminals): what `_read_call` reads.
_SHAPE = {"call": "call = call_head params ws", "params": "params = param*",
          "param": "param = ws param_open param_head value param_close?"}
Params = list[tuple[Any, str, bool]]


@cache
def _terminals(grammar: str) -> tuple[Any, Any, str, Any, Any, str] | None:
    """The grammar's terminals (call_head, ws, param_open, param_head, value, param_close) when its
    rules have `_SHAPE`, else None. A `value` that is the usual "text up to the first closing or
    opening parameter tag" is given as None: `_value_end` finds that end with two `str.find`s."""
    rules = load_grammar(grammar)
    if any(rules[name].as_rule() != rule for name, rule in _SHAPE.items()):
        return None
    patterns = [rules[name] for name in ("call_head", "ws", "param_head", "value")]
    tags = [rules[name] for name in ("param_open", "param_close")]
    if not all(isinstance(p, Regex) for p in patterns) or not all(isinstance(t, Literal) for t in tags):
        return None
    head, ws, param_head, value = (p.re for p in patterns)
    ws = _whitespace_run(ws)
    param_open, param_close = tags[0].literal, tags[1].literal
    if value.pattern == _up_to_tags(param_open, param_close) and value.flags == _DEFAULT_FLAGS:
        value = None
    return head, ws, param_open, param_head, value, param_close


def _up_to_tags(param_open: str, param_close: str) -> str | None:
    """The value regex that ends at the first `param_close` or `param_open` (tags that start with
    `<` and hold no regex syntax), as the dialects' grammars write it; None for other tags."""
    if not (param_open.startswith("<") and param_close.startswith("<")) \
            or any(char in _REGEX_SYNTAX for char in param_open + param_close):
        return None
    return f"[^<]*(?:<(?!{param_close[1:]}|{param_open[1:]})[^<]*)*"


_DEFAULT_FLAGS = regex.compile("").flags
# A run of characters of one class written out literally (`[ \t\r\n]*`, the dialects' `ws`).
_LITERAL_CLASS_RUN = regex.compile(r"\[(?:[^\\\[\]]|\\[trn])+\]\*")


def _whitespace_run(pattern: Any) -> Any:
    """`pattern` compiled by `re` when it is a run of one class of literal characters: both engines
    read that alike, and `re` matches a short run several times faster (the `regex` module's
    fixed cost per match is about a micro-second); otherwise `pattern` itself."""
    if pattern.flags == _DEFAULT_FLAGS and _LITERAL_CLASS_RUN.fullmatch(pattern.pattern) is not None:
        return re.compile(pattern.pattern)
    return pattern


_REGEX_SYNTAX = frozenset("\\.^$*+?{}[]|()#")


def _value_end(body: str, pos: int, param_open: str, param_close: str) -> int:
    """Where a value starting at `pos` ends: the first `param_close` or `param_open` (or the end)."""
    end = body.find(param_close, pos)
    if end < 0:
        end = len(body)
    opener = body.find(param_open, pos, end)
    return end if opener < 0 else opener


def _read_call(grammar: str, body: str) -> tuple[Any, Params] | None:
    """What `_VISITOR` makes of the grammar's tree, read with the grammar's own terminals and no
    tree (a PEG reads deterministically: the same matches, the same result); None where the
    grammar would not read the whole body (its error is then the grammar's own) or has another shape.
    Cost: one regex match per terminal, instead of a parse node and a visit per rule."""
    terminals = _terminals(grammar)
    if terminals is None:
        return None
    call_head, ws, param_open, param_head, value, param_close = terminals
    head = call_head.match(body)
    if head is None:
        return None
    params: Params = []
    pos = head.end()
    while True:  # param*: a param that does not match ends the repetition where it began
        at = ws.match(body, pos).end()
        if not body.startswith(param_open, at):
            break
        name = param_head.match(body, at + len(param_open))
        if name is None:
            break
        start = name.end()
        if value is None:
            at = _value_end(body, start, param_open, param_close)
        else:
            raw = value.match(body, start)
            if raw is None:
                break
            at = raw.end()
        closed = body.startswith(param_close, at)
        params.append((name, body[start:at], closed))
        pos = at + len(param_close) if closed else at
    return (head, params) if ws.match(body, pos).end() == len(body) else None


def parse_call(dialect: TaggedParams, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
    """The one call in an envelope body, typed by the tool's schema."""
    cut: list[CallResult] = [
        Rejection(TRUNCATED, [f"the output ended inside {dialect.call_tag} before the call was closed"])]
    if not envelope.complete and not dialect.end_tag_optional:
        return cut
    grammar = load_grammar(dialect.grammar)
    body = envelope.body
    read = _read_call(dialect.grammar, body)  # None also when the call's head does not match
    if read is None and dialect.json_element is not None:
        whole = _json_element_call(dialect, grammar, envelope)
        if whole is not None:
            return whole
    if read is None and grammar["call_head"].re.match(body) is None:
        if not envelope.complete:
            return cut
        shown = body.lstrip()[:40].split("\n")[0]
        return [Rejection(INVALID_JSON, [f"malformed {dialect.call_tag} header: {shown!r} is not closed by "
                                         f"{dialect.head_closer!r}"])]
    try:
        head, params = read if read is not None else _VISITOR.visit(grammar.parse(body))
    except ParseError as error:
        if not envelope.complete:
            return cut
        pos = error.pos
        return [Rejection(INVALID_JSON, [f"unexpected text at character {pos}: {body[pos:pos + 30]!r}"])]
    if not envelope.complete and not (params[-1][2] if params else _head_closed(head)):
        return cut
    name = dialect.name_of(head)
    if not name:
        return [Rejection(INVALID_JSON, [f"{dialect.call_tag} has no function name"])]
    schema = tools.schema(name)
    arguments: dict[str, Any] = {}
    written: dict[str, str | None] = {}  # each value's JSON text as the model wrote it, or None
    for param_head, raw, closed in params:
        key = dialect.name_of(param_head)
        if not key:
            return [Rejection(INVALID_JSON, ["a parameter has no name"], name=name)]
        if key in arguments and not dialect.repeated_key_last_wins:
            return [Rejection(INVALID_JSON, [f"$.{key}: the parameter is given twice"], name=name)]
        bracket = dialect.raw_bracket
        if bracket is not None and raw.startswith(bracket[0]):  # the grammar read `opener text closer ws`
            text = raw[len(bracket[0]):raw.rindex(bracket[1])]
        elif dialect.framing_newline:
            text = strip_framing(raw)
        elif dialect.newline_before_next_element and not closed:
            text = _without_last_newline(raw)
        else:
            text = raw
        arguments[key], written[key] = dialect.value_of(text, _flag(param_head), property_schema(schema, key))
    return [ParsedCall(name, arguments, _arguments_json(arguments, written))]


def _json_element_call(dialect: TaggedParams, grammar: Any, envelope: Envelope) -> list[CallResult] | None:
    """A call whose arguments are one JSON element (`json_element`): the object as written, which
    must be the call's only element; None when the body holds no such element after its head."""
    assert dialect.json_element is not None
    opener, closer = dialect.json_element
    body = envelope.body
    head = grammar["call_head"].re.match(body)
    ws = _whitespace_run(grammar["ws"].re)
    at = ws.match(body, head.end()).end() if head is not None else -1
    if head is None or not body.startswith(opener, at):
        return None
    name = dialect.name_of(head)
    json_head = grammar["json_head"].re.match(body, at + len(opener))
    end = body.find(closer, json_head.end()) if json_head is not None else -1
    if end < 0 and not envelope.complete:
        return [Rejection(TRUNCATED, [f"the output ended inside the arguments of {dialect.call_tag}"], name=name)]
    if end < 0 or ws.match(body, end + len(closer)).end() != len(body):
        return [Rejection(INVALID_JSON, ["the arguments element must be the call's only element, closed by "
                                         f"{closer}"], name=name)]
    assert json_head is not None
    text = body[json_head.end():end].strip()
    try:
        arguments = strict_loads(text)
    except ValueError as error:
        return [Rejection(INVALID_JSON, [f"the arguments are not JSON: {error}"], name=name)]
    if type(arguments) is not dict:
        return [Rejection(INVALID_JSON, ["the arguments are not one JSON object"], name=name)]
    if not name:
        return [Rejection(INVALID_JSON, [f"{dialect.call_tag} has no function name"])]
    return [ParsedCall(name, arguments, text)]


def _arguments_json(arguments: dict[str, Any], written: dict[str, str | None]) -> str:
    """`json.dumps(arguments)`, with each value the model wrote as strict JSON kept as written."""
    if not any(written.values()):  # (a written text is a JSON object or array: never empty)
        return json_text(arguments)
    return "{" + ", ".join([f"{encode_basestring(key)}: {json_text(arguments[key]) if text is None else text}"
                            for key, text in written.items()]) + "}"


def _value_json(value: Any, written: str | None) -> str:
    """A parameter's value in `arguments_json` (in `parse_call` and as the streamer sends it)."""
    return written if written is not None else json_text(value)


def _head_closed(head: Any) -> bool:
    """Whether the call's head was written to its end (a `>`, or GLM's newline after the name)."""
    closed = _groups(head.re)[2]
    return not closed or head.group(closed) is not None


def _without_last_newline(raw: str) -> str:
    if raw.endswith("\r\n"):
        return raw[:-2]
    if raw.endswith("\n"):
        return raw[:-1]
    return raw


# ----------------------------------------------------------------- the layout's pieces

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_GAP = Pattern(r"\n?")  # between elements: the templates write a newline, or nothing
_INDEX = Pattern(r"[1-9][0-9]{0,3}")
_PYTHON_SPELLINGS = {"boolean": ("True", "False"), "null": ("None",)}


_NULL = {"type": "null"}


def _without_added_null(schema: Any) -> Any:
    """An optional parameter's schema without the `null` the assembly allows for it
    (`constrain.assemble.parameters_of`: `{"anyOf": [schema, {"type": "null"}]}`, for the tools
    check reads a null as "not given"): a parameter's text is typed by the tool's own schema, which
    reads `null` as the text `"null"` where the schema has no null; the grammar leaves it out instead."""
    if isinstance(schema, Mapping) and list(schema) == ["anyOf"] and isinstance(schema["anyOf"], list) \
            and len(schema["anyOf"]) == 2 and schema["anyOf"][1] == _NULL:
        return schema["anyOf"][0]
    return schema


def _without_string(schema: Any, types: set[str]) -> Any:
    """The schema of a parameter's non-string values, written as JSON: its `type` list without
    `"string"` where it has one (a string is written raw, in the other option)."""
    declared = schema.get("type") if isinstance(schema, Mapping) else None
    if "string" in types and isinstance(declared, list):
        return {**schema, "type": [kind for kind in declared if kind != "string"]}
    return schema if schema is not None else True


# ----------------------------------------------------------------- progressive mode

_HEADER, _BETWEEN, _PARAM_HEAD, _VALUE, _DONE, _BRACKET, _AFTER_BRACKET = range(7)


class XmlCallStreamer:
    """Reads a call body as it arrives and sends what of `arguments_json` is already certain.

    It follows the grammar's rules exactly (the same compiled header and whitespace patterns, the
    value ending at the first closing or opening parameter tag). Where the body stops fitting the
    grammar it goes quiet: the call will be rejected, or the engine sends the rest at the close."""

    def __init__(self, dialect: TaggedParams, tools: ToolSet) -> None:
        grammar = load_grammar(dialect.grammar)
        self._dialect = dialect
        self._tools = tools
        self._call_head: Any = grammar["call_head"].re
        self._param_head: Any = grammar["param_head"].re
        self._ws: Any = _whitespace_run(grammar["ws"].re)
        self._ends = delimiters_of((dialect.param_close, dialect.param_open))
        self._head_ends = delimiters_of(dialect.head_ends)
        self._param_head_ends = delimiters_of(dialect.param_head_ends)
        self._hold_newline = dialect.framing_newline or dialect.newline_before_next_element
        self._state = _HEADER
        self._carry = ""  # text given again with the next piece (shorter than a tag)
        self._head: list[str] = []  # a call or parameter header, until one of its ends
        self._schema: Any = None
        self._keys: set[str] = set()
        self._streaming = False  # the current value is a string: it is sent as it arrives
        self._flag: str | None = None
        self._key = ""
        self._lead_done = False  # the leading framing newline of the current value was settled
        self._typed: list[str] = []  # the raw text of a value sent when it closes
        self._bracket_end = delimiters_of(dialect.raw_bracket[1:]) if dialect.raw_bracket is not None else None
        self._bracket_pending = False  # the value just began: it may open with the raw-value bracket

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        text = self._carry + body
        self._carry = ""
        pos = 0
        while pos < len(text) and self._state != _DONE:
            if self._state == _VALUE:
                pos = self._value(text, pos, events)
            elif self._state == _BRACKET:
                pos = self._bracketed(text, pos, events)
            elif self._state == _AFTER_BRACKET:
                pos = self._after_bracket(text, pos, events)
            elif self._state == _BETWEEN:
                pos = self._between(text, pos)
            else:
                pos = self._header(text, pos, events)
        return events

    def _header(self, text: str, pos: int, events: list[StreamEvent]) -> int:
        in_call = self._state == _HEADER
        ends = self._head_ends if in_call else self._param_head_ends
        match = ends.search(text, pos)
        if match is None:
            held = max(ends.held_from(text), pos)
            self._head.append(text[pos:held])
            self._carry = text[held:]
            return len(text)
        self._head.append(text[pos: match.end()])
        header, self._head = "".join(self._head), []
        found = (self._call_head if in_call else self._param_head).match(header)
        back = len(header) - found.end() if found is not None else 0
        if found is None or back > match.end() - pos:  # the grammar rejects this call
            self._state = _DONE
            return len(text)
        if in_call:
            self._call_started(found, events)
        else:
            self._param_started(found, events)
        return match.end() - back  # what follows the header is read again

    def _call_started(self, match: Any, events: list[StreamEvent]) -> None:
        name = self._dialect.name_of(match) if match is not None else ""
        if not name:
            self._state = _DONE
            return
        self._schema = self._tools.schema(name)
        events.append(CallStart(0, name))
        if self._dialect.repeated_key_last_wins:  # a later repeat may change any member: sent at the close
            self._state = _DONE
            return
        events.append(ArgumentsFragment(0, "{"))
        self._state = _BETWEEN

    def _param_started(self, match: Any, events: list[StreamEvent]) -> None:
        key = self._dialect.name_of(match) if match is not None else ""
        if not key or (key in self._keys and not self._dialect.repeated_key_last_wins):
            self._state = _DONE
            return
        flag = _flag(match)
        schema = property_schema(self._schema, key)
        self._streaming = self._dialect.is_string(flag, schema)
        separator = ", " if self._keys else ""
        self._keys.add(key)
        self._key, self._flag = key, flag
        self._lead_done = not self._dialect.framing_newline
        self._typed = []
        self._bracket_pending = self._bracket_end is not None
        opening = '"' if self._streaming else ""
        events.append(ArgumentsFragment(0, separator + encode_basestring(key) + ": " + opening))
        self._state = _VALUE

    def _between(self, text: str, pos: int) -> int:
        pos = self._ws.match(text, pos).end()
        if pos == len(text):
            return pos
        opener = self._dialect.param_open
        if text.startswith(opener, pos):
            self._state = _PARAM_HEAD
            return pos + len(opener)
        if len(text) - pos < len(opener) and opener.startswith(text[pos:]):
            self._carry = text[pos:]
            return len(text)
        self._state = _DONE  # text that is not a parameter: the grammar rejects this call
        return len(text)

    def _value(self, text: str, pos: int, events: list[StreamEvent]) -> int:
        if self._bracket_pending:  # `TaggedParams.raw_bracket`: right after the head, or not at all
            opener = self._dialect.raw_bracket[0]  # type: ignore[index]
            if text.startswith(opener, pos):
                self._bracket_pending, self._state = False, _BRACKET
                return pos + len(opener)
            if len(text) - pos < len(opener) and opener.startswith(text[pos:]):
                self._carry = text[pos:]
                return len(text)
            self._bracket_pending = False
        match = self._ends.search(text, pos)
        if not self._lead_done:
            if match is None and (pos == len(text) or (pos == len(text) - 1 and text[pos] == "\r")):
                self._carry = text[pos:]  # the leading newline is not settled yet
                return len(text)
            if text.startswith("\r\n", pos):
                pos += 2
            elif text.startswith("\n", pos):
                pos += 1
            self._lead_done = True
        if match is None:
            end = max(self._ends.held_from(text), pos)
            if self._hold_newline:
                end = self._before_trailing_newline(text, pos, end)
            self._carry = text[end:]
            self._value_text(text[pos:end], events)
            return len(text)
        end = match.start()
        closed = match.group() == self._dialect.param_close
        if self._dialect.framing_newline or (self._dialect.newline_before_next_element and not closed):
            if text.endswith("\r\n", pos, end):
                end -= 2
            elif text.endswith("\n", pos, end):
                end -= 1
        self._value_text(text[pos:end], events)
        self._value_closed(events)
        self._state = _BETWEEN if closed else _PARAM_HEAD
        return match.end()

    def _bracketed(self, text: str, pos: int, events: list[StreamEvent]) -> int:
        """Inside the raw-value bracket: all of it is value text, up to the bracket's closer."""
        assert self._bracket_end is not None
        found = self._bracket_end.search(text, pos)
        if found is None:
            end = max(self._bracket_end.held_from(text), pos)
            self._value_text(text[pos:end], events)
            self._carry = text[end:]
            return len(text)
        self._value_text(text[pos:found.start()], events)
        self._state = _AFTER_BRACKET
        return found.end()

    def _after_bracket(self, text: str, pos: int, events: list[StreamEvent]) -> int:
        """After the bracket's closer: whitespace, then the parameter's closing tag (else the call
        is rejected: quiet)."""
        pos = self._ws.match(text, pos).end()
        close = self._dialect.param_close
        if text.startswith(close, pos):
            self._value_closed(events)
            self._state = _BETWEEN
            return pos + len(close)
        if len(text) - pos < len(close) and close.startswith(text[pos:]):
            self._carry = text[pos:]
        else:
            self._state = _DONE
        return len(text)

    @staticmethod
    def _before_trailing_newline(text: str, pos: int, end: int) -> int:
        """Where a newline that may still turn out to be framing starts (text[end:] is a tag prefix)."""
        if end == len(text) and text.endswith("\r", pos, end):
            return end - 1  # "\r" may become "\r\n"
        if text.endswith("\n", pos, end):
            end -= 1
            if text.endswith("\r", pos, end):
                end -= 1
        return end

    def _value_text(self, text: str, events: list[StreamEvent]) -> None:
        if not text:
            return
        if self._streaming:
            events.append(ArgumentsFragment(0, _escaped(text)))
        else:
            self._typed.append(text)

    def _value_closed(self, events: list[StreamEvent]) -> None:
        if self._streaming:
            events.append(ArgumentsFragment(0, '"'))
            return
        raw = "".join(self._typed)
        self._typed = []
        value, written = self._dialect.value_of(raw, self._flag, property_schema(self._schema, self._key))
        events.append(ArgumentsFragment(0, _value_json(value, written)))
