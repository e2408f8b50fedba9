"""Body kind `json_call`: JSON call objects `{"name": …, "arguments": {…}}`, one per envelope
(Hermes) or a JSON list of them (Granite 3, Nemotron v2, Command R7B, Apertus), ending at a closer
written outside JSON strings, or where the JSON value ends.

Read once while it streams: the scanner (`JsonAwareScanner`) finds the end, a closer outside JSON
strings or where the value's brackets balance, jumping between quotes, backslashes and brackets and
skipping complete values with the C decoder (Mistral's lists, read by the `first_character` kind,
end where `json_reader`'s checked JSON value ends); in progressive mode `JsonObjectCallStreamer`
reads the names, ids and arguments text from the marks of that walk instead of walking the body
again; the grammar (`formats/<grammar>.peg` around the shared `json_call_object` fragment, and
`json_call_list` for lists) reads the finished body, with a C-decoder fast path for plain objects
(`object_members`; when the scanner skimmed the body's value whole, what its `value_reader` read
there, each call object's members, is used instead: the body is not decoded twice).

Call-object rules, for every format of this kind:
- `parameters` is accepted for `arguments`; no arguments key means `{}`; a JSON string holding an
  object is accepted. A member written twice, or both `arguments` and `parameters`, rejects the
  call `invalid_json`: which one the model meant is unclear, and a stream that already sent one
  could not take it back.
- Which members hold what is declared: `name_keys` (Command R7B: `tool_name`), `argument_keys`,
  and `id_keys`. A call id is read only from the declared keys: Hermes declares none (its wire
  format has no ids), so an `"id"` member there is an ordinary extra member, ignored, and the
  progressive stream and `parse()` give the same generated id. With `numeric_ids`, a number under
  an id key is the id, as its JSON text (`7` → `"7"`); any other non-string id is no id.
- `named_by_key`: a call object is `{"NAME": {arguments}}` (Apertus): exactly one member, whose key
  names the tool; anything else is `invalid_json` for that element.
- `one_key`: the body is one JSON object whose only member's key says what its value is (llama.cpp's
  generic envelope, `OneKeyEnvelope`): a list of calls (`[]`: no call), one call object, or the
  answer, which is content (`answer`: a string decoded, any other value as its JSON text). An
  object with other keys, or with two of them, is no envelope: `parse` returns no result (an
  anchored envelope is then content, verbatim). Cut off inside the calls, the unfinished one is
  `truncated`; inside the answer's string, the answer is the text decoded so far.
- `call_list`: the body is a JSON list of call objects (a bare call object is a list of one),
  read element by element, each element a call or a rejection on its own. The calls before a
  broken or cut-off element are kept and the rest of the list is one rejection (`truncated` when
  the output ended inside the envelope); a missing `]` after complete elements is tolerated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, NamedTuple

from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node, NodeVisitor

from .. import grammar_ir
from ..calls import (
    ARGUMENT_KEYS,
    arguments_of,
    call_from_members,
    first_under,
    json_problem,
    members_of,
    object_members,
)
from ..grammar import ValueNode, load_grammar, rule_regex
from ..grammar_ir import SPACE, Json, Lit, Repeat, alt, any_of, exact_object, seq
from ..json_reader import broken_before_end
from ..scanning import (
    MEMBERS,
    Decoded,
    JsonAwareScanner,
    Marks,
    ValueReader,
    WalkSource,
    decoded_at,
    json_scanner_parts,
    marks_of,
)
from ..spec import ArgumentsFragment, CallResult, CallStart, Envelope, ParsedCall, Rejection, StreamEvent, empty_body
from ..strict_json import (
    DECODER,
    LENIENT_DECODER,
    decode_exact,
    overflows,
    space_back,
    strict_loads,
    strict_value,
    value_end,
)
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet

_JSON_SPACE = " \t\n\r"
Member = tuple[str, Any, str]  # key, value, raw value text


class CallObjectVisitor(NodeVisitor):  # type: ignore[misc]
    """The rules of `formats/json_call_object.peg`: a call object as its members `(key, value, raw)`.

    Grammars that include the fragment subclass this for their own rules."""

    def visit_member(self, node: Node, children: list[Any]) -> Member:
        key, _, _, _, value = node.children
        assert isinstance(key, ValueNode) and isinstance(value, ValueNode)
        return key.value, value.value, value.text

    def visit_members(self, node: Node, children: list[Any]) -> list[Member]:
        first, more = children
        return [first, *more]

    def visit_more_members(self, node: Node, children: list[Any]) -> list[Member]:
        return [member for (_, _, _, member) in children]

    def visit_call_object(self, node: Node, children: list[Any]) -> list[Member]:
        members = children[2]
        return members[0] if isinstance(members, list) and members else []

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


class _BodyVisitor(CallObjectVisitor):
    """`body = json_ws call trailing`, where `call` may be Qwen 2.5's doubled-brace object."""

    def visit_call(self, node: Node, children: list[Any]) -> Any:
        return children[0]

    def visit_doubled_call(self, node: Node, children: list[Any]) -> Any:
        return children[2]

    def visit_body(self, node: Node, children: list[Any]) -> Any:
        return children[1]


