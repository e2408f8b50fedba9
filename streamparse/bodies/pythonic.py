"""Body kind `pythonic`: calls written as Python, `[get_weather(city="Paris"), Calendar.add(day=1)]`
(Llama 3.2 / 4 pythonic prompts, Granite, inside LFM2), or one call `NAME.call(k=…)` (Llama 3.1
built-ins, `listed=False, name_suffix=".call"`).

Rules, for every format of this kind:
- names may be dotted; only keyword arguments; values are literals (`python_literals.literal`:
  Python or JSON spellings, escapes decoded). A positional argument, a keyword written twice,
  `*`/`**` unpacking or a value that is not a literal makes that call `invalid_json`; arguments
  are never mapped positionally onto a schema. `arguments_json` is `json.dumps(arguments)` (each
  value written once: jiter's reading writes the values it reads, `python_literals.literal_json`).
- a list cut off by the end of the output keeps its complete calls; the rest is `truncated`
  (the Nemo-list rule); a missing `]` alone is tolerated. `[]` holds no call. Text after the `]`
  (in an envelope that runs to a closer) is one rejection after the list's calls.
- `lines` (OLMo 3): no brackets, one call per line, in an envelope that runs to a closer (`closers`);
  a line that is not one keyword-literal call is rejected `invalid_json` on its own (its text is the
  rejection's), and the other lines' calls stand; the last line cut off by the end is `truncated`.
- `raw_single_quotes` (LFM2.5): strings in single quotes are read raw, as its template writes them
  (`python_literals`): they end at the next `'`, backslashes and newlines kept.

Cost: the scanner looks at each character once (inside the outermost brackets one match takes
whole strings and brackets that close, `python_literals.balanced`; elsewhere one regex jump per
quote, backslash or bracket); the grammar (`formats/<grammar>.peg`, rule `call`) reads each call
once; a value written as JSON is read once where its end is guessed (`python_literals.read_argument`),
any other's text is found by one match (`python_literals.value_end`) and read once
(`python_literals.literal`: jiter or one pass for the common spellings, `ast.parse` for the rest);
the progressive streamer walks the body once more and reads each call's text once, when its `)`
closes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node

from .. import grammar_ir
from ..grammar import ValueNode, load_grammar
from ..python_literals import RAW_SINGLE_QUOTED, STRINGS, balanced, literal_json
from ..scanning import Decoded, ScanResult, TagScanner, WalkSource, decoded_at
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent
from ..strict_json import encodable, json_text
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet
from .python_layout import COMMA, PYTHONIC, PYTHONIC_RAW, python_literal

_SPACE = re.compile(r"[ \t\r\n]*")
_OUTSIDE = re.compile(r"""["'()\[\]{}]""")
_IN_STRING = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_IN_RAW_STRING = {'"': _IN_STRING['"'], "'": re.compile("'")}
# A string that closes within the text, as the walker reads it (plain quotes; a backslash escapes).
_WHOLE_STRING = {quote: STRINGS[quote][0] for quote in "\"'"}
_WHOLE_RAW_STRING = {'"': _WHOLE_STRING['"'], "'": RAW_SINGLE_QUOTED}
# What `_Walker.skip` takes in one match: strings as the walker reads them, brackets that close.
_BALANCED = {raw: balanced("|".join(pattern.pattern for pattern in strings.values()))
             for raw, strings in ((False, _WHOLE_STRING), (True, _WHOLE_RAW_STRING))}
_SKIP_FROM = 64  # characters left in a piece for `skip` to be worth its match