class _ListVisitor(CallObjectVisitor):
    """`list_item = json_ws element json_ws` of `formats/json_call_list.peg`: an element is a call
    object's members, or a `ValueNode` when it is some other JSON value."""

    def visit_list_item(self, node: Node, children: list[Any]) -> Any:
        return children[1]

    def visit_element(self, node: Node, children: list[Any]) -> Any:
        return children[0]


_VISITOR = _BodyVisitor()
_LIST_VISITOR = _ListVisitor()
_JSON_TYPES = {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def written_id(written: tuple[Any, str] | None, numeric_ids: bool) -> str | None:
    """The id a model wrote, from the decoded value and raw text of its id member: a non-blank
    string, or with `numeric_ids` a number as its JSON text; anything else is no id."""
    if written is None:
        return None
    value, raw = written
    if isinstance(value, str):
        return value if value.strip() else None
    if numeric_ids and isinstance(value, (int, float)) and not isinstance(value, bool):
        return raw
    return None


def call_of(members: list[Member], id_keys: tuple[str, ...], name_keys: tuple[str, ...] = ("name",),
            argument_keys: tuple[str, ...] = ARGUMENT_KEYS, numeric_ids: bool = False) -> CallResult:
    """A call from the members of its object, by the rules above. A rejected call that has a name
    keeps the model's id too, so that ids stay unique the same way in both emit modes."""
    written = next(((v, raw) for k, v, raw in members if k in id_keys), None) if id_keys else None
    call_id = written_id(written, numeric_ids)
    result = call_from_members(members, name_keys, argument_keys, call_id)
    if call_id is not None and isinstance(result, Rejection) and result.id != call_id:
        name = first_under(members, name_keys)
        if isinstance(name, str) and name.strip():
            return replace(result, id=call_id)
    return result


def call_named_by_key(members: list[Member]) -> CallResult:
    """A call object `{"NAME": {arguments}}`: exactly one member, whose key is the tool name."""
    if len(members) != 1:
        return Rejection(INVALID_JSON, [f"$: a call object must have exactly one member, the tool name with the "
                                        f"arguments object as its value; this one has {len(members)}"])
    name, value, raw = members[0]
    if not name.strip():
        return Rejection(INVALID_JSON, ["$: the tool name (the call object's key) is empty"])
    arguments = arguments_of(value, raw)
    if isinstance(arguments, str):
        return Rejection(INVALID_JSON, [f"$.{name}: {arguments}"], name=name.strip())
    return ParsedCall(name, arguments[0], arguments[1])


def _at(path: str, result: CallResult) -> CallResult:
    """A rejection's JSON paths, which start at its call object, made relative to the list."""
    if path == "$" or not isinstance(result, Rejection):
        return result
    return replace(result, errors=[path + error[1:] if error.startswith("$") else error for error in result.errors])


def _json_error(body: str, start: int) -> str:
    """Why the JSON value at `body[start:]` does not decode, at a position relative to its start."""
    try:
        DECODER.raw_decode(body, start)
    except json.JSONDecodeError as error:
        return f"not valid JSON: {error.msg} (character {error.pos - start} of it)"
    except RecursionError:
        return "not valid JSON: nested too deeply"
    except ValueError as error:
        return f"not valid JSON: {error}"
    return "not valid JSON"


class OneKeyEnvelope(NamedTuple):
    """The keys of a JSON object that holds one member saying what the output is (`JsonCall.one_key`)."""

    calls: str  # a list of call objects (llama.cpp: "tool_calls")
    call: str  # one call object ("tool_call")
    answer: str  # the answer: content ("response")

    @property
    def head(self) -> re.Pattern[str]:
        """`{`, one of the keys and `:`, JSON whitespace around them: where the value starts."""
        return _one_key_head(self)


@lru_cache(maxsize=8)
def _one_key_head(keys: OneKeyEnvelope) -> re.Pattern[str]:
    names = "|".join(re.escape(json.dumps(key)) for key in keys)
    return re.compile(rf"\{{[ \t\n\r]*({names})[ \t\n\r]*:[ \t\n\r]*")


@dataclass(frozen=True)
class JsonCall:
    """The `json_call` body kind: one call object, or a list of them, ended by a closer outside
    JSON strings (or where the JSON value ends).

    `grammar` names `formats/<grammar>.peg`, whose `body` rule reads one object (and any tolerated
    framing, such as Qwen 2.5's doubled braces), or, with `call_list`, whose `list_open` and
    `list_item` rules read a list one element at a time; `tag` names the envelope in error messages."""

    grammar: str
    closers: tuple[str, ...]
    tag: str
    stops: tuple[str, ...] = ()
    id_keys: tuple[str, ...] = ()
    end_at_value: bool = False  # the envelope ends where its JSON value ends (its brackets balance; no closer)
    # When set, an object with any other key, or whose "name" is not a string, is not a call: `parse`
    # returns no result (an anchored envelope is then content: Llama 3's JSON answers).
    call_keys: tuple[str, ...] = ()
    call_list: bool = False  # the body is a JSON list of call objects (a bare object is a list of one)
    name_keys: tuple[str, ...] = ("name",)  # the member naming the tool
    argument_keys: tuple[str, ...] = ARGUMENT_KEYS  # the member holding the arguments (one of them)
    numeric_ids: bool = False  # a number under an id key is the id, as its JSON text
    named_by_key: bool = False  # a call object is {"NAME": {arguments}}: its one key names the tool
    empty_list_is_no_call: bool = False  # `[]` holds no call (no rejection); else it is `invalid_json`
    # The body is call objects separated by whitespace, no brackets or commas (MiniMax M1), each read
    # on its own: a broken one is `invalid_json`, its text running to the next `{` that starts a line.
    separated: bool = False
    # Where no closer ends the value (`end_at_value`): what usually follows it, the next call's opener
    # (`JsonAwareScanner`'s `ends_before`: where its strict read is tried up to first).
    ends_before: tuple[str, ...] = ()
    # The body is one JSON object whose only key says what it holds (see the module's rules).
    one_key: OneKeyEnvelope | None = None
    # Extra `}` after the call object are tolerated (Qwen 2.5's doubled braces: its grammar reads them
    # too); otherwise the body is the object and whitespace, and anything after it is `invalid_json`.
    extra_closing_braces: bool = True

    @property
    def value_reader(self) -> ValueReader:
        """What a scanner reads in a complete top-level JSON value it skims, for `parse` (`scanning.Decoded`)."""
        return objects_in_a_row if self.end_at_value and not self.call_list else call_objects

    def scanner(self) -> JsonAwareScanner:
        return JsonAwareScanner(self.closers, self.stops, self.end_at_value, read=self.value_reader,
                                ends_before=self.ends_before)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> JsonObjectCallStreamer:
        return JsonObjectCallStreamer(self, marks_of(scanner, MEMBERS))

    def whole(self, text: str, pos: int) -> tuple[list[CallResult], int, int] | None:
        """`spec.WholeBody`: the calls of an envelope whose body starts at `text[pos]` and whose
        closer is in `text` too, when the body is one call object and JSON whitespace (the common
        case: a whole envelope in one chunk, as `parse()` has them all), with where the body ends
        and where the closer does; None for anything else, which the scanner and `parse` read.

        The same reading as theirs: the first closer or stop outside JSON strings is the first one
        in the text when only whitespace and one complete strict object come before it (a closer
        inside one of its strings would have cut it short), and the object's members are what
        `parse` would read there."""
        if self.end_at_value or self.call_list or self.separated:
            return None
        closers, delimiters, _ = json_scanner_parts(self.closers, self.stops)
        found = delimiters.search(text, pos)
        if found is None or found.group() not in closers:
            return None
        start = _skip_space(text, pos)
        limit = found.start()
        read = object_members(text, start, limit) if text.startswith("{", start) else None
        if read is None or _skip_space(text, read[1]) != limit:
            return None
        results = self._calls(read[0])
        return (results, limit, found.end()) if results else None

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]:
        body = envelope.body
        if not body or body.isspace():
            return empty_body(envelope, self.tag, f"empty {self.tag} envelope") or []
        start = _skip_space(body, 0)
        read = decoded_at(envelope.decoded, body, start)  # the call objects the scanner read
        complete = envelope.complete
        if not complete and self.end_at_value and broken_before_end(body, start):
            # Its brackets never balanced, but the JSON was invalid before the output ended: not a cut.
            envelope = replace(envelope, complete=True)
            complete = True
        if self.one_key is not None:
            return self._read_one_key(self.one_key, body, complete, start, read)
        if self.separated:
            return self._read_separated(body, complete, start, envelope.decoded)
        if self.call_list:
            return self._read_list(body, complete, start, read)
        # Fast path for the common case, one plain object; the grammar reads everything else.
        found = members_at(body, start, start, read)
        if found is not None and not body[found[1]:].strip(_JSON_SPACE + "}" if self.extra_closing_braces
                                                          else _JSON_SPACE):
            return self._calls(found[0])
        try:
            tree = load_grammar(self.grammar).parse(body)
        except ParseError as error:
            if not envelope.complete:
                return [Rejection(TRUNCATED, [f"the output ended inside {self.tag} before the call was complete"])]
            pos = error.pos
            problem = json_problem(body, pos) or f"unexpected text at character {pos}: {body[pos:pos + 20]!r}"
            return [Rejection(INVALID_JSON, [f"not one JSON call object: {problem}"])]
        return self._calls(_VISITOR.visit(tree))

    def _calls(self, members: list[Member]) -> list[CallResult]:
        """The call of one object; none when `call_keys` says the object is not a call at all."""
        if self.call_keys and (any(key not in self.call_keys for key, _, _ in members)
                               or not any(key in self.name_keys and isinstance(value, str)
                                          for key, value, _ in members)):
            return []
        return [self.call(members)]

    def call(self, members: list[Member]) -> CallResult:
        """The call one call object's members make, by the format's key map."""
        if self.named_by_key:
            return call_named_by_key(members)
        if not self.id_keys:  # no id to read (`call_of` would find none)
            return call_from_members(members, self.name_keys, self.argument_keys)
        return call_of(members, self.id_keys, self.name_keys, self.argument_keys, self.numeric_ids)

    def _read_one_key(self, keys: OneKeyEnvelope, body: str, complete: bool, start: int,
                      read: Read | None) -> list[CallResult]:
        """`one_key`: the calls of the object's one member, by its key; none for the answer (content:
        `answer`), an empty call list, or an object that is no such envelope (content, verbatim)."""
        found = members_at(body, start, start, read)
        if found is not None:  # strict JSON, each key once
            if len(found[0]) != 1 or found[0][0][0] not in keys:
                return []
            key, value, raw = found[0][0]
            if key == keys.answer or value == []:
                return []
            return self._one_key_calls(keys, key, raw, True)
        head = keys.head.match(body, start)
        if head is None or head.group(1) == json.dumps(keys.answer):
            return []
        key = json.loads(head.group(1))
        try:
            end: int | None = value_end(body, head.end(), len(body))
        except ValueError:  # not JSON, or cut off: the calls' reading says where
            end = None
        if end is not None:
            after = _skip_space(body, end)
            if body.startswith(",", after):  # another member: no such envelope
                return []
            if body[after:].strip(_JSON_SPACE) not in ("}", ""):
                return [Rejection(INVALID_JSON, [f"text after the {key!r} value: {body[after:after + 20]!r}"])]
            return self._one_key_calls(keys, key, body[head.end():end], complete or body[after:].strip() == "}")
        value = body[head.end():].rstrip(_JSON_SPACE)
        return self._one_key_calls(keys, key, value[:-1] if complete and value.endswith("}") else value, complete)

    def _one_key_calls(self, keys: OneKeyEnvelope, key: str, value: str, complete: bool) -> list[CallResult]:
        """The calls of the value of `key`: a list of call objects, or one."""
        if not value.strip(_JSON_SPACE):
            return [Rejection(TRUNCATED if not complete else INVALID_JSON, [f"no value after {key!r}"])]
        if key == keys.calls:
            if not value.startswith("["):
                return [Rejection(INVALID_JSON, [f"$.{key}: the calls must be a JSON list"])]
            return self._read_list(value, complete, 0, None)
        found = object_members(value, 0)
        if found is not None and not value[found[1]:].strip(_JSON_SPACE):
            return [self.call(found[0])]
        if not complete:
            return [Rejection(TRUNCATED, [f"$.{key}: the output ended inside the call"])]
        if not value.startswith("{"):
            return [Rejection(INVALID_JSON, [f"$.{key}: a call must be a JSON object"])]
        return [Rejection(INVALID_JSON, [f"$.{key}: {_json_error(value, 0)}"])]

    def answer(self, envelope: Envelope) -> str | None:
        """The content an envelope that holds no call stands for, where it is not its text verbatim
        (`one_key`): the answer's string decoded, its other values as their JSON text, as written;
        nothing for an empty call list. Cut off inside the answer's string: the text decoded so far."""
        keys = self.one_key
        if keys is None:
            return None
        body = envelope.body
        start = _skip_space(body, 0)
        found = members_at(body, start, start, decoded_at(envelope.decoded, body, start))
        if found is not None:
            if len(found[0]) != 1:
                return None
            key, value, raw = found[0][0]
            if key == keys.answer:
                return value if isinstance(value, str) else raw
            return "" if key == keys.calls and value == [] else None
        head = keys.head.match(body, start)
        if head is None or head.group(1) != json.dumps(keys.answer):
            return None
        at = head.end()
        try:
            end = value_end(body, at, len(body))
        except ValueError:  # not JSON, or cut off
            if envelope.complete:
                return None
            return _string_so_far(body[at + 1:]) if body.startswith('"', at) else body[at:]
        rest = body[_skip_space(body, end):].strip(_JSON_SPACE)
        if rest not in ("}", "") or (rest == "" and envelope.complete):
            return None
        if not body.startswith('"', at):
            return body[at:end]
        try:
            text = LENIENT_DECODER.decode(body[at:end])
        except ValueError:
            return None
        return text if isinstance(text, str) else None

    def _read_separated(self, body: str, complete: bool, start: int, decoded: Decoded | None) -> list[CallResult]:
        """Call objects one after another, whitespace between them. Cost: each object is decoded here
        once; the scanner's skim of the last one it skimmed whole is used for it instead (a scanner
        keeps what it read of one top-level value)."""
        results: list[CallResult] = []
        pos = start
        while pos < len(body):
            found = members_at(body, pos, pos, decoded_at(decoded, body, pos)) if body.startswith("{", pos) else None
            if found is not None:
                results.append(self.call(found[0]))
                pos = _skip_space(body, found[1])
                continue
            restart = _NEXT_OBJECT.search(body, pos + 1)
            end = restart.start() + 1 if restart is not None else len(body)
            if restart is None and not complete:
                results.append(Rejection(TRUNCATED, ["the output ended inside a call object"], raw=body[pos:]))
            else:
                results.append(Rejection(INVALID_JSON, [f"not a JSON call object: {_json_error(body, pos)}"],
                                         raw=body[pos:end].rstrip(_JSON_SPACE)))
            pos = _skip_space(body, end)
        return results

    def _read_list(self, body: str, complete: bool, start: int, read: Read | None) -> list[CallResult]:
        """A list of call objects, one element at a time: each element is a call or a rejection on
        its own; the calls before a broken or cut-off element are kept, and the rest of the list is
        one rejection. Cost: each element is decoded once (C decoder; the grammar only for the
        elements that are not plain objects)."""
        grammar = load_grammar(self.grammar)
        list_open = rule_regex(self.grammar, ("list_open",), frozenset())
        if list_open is not None:  # the rule as one regex: the same match, no parse node
            opened = list_open.match(body)
            pos, listed = (opened.end(), True) if opened is not None else (0, False)
        else:
            try:
                pos = grammar["list_open"].match(body).end
                listed = True
            except ParseError:  # a bare call object: a list of one
                pos, listed = 0, False
        results: list[CallResult] = []
        item_at = pos
        closed = broken = False
        while True:
            if listed and not results:
                after = _skip_space(body, pos)
                if body.startswith("]", after):
                    pos, closed = after + 1, True
                    break
            path = f"$[{len(results)}]" if listed else "$"
            found = members_at(body, _skip_space(body, item_at), start, read)
            if found is not None:
                element: Any = found[0]
                end = _skip_space(body, found[1])
            else:
                try:
                    item = grammar["list_item"].match(body, item_at)
                except (ParseError, RecursionError):
                    broken = True
                    break
                element, end = _LIST_VISITOR.visit(item), item.end
            results.append(_at(path, self._element_call(element)))
            pos = end
            if not listed:
                closed = True
                break
            if body.startswith(",", pos):
                item_at = pos + 1
                continue
            if body.startswith("]", pos):
                pos, closed = pos + 1, True
            break
        rest = body[pos:]
        if not rest.strip(_JSON_SPACE) and (closed or results):  # a missing `]` after complete calls is tolerated
            if not results and self.empty_list_is_no_call:
                return results
            return results or [Rejection(INVALID_JSON, [f"the call list is empty: no call after {self.tag}"])]
        path = f"$[{len(results)}]" if listed else "$"
        if not complete:
            where = "the call list" if listed else "the call"
            results.append(Rejection(TRUNCATED, [f"{path}: the output ended inside {where}"]))
        elif broken:
            results.append(Rejection(INVALID_JSON, [f"{path}: {_json_error(body, _skip_space(body, item_at))}"]))
        elif closed:
            results.append(Rejection(INVALID_JSON, [f"text after the call list: {rest.strip()[:20]!r}"]))
        else:
            results.append(Rejection(INVALID_JSON, [f"{path}: expected ',' or ']' in the call list, "
                                                    f"found {rest.lstrip()[:20]!r}"]))
        return results

    def _element_call(self, element: Any) -> CallResult:
        if isinstance(element, ValueNode):
            kind = _JSON_TYPES.get(type(element.value), "value")
            return Rejection(INVALID_JSON, [f"$: a call must be a JSON object, got a {kind}"])
        return self.call(element)

    # ----------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> grammar_ir.Node:
        """One call object: the name under the first name key and the arguments under any one of the
        argument keys, an optional id under the
        first id key and, where the format reads one, an optional `"type": "function"`; or
        `{"NAME": {arguments}}` for a format named by key. No other member."""
        if self.named_by_key:
            return Json(exact_object({name: parameters}, (name,)))
        # Every argument key the format reads (Hermes writes `arguments`, Llama and Command R7B `parameters`).
        keys = [key for key in self.argument_keys if not self.call_keys or key in self.call_keys]
        variants: list[tuple[dict[str, Any], tuple[str, ...]]] = []
        for key in keys:
            members: dict[str, Any] = {}
            if "type" in self.call_keys:
                members["type"] = {"const": "function"}
            members[self.name_keys[0]] = {"const": name}
            members[key] = parameters
            variants.append((members, (self.name_keys[0], key)))
        if self.id_keys:  # an id may come first (Command R7B) or last (Mistral)
            written_id = {self.id_keys[0]: {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}}
            variants = [(order, required) for members, required in variants
                        for order in ({**written_id, **members}, {**members, **written_id})]
        placed = [exact_object(members, required, "#" if len(variants) == 1 else f"#/anyOf/{position}")
                  for position, (members, required) in enumerate(variants)]
        return Json(any_of(placed))

    def body_grammar(self, calls: grammar_ir.Node, many: bool) -> grammar_ir.Node:
        """A lone call object; for `call_list`, a JSON list of one (or, `many`, one or more); for
        `separated`, objects one a line; then the first closer, when the envelope has one."""
        body: grammar_ir.Node = calls
        if self.one_key is not None:  # `{"tool_calls": [CALL, …]}` or `{"tool_call": CALL}`
            keys = self.one_key

            def member(key: str, value: grammar_ir.Node) -> grammar_ir.Node:
                return seq(Lit("{"), SPACE, Lit(json.dumps(key)), SPACE, Lit(":"), SPACE, value, SPACE, Lit("}"))

            listed = seq(Lit("["), SPACE, Repeat(calls, 1, None if many else 1, seq(SPACE, Lit(","), SPACE)), SPACE,
                         Lit("]"))
            return alt(member(keys.calls, listed), member(keys.call, calls))
        if self.call_list:
            items = Repeat(calls, 1, None if many else 1, seq(SPACE, Lit(","), SPACE))
            body = alt(seq(Lit("["), SPACE, items, SPACE, Lit("]")), calls)  # a bare object is a list of one
        elif self.separated and many:
            body = Repeat(calls, 1, None, Lit("\n"))
        return seq(SPACE, body, SPACE, Lit(self.closers[0])) if self.closers else body

    def calls_per_envelope(self) -> int | None:
        return None if self.call_list or self.separated or self.one_key is not None else 1


_SPACE_RUN = re.compile(r"[ \t\n\r]*")
_NEXT_OBJECT = re.compile(r"\n[ \t\r]*\{")  # a `{` that starts a line: where a broken separated object ends


def _skip_space(text: str, pos: int) -> int:
    """Where the JSON whitespace from `pos` ends (without copying the text)."""
    return _SPACE_RUN.match(text, pos).end()  # type: ignore[union-attr]


_UNFINISHED_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*(\\(?:u[0-9a-fA-F]{0,3})?)$")


def _string_so_far(text: str) -> str | None:
    """A JSON string's text cut off by the end of the output (no closing quote), decoded as far as
    it goes: an escape the end cut in two is left out. None where it is not a string's text."""
    unfinished = _UNFINISHED_ESCAPE.search(text)
    if unfinished is not None:
        text = text[:unfinished.start(1)]
    try:
        value = LENIENT_DECODER.decode(f'"{text}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


# What `call_objects` read in a body's top-level value: offset from its start → (members, end offset).
Read = dict[int, tuple[Any, int]]


def call_objects(text: str, pos: int, limit: int) -> tuple[Read, int] | None:
    """The scanner's reader (`scanning.ValueReader`) of a complete top-level value: the members of
    each call object in it (the object, or each object element of a list), as `object_members`
    reads them when the body is parsed; None when that reading fails anywhere (the scanner then
    only finds where the value ends, and the parse reads the body itself). A list of call objects
    is read element by element, each by one strict jiter pass over the text it is guessed to be
    (`_guessed_elements`); where a guess is wrong, the list is read whole and where each element
    but the last ends is found by a lighter pass (`strict_json.value_end`)."""
    if text.startswith("{", pos):
        found = object_members(text, pos, limit)
        return None if found is None else ({0: (found[0], found[1] - pos)}, found[1])
    if not text.startswith("[", pos):
        return None
    return _guessed_elements(text, pos, limit) or _whole_list(text, pos, limit)


def objects_in_a_row(text: str, pos: int, limit: int) -> tuple[Read, int] | None:
    """`call_objects` for a body kind whose envelope ends where its value ends, so that the next
    call object may follow before `limit` (Llama 3's bare objects): an object is read up to where
    that one opens (`_guessed_object`), not up to `limit` and then again up to where it ended."""
    found = _guessed_object(text, pos, limit) if text.startswith("{", pos) else None
    return call_objects(text, pos, limit) if found is None else ({0: (found[0], found[1] - pos)}, found[1])


def _whole_list(text: str, pos: int, limit: int) -> tuple[Read, int]:
    elements, end = strict_value(text, pos, limit)
    read: Read = {}
    at = _skip_space(text, pos + 1)
    last = len(elements) - 1
    for index, element in enumerate(elements):
        stop = space_back(text, at, end - 1) if index == last else value_end(text, at, end - 1)
        if isinstance(element, dict):
            read[at - pos] = (members_of(text, at, stop, element), stop - pos)
        at = _skip_space(text, _skip_space(text, stop) + 1)  # past the comma
    return read, end


def _first_key(text: str, at: int) -> str | None:
    """The raw text (quotes included) of the first key of the object at `text[at]`, when it is
    written without escapes; else None."""
    key_at = _skip_space(text, at + 1)
    if not text.startswith('"', key_at):
        return None
    key_end = text.find('"', key_at + 1) + 1
    return None if key_end == 0 or "\\" in text[key_at:key_end] else text[key_at:key_end]


@lru_cache(maxsize=64)
def _next_element(first_key: str) -> re.Pattern[str]:
    """Where a list element may end: `}`, a comma and an object that opens with `first_key` (raw
    text, quotes included), the next element's start in group 1."""
    return re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*(\{[ \t\n\r]*" + re.escape(first_key) + r"[ \t\n\r]*:)")


@lru_cache(maxsize=64)
def _next_object(first_key: str) -> re.Pattern[str]:
    """Where a call object followed by another (Llama 3's bare objects, `;` between them or not) may
    end: `}` before an object that opens with `first_key`."""
    return re.compile(r"\}(?=[ \t\n\r;]*\{[ \t\n\r]*" + re.escape(first_key) + r"[ \t\n\r]*:)")


def _guessed_object(text: str, pos: int, limit: int) -> tuple[list[Member], int] | None:
    """`object_members` of the call object at `text[pos]` when another call object follows it
    before `limit` and it ends just before that one (read by one strict jiter pass over exactly its
    guessed text, which proves the guess); None otherwise. Saves the second pass a read up to
    `limit` takes to learn where the object ends (`strict_json.strict_value`)."""
    key = _first_key(text, pos)
    found = None if key is None else _next_object(key).search(text, pos, limit)
    if found is None:
        return None
    stop = found.end()
    try:
        value = decode_exact(text, pos, stop)
    except ValueError:
        return None
    return (members_of(text, pos, stop, value), stop) if isinstance(value, dict) else None


def _guessed_elements(text: str, pos: int, limit: int) -> tuple[Read, int] | None:
    """`call_objects` of the list at `text[pos]` when each element is a call object that opens with
    the first element's first key: each element is guessed to end before the next `}, {KEY:` (or,
    the last, before the list's `]` at `limit`) and read strictly by one jiter pass over exactly
    that text. A guess is proved by that pass (a JSON value ends where its brackets close, so a
    slice read whole is the element), and the separators by the search; None at the first wrong
    guess (a nested object that looks like the next element, another first key, text after the
    list) or refusal. Cost: one strict jiter pass per element, a search per element for where it
    may end (C speed; first for the separator as `json.dumps` writes it, `}, {KEY:`, a plain string
    search, and only where it is not there for any spacing) instead of a second pass over each
    element but the last, and one search of the list's text for a number that could overflow."""
    at = _skip_space(text, pos + 1)
    key = _first_key(text, at) if text.startswith("{", at) else None
    if key is None:
        return None
    after = _next_element(key)
    written = "}, {" + key + ":"
    closer = space_back(text, at, limit) - 1
    if not text.startswith("]", closer):
        return None
    read: Read = {}
    elements = []
    while True:
        usual = text.find(written, at, closer)
        found = after.match(text, usual) if usual >= 0 else after.search(text, at, closer)
        stop = space_back(text, at, closer) if found is None else found.start() + 1
        try:
            element = decode_exact(text, at, stop, overflow_checked=True)
        except ValueError:
            return None
        if not isinstance(element, dict):
            return None
        elements.append(element)
        read[at - pos] = (members_of(text, at, stop, element), stop - pos)
        if found is None:
            return None if overflows(elements, text, pos, closer + 1) else (read, closer + 1)
        at = found.start(1)


def members_at(body: str, pos: int, start: int, read: Read | None) -> tuple[list[Member], int] | None:
    """`object_members(body, pos)`: what `call_objects` read there, when the body's top-level value
    at `start` is the text the scanner read (`read`), else read now."""
    found = None if read is None else read.get(pos - start)
    if found is None:
        return object_members(body, pos)
    return found[0], start + found[1]


# What the value of the call-object member being read is to the streamer.
_NAME, _ID, _ARGUMENTS = "name", "id", "arguments"


@dataclass
class _Call:
    """A call object as far as the streamer has read it."""

    k: int  # its position in the envelope's list (0 for a lone object)
    name: str | None = None
    name_seen: bool = False  # a name member was read: only the first one counts, as in `call_of`
    id: str | None = None
    id_seen: bool = False
    id_known: bool = False  # its id member was read whole
    closed: bool = False
    started: bool = False
    members: int = 0  # keys read so far
    held: list[str] = field(default_factory=list)  # arguments text read before the call could start
    # The text under a later argument key (`parameters`), sent when the object closes without the first.
    held_later: list[str] = field(default_factory=list)
    first_key: bool = False  # the first of `argument_keys` was read


class JsonObjectCallStreamer:
    """Call objects `{"name": "…", "arguments": {…}}` as they stream: a lone object (Hermes, with
    Qwen 2.5's doubled braces) or, for `call_list` formats, a list of them, call `k` per element.

    A call starts when its name string closes; when the format declares `id_keys`, only once its id
    member has been read too, or its object has closed without one (an id may follow the
    arguments). The arguments object is sent as the raw text the model writes, which is exactly the
    `arguments_json` the final parse keeps; text read before the call starts is held, and so is an
    object under a later argument key (`parameters`) until its call object closes without the first
    (which would win). An arguments
    value that is a JSON string is not streamed (its final text is the decoded string), nor is
    anything after the object or list. Two elements with no comma between them end the stream: the
    parse rejects what follows, and an element's text must never join another call's fragments.
    Cost: one step per quote and structural character, read from the marks of the scanner's walk
    (`scanning.Marks`, down to `MEMBERS`): the body is not walked again; O(1) state per level."""

    def __init__(self, kind: JsonCall, marks: Marks) -> None:
        self._kind = kind
        self._marks = marks
        self._depth = 0
        # Depth of a call object's members: 2 in a list, 1 for a lone object (2 within doubled
        # braces: a lone object's is the depth of its first string).
        self._base: int | None = None
        self._listed = False  # the body is a list of call objects
        self._call: _Call | None = None if self._kind.call_list else _Call(0)
        self._k = 0
        self._element_expected = True  # in a list: the next element may open (start, or after a comma)
        self._in_string = False
        self._string: list[str] | None = None  # a key or name string being read at the call's level
        self._string_is_key = False
        self._key: str | None = None
        self._expect_key = False
        self._role: str | None = None  # what the member value being read is (_NAME, _ID, _ARGUMENTS)
        self._in_arguments = False
        self._id_text: list[str] | None = None  # the raw text of an id member's value being read
        self._done = False

    def feed(self, body: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        pos = len(body)  # where what this piece holds for the open spans ends
        args_from = 0 if self._in_arguments else -1
        id_from = 0 if self._id_text is not None else -1
        string_from = 0 if self._in_string else -1
        for at in self._marks.take(body):
            if self._done:
                break
            char = body[at]
            if self._in_string:  # the quote that closes it: the walk marks nothing inside a string
                self._string_text(body[string_from: at + 1])
                self._in_string = False
                string_from = -1
                self._string_closed(events)
                continue
            depth = self._depth
            at_members = self._call is not None and depth == self._base
            if char == '"':
                self._in_string = True
                string_from = at + 1
                if self._base is None and not self._kind.call_list:
                    self._base = depth
                    at_members = True
                if at_members and not self._in_arguments and (self._expect_key or self._role == _NAME):
                    self._string = ['"']
                    self._string_is_key = self._expect_key
            elif char in "{[":
                if self._kind.call_list and self._base is None:
                    self._listed = char == "["
                    self._base = 2 if self._listed else 1
                    if not self._listed:
                        self._call = _Call(0)
                elif self._kind.separated and depth == 0 and self._call is None and char == "{":  # the next object
                    self._call = _Call(self._k)
                elif self._listed and depth == 1:  # an element of the list
                    if not self._element_expected:
                        self._done = True
                        pos = at + 1
                        break
                    self._element_expected = False
                    self._call = _Call(self._k) if char == "{" else None
                if at_members and self._role == _ARGUMENTS and char == "{" and not self._in_arguments:
                    self._in_arguments = True
                    args_from = at
                if char == "{" and (self._base is None or depth + 1 == self._base):
                    self._expect_key = True
                    self._key = self._role = None
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                depth = self._depth
                if self._in_arguments and depth == self._base:
                    self._emit_arguments(events, body[args_from: at + 1])
                    self._in_arguments = False
                    args_from = -1
                    self._role = None
                elif self._base is not None and depth == self._base - 1 and self._call is not None:
                    if self._id_text is not None:
                        self._id_read(events, body[id_from:at])
                    call = self._call
                    call.closed = True
                    self._start(call, events)
                    if call.started and call.held_later and not call.first_key:
                        events.append(ArgumentsFragment(call.k, "".join(call.held_later)))
                    call.held_later = []
                if self._base is not None and depth < (1 if self._listed else self._base):
                    if self._kind.separated and depth == 0 and char == "}":  # another object may follow
                        self._k += 1
                        self._call = None
                        continue
                    self._done = True
                    pos = at + 1
            elif char == "," and at_members:
                if self._id_text is not None:
                    self._id_read(events, body[id_from:at])
                self._expect_key = True
                self._key = self._role = None
            elif char == "," and self._listed and depth == 1:
                self._k += 1
                self._call = None
                self._element_expected = True
            elif char == ":" and at_members and self._call is not None:
                self._expect_key = False
                self._role = self._role_of(self._call)
                if self._role == _ID:
                    self._id_text, id_from = [], at + 1
        if string_from >= 0 and self._in_string:
            self._string_text(body[string_from:pos])
        if self._in_arguments and args_from >= 0:
            self._emit_arguments(events, body[args_from:pos])
        if self._id_text is not None and id_from >= 0:
            self._id_text.append(body[id_from:pos])
        return events

    def _role_of(self, call: _Call) -> str | None:
        """What the value of the member whose key was just read is."""
        kind, key = self._kind, self._key
        if kind.named_by_key:
            return _ARGUMENTS if call.members == 1 else None
        if key in kind.name_keys and not call.name_seen:
            call.name_seen = True
            return _NAME
        if key in kind.id_keys and not call.id_seen:
            call.id_seen = True
            return _ID
        return _ARGUMENTS if key in kind.argument_keys else None

    def _string_text(self, text: str) -> None:
        if self._string is not None:
            self._string.append(text)

    def _string_closed(self, events: list[StreamEvent]) -> None:
        if self._string is None or self._call is None:
            return
        try:
            value = json.loads("".join(self._string))
        except ValueError:
            value = None
        self._string = None
        call = self._call
        if self._string_is_key:
            self._key = value if isinstance(value, str) else None
            if self._kind.named_by_key and call.members == 0 and self._key is not None:
                call.name = self._key
                self._start(call, events)
            call.members += 1
        elif self._role == _NAME and call.name is None and isinstance(value, str):
            call.name = value
            self._start(call, events)

    def _id_read(self, events: list[StreamEvent], tail: str) -> None:
        """The id member's value ended: decode it as `call_of` does, and start the call if it can."""
        assert self._id_text is not None and self._call is not None
        raw = ("".join(self._id_text) + tail).strip(_JSON_SPACE)
        self._id_text = None
        try:
            value = strict_loads(raw)
        except (ValueError, RecursionError):
            value = None
        call = self._call
        call.id = written_id((value, raw), self._kind.numeric_ids)
        call.id_known = True
        self._start(call, events)

    def _start(self, call: _Call, events: list[StreamEvent]) -> None:
        if call.started or call.name is None or not call.name.strip():
            return
        if self._kind.id_keys and not (call.id_known or call.closed):
            return
        call.started = True
        events.append(CallStart(call.k, call.name, call.id))
        if call.held:
            events.append(ArgumentsFragment(call.k, "".join(call.held)))
            call.held = []

    def _emit_arguments(self, events: list[StreamEvent], text: str) -> None:
        call = self._call
        if not text or call is None:
            return
        if not self._kind.named_by_key:
            if self._key != self._kind.argument_keys[0]:  # held: the first key, written later, would win
                call.held_later.append(text)
                return
            call.first_key = True
        if call.started:
            events.append(ArgumentsFragment(call.k, text))
        else:
            call.held.append(text)