class _Walker:
    """Brackets and strings of Python text fed in pieces: the depth at each structural character."""

    def __init__(self, raw_single_quotes: bool = False) -> None:
        self._in_string = _IN_RAW_STRING if raw_single_quotes else _IN_STRING
        self._whole = _WHOLE_RAW_STRING if raw_single_quotes else _WHOLE_STRING
        self._balanced = _BALANCED[raw_single_quotes]
        self.depth = 0
        self.quote = ""  # inside a string opened by this quote
        self.escaped = False  # a piece ended with a backslash inside a string
        self.opened = False  # a bracket was opened

    def walk(self, text: str, pos: int) -> re.Match[str] | None:
        """The next bracket outside strings in `text[pos:]` (depth updated), or None at the end.
        (Triple-quoted strings are read as runs of plain ones: the same extent unless they hold
        an odd number of their own quote character.)"""
        if self.escaped and pos < len(text):
            self.escaped = False
            pos += 1
        while True:
            if self.quote:
                match = self._in_string[self.quote].search(text, pos)
                if match is None:
                    return None
                if match.group() == "\\":
                    if match.end() == len(text):
                        self.escaped = True
                        return None
                    pos = match.end() + 1
                    continue
                self.quote = ""
                pos = match.end()
                continue
            match = _OUTSIDE.search(text, pos)
            if match is None:
                return None
            char = match.group()
            if char in "\"'":
                whole = self._whole[char].match(text, match.start())
                if whole is not None:  # the string closes in this piece: skipped in one match
                    pos = whole.end()
                    continue
                self.quote = char
                pos = match.end()
                continue
            if char in "([{":
                self.depth += 1
                self.opened = True
            else:
                self.depth = max(0, self.depth - 1)
            return match

    def skip(self, text: str, pos: int) -> int:
        """Where `walk` would next change the depth in `text[pos:]`, directly inside the outermost
        brackets (depth 1, outside strings; elsewhere `pos`): past whole strings and brackets that
        close, in one match (`python_literals.balanced`)."""
        if self.depth != 1 or self.quote:
            return pos
        return self._balanced.match(text, pos).end()  # type: ignore[union-attr]


@dataclass(frozen=True)
class ListRead:
    """The calls of a list its scanner read whole (`BracketScanner`), as `Decoded` hands them over."""

    calls: tuple[CallResult, ...]


class BracketScanner:
    """Ends where the first bracketed group closes (`[…]` of a list, `(…)` of one call), outside
    Python strings; what follows is the enclosing region's.

    With `read_list` (a listed kind's), a list that arrives whole in a long first piece is read
    there by the kind's grammar, which ends at the same `]` where no value holds a triple quote
    (its strings are then the walker's, and every bracket of a call it reads is in a value that
    closes, or the call's own): `decoded` keeps the calls for the kind's `parse`, and the text is
    not walked as well. A list that does not read so to its `]` is walked from where it starts."""

    def __init__(self, raw_single_quotes: bool = False,
                 read_list: Callable[[str, int], tuple[list[CallResult], int] | None] | None = None) -> None:
        self._walker = _Walker(raw_single_quotes)
        self._read_list = read_list
        self.decoded: Decoded | None = None

    def scan(self, text: str, pos: int) -> ScanResult:
        walker = self._walker
        long = len(text) - pos > _SKIP_FROM
        if self._read_list is not None:  # the first piece only: the walker goes on from there
            read, self._read_list = self._read_list, None
            if long:
                found = read(text, pos)
                if found is not None:
                    results, end = found
                    self.decoded = Decoded(text, pos, end, {0: (ListRead(tuple(results)), end - pos)})
                    return ScanResult(end, end)
        while True:
            if long:  # each time the depth is back to 1: a bounded look ahead
                pos = walker.skip(text, pos)
            match = walker.walk(text, pos)
            if match is None:
                return ScanResult(len(text))
            pos = match.end()
            if walker.opened and walker.depth == 0:
                return ScanResult(pos, pos)


def _name(text: str, suffix: str) -> str | None:
    name = re.sub(r"\s+", "", text)
    if suffix:
        if not name.endswith(suffix):
            return None
        name = name[: -len(suffix)]
    return name or None


@dataclass(frozen=True)
class PythonicCalls:
    """The `pythonic` body kind. `grammar` names `formats/<grammar>.peg` (its `call` rule);
    `listed`: the calls are in a `[…]` list (else the body is one call); `name_suffix` is taken off
    each call's name and required (`.call` for Llama 3.1 built-ins); `tag` names the envelope in
    error messages; `raw_single_quotes`: strings in single quotes are raw (LFM2.5); `lines`: one call
    per line, no brackets, the envelope ending at one of `closers` (OLMo 3)."""

    grammar: str = "pythonic"
    tag: str = "the call list"
    listed: bool = True
    name_suffix: str = ""
    raw_single_quotes: bool = False
    lines: bool = False
    closers: tuple[str, ...] = ()

    def scanner(self) -> BracketScanner | TagScanner:
        if self.lines:
            return TagScanner(self.closers)
        return BracketScanner(self.raw_single_quotes, self.read_list if self.listed else None)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> PythonicStreamer:
        return PythonicStreamer(self)

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        body = envelope.body
        read = (decoded_at(envelope.decoded, body, 0) or {}).get(0)  # the list its scanner read (`read_list`)
        if read is not None and isinstance(read[0], ListRead) and read[1] == len(body):
            return list(read[0].calls)
        pos = _SPACE.match(body).end()  # type: ignore[union-attr]
        if pos == len(body):
            status = INVALID_JSON if envelope.complete else TRUNCATED
            return [Rejection(status, [f"{self.tag} is empty"])]
        if self.lines:
            return self._lines(envelope, pos)
        if self.listed:
            if not body.startswith("[", pos):
                return [Rejection(INVALID_JSON, [f"{self.tag} does not start with '['"])]
            pos = _SPACE.match(body, pos + 1).end()  # type: ignore[union-attr]
        results, closed = self._calls(body, pos, envelope.complete)
        return results if closed is None else self._after_list(body, closed, envelope.complete, results)

    def read_list(self, text: str, pos: int) -> tuple[list[CallResult], int] | None:
        """The calls of the list at `text[pos]` (after spaces) as `parse` reads them in a body that
        ends at the list's `]`, and where that `]` ends; None where the calls do not read up to a
        `]` so, or a value holds a triple quote. For `BracketScanner`, which then ends there too."""
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith("[", pos):
            return None
        results, closed = self._calls(text, _SPACE.match(text, pos + 1).end(), True, True)  # type: ignore[union-attr]
        return None if closed is None else (results, closed)

    def _calls(self, body: str, pos: int, complete: bool,
               plain_quotes: bool = False) -> tuple[list[CallResult], int | None]:
        """The calls from `body[pos]` on (after the `[` of a list), and where the `]` that closes the
        list ends (None where none does, or, with `plain_quotes`, a value holds a triple quote).
        Only a value's text can hold a quote, and one read as JSON holds no triple quote outside a
        string (`python_literals.read_argument`): only the others are looked through."""
        if self.listed and body.startswith("]", pos):
            return [], pos + 1
        rule = load_grammar(self.grammar, self.raw_single_quotes)["call"]
        results: list[CallResult] = []
        while True:
            try:
                node = rule.match(body, pos)
            except ParseError:
                if not complete:
                    results.append(Rejection(TRUNCATED, [f"the output ended inside {self.tag}"]))
                else:
                    results.append(Rejection(INVALID_JSON, [
                        f"not a call at character {pos}: {body[pos:pos + 30]!r}"]))
                return results, None
            if plain_quotes and _holds_triple_quote(node):
                return results, None
            results.append(self.read_call(node))
            pos = _SPACE.match(body, node.end).end()  # type: ignore[union-attr]
            if not self.listed or pos == len(body):
                return results, None
            if body.startswith(",", pos):
                pos = _SPACE.match(body, pos + 1).end()  # type: ignore[union-attr]
                if body.startswith("]", pos):
                    return results, pos + 1
                if pos == len(body) and not complete:
                    return results, None
                continue
            if body.startswith("]", pos):
                return results, pos + 1
            results.append(Rejection(INVALID_JSON, [f"unexpected text after a call at character {pos}: "
                                                    f"{body[pos:pos + 30]!r}"]))
            return results, None

    def _lines(self, envelope: Envelope, pos: int) -> list[CallResult]:
        """One call per non-empty line (`lines`): a line that is not one call is a rejection of its own.
        An accepted call carries the whole envelope as its raw text; where none is, the first and the
        last rejected line carry the envelope's opener and closer, so no character is lost."""
        body, complete = envelope.body, envelope.complete
        rule = load_grammar(self.grammar, self.raw_single_quotes)["call"]
        results: list[CallResult] = []
        start, raw_end = pos, pos  # where the first line starts, and the last line's raw text ends
        while pos < len(body):
            try:
                node = rule.match(body, pos)
                end = node.end
            except ParseError:
                node, end = None, pos
            line_end = body.find("\n", end)
            line_end = len(body) if line_end < 0 else line_end
            raw_end = line_end  # where the line's raw text ends
            if node is not None and not body[end:line_end].strip():
                result = self.read_call(node)
                raw_end = end
                results.append(replace(result, raw=body[pos:end]) if isinstance(result, Rejection) else result)
            elif line_end == len(body) and not complete:
                results.append(Rejection(TRUNCATED, [f"the output ended inside {self.tag}"], body[pos:line_end]))
            else:
                line = body[pos:line_end]
                results.append(Rejection(INVALID_JSON, [f"not one call on the line: {line.strip()[:30]!r}"], line))
            pos = _SPACE.match(body, line_end).end()  # type: ignore[union-attr]
        rejected = [result for result in results if isinstance(result, Rejection)]
        if len(rejected) == len(results):
            rejected[0] = replace(rejected[0], raw=envelope.opener + body[:start] + (rejected[0].raw or ""))
            rejected[-1] = replace(rejected[-1], raw=(rejected[-1].raw or "") + body[raw_end:] + envelope.closer)
            return list(rejected)
        return results

    def _after_list(self, body: str, pos: int, complete: bool, results: list[CallResult]) -> list[CallResult]:
        """The calls of a closed list, and a rejection for any text after its `]` (in an envelope that
        runs on to a closer): `truncated` when the output ended inside the envelope."""
        rest = body[pos:].strip()
        if rest:
            status = INVALID_JSON if complete else TRUNCATED
            results.append(Rejection(status, [f"text after the ']' of {self.tag}: {rest[:30]!r}"]))
        return results

    def read_call(self, node: Node) -> CallResult:
        """One call from its `call` node: name and keyword literals, or why it is not a call."""
        name = _name(node.children[0].text, self.name_suffix)
        if name is None:
            return Rejection(INVALID_JSON, [f"{node.children[0].text.strip()!r} is not NAME{self.name_suffix}(…)"])
        arguments: dict[str, Any] = {}
        written: list[str] = []  # each argument as `json_text` writes it in `arguments_json`
        optional = node.children[4]
        for argument in _arguments(optional.children[0]) if optional.children else []:
            if argument.expr_name == "py_value":
                return Rejection(INVALID_JSON, [f"{name}: a positional argument ({argument.text.strip()[:40]!r}); "
                                                "only keyword arguments are read"], name=name)
            keyword = argument.children[0].text
            if keyword in arguments:
                return Rejection(INVALID_JSON, [f"{name}: the argument {keyword!r} is written twice"], name=name)
            value_node = argument.children[4]
            if isinstance(value_node, ValueNode) and value_node.value is not None:  # read where the grammar found it
                value, value_json = value_node.value
            else:
                try:
                    value, value_json = literal_json(value_node.text, self.raw_single_quotes)
                except (ValueError, RecursionError) as error:
                    return Rejection(INVALID_JSON, [f"{name}.{keyword}: {error}"], name=name)
            arguments[keyword] = value
            written.append(f"{json_text(keyword)}: {json_text(value) if value_json is None else value_json}")
        arguments_json = "{" + ", ".join(written) + "}"  # `json_text(arguments)`, each value written once
        if not encodable(name) or not encodable(arguments_json):
            return Rejection(INVALID_JSON, [f"{name}: a lone surrogate (not a Unicode character)"])
        return ParsedCall(name, arguments, arguments_json)



    # ----------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> grammar_ir.Node:
        """`NAME(key=value, ...)`: the schema's properties in order as keyword arguments (an optional
        one may be left out), each value a Python literal of its schema (`python_literal`)."""
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        required = set(parameters.get("required", ())) if isinstance(parameters, Mapping) else set()
        arguments: grammar_ir.Node = grammar_ir.EMPTY
        if isinstance(properties, Mapping) and properties:
            spelling = PYTHONIC_RAW if self.raw_single_quotes else PYTHONIC
            members = [(grammar_ir.seq(grammar_ir.Lit(f"{key}="), python_literal(sub, parameters, spelling)),
                        key in required) for key, sub in properties.items() if key.isidentifier()]
            arguments = grammar_ir.ordered_members(members, COMMA)
        return grammar_ir.seq(grammar_ir.Lit(f"{name}{self.name_suffix}("), arguments, grammar_ir.Lit(")"))

    def body_grammar(self, calls: grammar_ir.Node, many: bool) -> grammar_ir.Node:
        """A `[...]` list of one call (or, `many`, one or more); one call for a bare kind; one call a
        line for `lines`; then the first closer, when the envelope has one."""
        body = calls
        if self.listed and not self.lines:
            body = grammar_ir.seq(grammar_ir.Lit("["), grammar_ir.Repeat(calls, 1, None if many else 1, COMMA),
                                  grammar_ir.Lit("]"))
        elif self.lines:
            body = grammar_ir.Repeat(calls, 1, None if many else 1, grammar_ir.Lit("\n"))
        return grammar_ir.seq(body, grammar_ir.Lit(self.closers[0])) if self.closers else body

    def calls_per_envelope(self) -> int | None:
        return None if self.listed or self.lines else 1

def _holds_triple_quote(call: Node) -> bool:
    """Whether a value of a `call` node that JSON does not read holds a triple quote (one it reads, a
    `ValueNode`, holds none outside its strings)."""
    optional = call.children[4]
    for argument in _arguments(optional.children[0]) if optional.children else []:
        value = argument.children[4] if argument.expr_name == "keyword_argument" else argument
        if not isinstance(value, ValueNode) and ('"""' in value.text or "'''" in value.text):
            return True
    return False


def _arguments(node: Node) -> list[Node]:
    """The `argument` nodes' choices (keyword_argument or py_value) of an `arguments` node."""
    first, more, _, _ = node.children
    return [first.children[0], *(item.children[3].children[0] for item in more.children)]


class PythonicStreamer:
    """Progressive mode: a call's name is sent when its `NAME(` is complete, its arguments when its
    `)` closes and it reads as a call (exactness first: a literal is not sent half-read)."""

    def __init__(self, kind: PythonicCalls) -> None:
        self._kind = kind
        self._level = 1 if kind.listed and not kind.lines else 0  # bracket depth at which calls are written
        self._walker = _Walker(kind.raw_single_quotes)
        self._between: list[str] = []  # text since the last call (or the start), before a `NAME(`
        self._call: list[str] = []  # text of the call being written, from its name on
        self._in_call = False
        self._k = 0
        self._started = False  # the call being written was sent (`CallStart`)
        self._line_used = False  # `lines`: the current line already holds text (its result is call `_k`)

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        walker, level = self._walker, self._level
        pos = 0
        while True:
            before = walker.depth
            match = walker.walk(body, pos)
            if match is None:
                (self._call if self._in_call else self._between).append(body[pos:])
                return events
            end = match.end()
            if not self._in_call and before == level and match.group() == "(":
                head = "".join(self._between) + body[pos: match.start()]
                self._between = []
                cut = max(head.rfind(","), head.rfind("[")) + 1 if level else 0
                fresh = True  # the call starts a result of its own
                if self._kind.lines:
                    cut, fresh = self._line_of(head)
                self._in_call = True
                self._started = False
                self._call = [head[cut:], "("]
                name = _name(head[cut:], self._kind.name_suffix)
                if fresh and name is not None and re.fullmatch(
                        r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", name):
                    events.append(CallStart(self._k, name))
                    self._started = True
            elif self._in_call:
                self._call.append(body[pos:end])
                if walker.depth == level:
                    self._close(events)
            else:
                self._between.append(body[pos:end])
            pos = end

    def _line_of(self, head: str) -> tuple[int, bool]:
        """`lines`: the text before a call's `(` since the last call: each finished non-empty line was
        one result. Where the call's own line starts in `head`, and whether the call begins that line."""
        *finished, current = head.split("\n")
        for line in finished:
            if self._line_used or line.strip():
                self._k += 1
            self._line_used = False
        fresh = not self._line_used
        self._line_used = True
        return len(head) - len(current), fresh

    def _close(self, events: list[StreamEvent]) -> None:
        """A call's `)` closed: its arguments are sent when it reads as a call (`lines`: when it was
        started, the call alone making its line). Its result was call `_k`."""
        text = "".join(self._call).strip()
        self._in_call = False
        self._call = []
        if not self._kind.lines or self._started:
            try:
                node = load_grammar(self._kind.grammar, self._kind.raw_single_quotes)["call"].match(text)
                result = self._kind.read_call(node) if node.end == len(text) else None
            except (ParseError, RecursionError):
                result = None
            if isinstance(result, ParsedCall):
                events.append(ArgumentsFragment(self._k, result.arguments_json))
        if not self._kind.lines:
            self._k += 1


@dataclass(frozen=True)
class CodeCall:
    """Body kind `code_call`: the whole body, trimmed, is one string argument of a fixed tool, running
    to the end of the output (Llama 3.1's `<|python_tag|>` code: tool `python`, argument `code`)."""

    name: str
    argument: str

    def scanner(self) -> _ToEnd:
        return _ToEnd()

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> None:
        return None

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        code = envelope.body.strip()
        if not code:
            return [Rejection(INVALID_JSON, ["no code after the tag"], name=self.name)]
        arguments = {self.argument: code}
        arguments_json = json_text(arguments)
        if not encodable(arguments_json):
            return [Rejection(INVALID_JSON, ["a lone surrogate (not a Unicode character)"], name=self.name)]
        return [ParsedCall(self.name, arguments, arguments_json)]


class _ToEnd:
    """The envelope runs to the end of the output."""

    def scan(self, text: str, pos: int) -> ScanResult:
        return ScanResult(len(text))
