"""The grammar IR: what a format's output may be, as a tree of a few node kinds.

It lives in the core because each body kind describes its own layout with it ("the body kind knows
its layout", `CallLayout` below) and the core must not import the grammars package above it
(`streamparse/constrain/`, which assembles a whole output from these pieces and writes the tree
out as an xgrammar structural tag, a Lark grammar for llguidance or a llama.cpp GBNF grammar).

The nodes are frozen dataclasses and mean the same thing in every syntax:
- `Lit(text)`: exactly this text;
- `Special(text)`: a special (added) token of the model's vocabulary, written as that one token;
- `Json(schema, one_line)`: the JSON text of a value valid against the JSON schema (JSON whitespace
  allowed; spaces only where `one_line`: no line break or tab);
- `Text(stops)`: any text (the empty text included) in which none of `stops` occurs;
- `Regex(pattern, stops)`: text matching the pattern, in the portable subset every emitter translates:
  literal characters and escapes (`\\n`, `\\.`, `\\d`, `\\s`, `\\w`), classes `[...]` and `[^...]`,
  `.`, groups `(...)` / `(?:...)`, `|`, and the quantifiers `*`, `+`, `?`, `{m}`, `{m,n}`;
- `Seq(items)`: the items one after another; `Alt(options)`: exactly one of them;
- `Repeat(item, min, max, separator)`: `item` `min` to `max` times (`max=None`: no bound), with
  `separator` between two of them;
- `Members(members, separator, at_least_one)`: a tool's arguments, each may be left out where not
  required, in order, `separator` between two written ones (`ordered_members`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Lit:
    """Exactly `text`."""

    text: str


@dataclass(frozen=True)
class Special:
    """A special token written as one token: llguidance Lark's `<|...|>` token form, a GBNF literal
    that llama.cpp keeps as one token (`preserved_tokens`), a structural tag's constant string."""

    text: str


@dataclass(frozen=True)
class Json:
    """The JSON text of a value valid against `schema` (a JSON schema: a dict, or `True` for any value).
    `one_line`: its whitespace spaces only (a JSON string holds no raw line break or tab, so the text
    then holds none: a closer that does cannot begin inside it)."""

    schema: Mapping[str, Any] | bool
    one_line: bool = False

    def __hash__(self) -> int:  # a schema is a dict, not hashable: every Json node hashes alike
        return hash(Json)


@dataclass(frozen=True)
class Text:
    """Any text, the empty text included, in which none of `stops` occurs."""

    stops: tuple[str, ...] = ()


@dataclass(frozen=True)
class Regex:
    """Text matching `pattern` (the portable subset named in the module docstring). `stops`: strings
    no text of the pattern holds (as for `Text`), so that a syntax may end it at the first of them
    (llguidance's lazy lexemes); the pattern alone says what it matches."""

    pattern: str
    stops: tuple[str, ...] = ()


@dataclass(frozen=True)
class Seq:
    """`items` one after another."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """Exactly one of `options`."""

    options: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """`item` at least `min` and at most `max` times (None: no bound), `separator` between two."""

    item: Node
    min: int = 0
    max: int | None = None
    separator: Node | None = None


@dataclass(frozen=True)
class Members:
    """`members` (each `(node, required)`) in this order, an optional one left out or not, `separator`
    between two written ones; `at_least_one`: not all left out. One node, linear in the members, for
    every walk of the tree; each syntax writes it in its own way (`ordered_members` says how)."""

    members: tuple[tuple[Node, bool], ...]
    separator: Node
    at_least_one: bool = False

    def expanded(self) -> Node:
        """The same language as sequences and alternatives only, for a syntax with no rule
        references (a structural tag is a tree): O(n log n) nodes for n members, O(log n) deep."""
        written = _written(list(self.members), self.separator)
        return written if self.at_least_one or any(required for _, required in self.members) else optional(written)


Node = Lit | Special | Json | Text | Regex | Seq | Alt | Repeat | Members
EMPTY = Lit("")
# JSON whitespace, and the whitespace templates write around and between calls, bounded so that a
# constrained model cannot loop on newlines.
SPACE = Regex(r"[ \t\r\n]{0,16}")
SPACES = Regex(r"[ ]{0,16}")  # (beside a `one_line` JSON value)


def seq(*items: Node) -> Node:
    """`Seq` of the items, with empty literals dropped, nested sequences flattened and adjacent
    literals joined; one item is itself."""
    flat: list[Node] = []
    for item in items:
        parts = item.items if isinstance(item, Seq) else (item,)
        for part in parts:
            last = flat[-1] if flat else None
            if isinstance(part, Lit) and isinstance(last, Lit):
                flat[-1] = Lit(last.text + part.text)
            elif part != EMPTY:
                flat.append(part)
    if not flat:
        return EMPTY
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*options: Node) -> Node:
    """`Alt` of the options (duplicates dropped); one option is itself."""
    unique = tuple(dict.fromkeys(options))
    return unique[0] if len(unique) == 1 else Alt(unique)


def optional(item: Node) -> Node:
    """`item` or nothing."""
    return Repeat(item, 0, 1)


class GrammarUnsupported(ValueError):
    """The format's layout cannot be written as a grammar; the message says why."""


# A `Json` node's schema nests at most this many objects and arrays deep: the writers hand it on as
# JSON text (Python's encoder recurses along it). A tool's schema is held to 200 when compiled
# (`validation.MAX_SCHEMA_DEPTH`); a `response_format` schema meets this bound here.
JSON_DEPTH = 256


def check_json_depth(schema: Any) -> None:
    """`GrammarUnsupported` saying what to do when `schema` nests deeper than `JSON_DEPTH`."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (Mapping, list)):
            if depth >= JSON_DEPTH:
                raise GrammarUnsupported(f"the JSON schema nests deeper than {JSON_DEPTH} objects and arrays, "
                                         "more than a grammar is written for: flatten it (name repeated parts "
                                         "in $defs and refer to them with $ref)")
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, Mapping) else node))


@runtime_checkable
class CallLayout(Protocol):
    """What a body kind implements to say how its calls are written (grammar-kinds implements it
    for its kinds from this docstring).

    `call_grammar(name, parameters)` is the text of ONE call of the tool `name` whose arguments
    follow the JSON schema `parameters` (an object schema; `{"type": "object"}` when the tool gave
    none), as the kind writes it inside an envelope: everything between the envelope's opener and
    its closer, neither included (for Hermes `{"name": "NAME", "arguments": {...}}`; for Qwen3-Coder,
    whose opener is `<function=`, `NAME>` and its `<parameter=...>` elements). The text must be
    one the kind's `parse` reads as exactly that call, accepted by the tools check; where the kind
    tolerates several spellings, the grammar may allow only the canonical one. Raises
    `GrammarUnsupported` when the kind cannot constrain this call.

    `body_grammar(calls, many)` is everything after the envelope's opener, its closer included,
    where each call is one of `calls` (an `Alt` of `call_grammar` results, or one of them): for a
    kind that holds one call per envelope, `calls` then the closer; for a list kind (Mistral's
    `[{...}, {...}]`), the list holding one call (`many=False`) or one or more (`many=True`) with
    the kind's brackets and separators, then the closer. Called once per envelope, with the
    alternatives already assembled. An envelope that ends where its body ends has no closer.

    `calls_per_envelope()` is how many calls one envelope can hold: 1, or None for no bound (a list
    kind), so the assembly knows whether several calls need several envelopes.

    A kind that chooses among other kinds by how the body begins (`first_character`) implements
    `layouts()` instead, the kinds it may choose (each a `CallLayout`): an envelope's body is then
    any one of theirs.

    Delimiters are written as `Lit`: the assembly turns the format's special tokens
    (`FormatSpec.special`) into `Special` wherever they occur, so a kind need not know them.
    Wrappers, separators between envelopes, reasoning and content are the assembly's
    (`streamparse/constrain/assemble.py`), never a kind's."""

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> Node: ...

    def body_grammar(self, calls: Node, many: bool) -> Node: ...

    def calls_per_envelope(self) -> int | None: ...


_DEFINITIONS = ("$defs", "definitions")


def placed(schema: Mapping[str, Any] | bool, pointer: str, defs: dict[str, dict[str, Any]]) -> Any:
    """`schema` made ready to sit at JSON pointer `pointer` (e.g. `#/properties/arguments`) inside a
    larger schema: its `$defs`/`definitions` move into `defs` (for the larger schema's root), and a
    local `$ref` into the schema itself is re-pointed below `pointer` (`#/$defs/...` stays valid)."""
    if not isinstance(schema, Mapping):
        return schema
    for key in _DEFINITIONS:
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.setdefault(key, {}).update(found)
    return _repointed({k: v for k, v in schema.items() if k not in _DEFINITIONS}, pointer)


def _repointed(value: Any, pointer: str) -> Any:
    if isinstance(value, Mapping):
        out = {key: _repointed(item, pointer) for key, item in value.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")) \
                and not ref.startswith(("#/$defs/", "#/definitions/")):
            out["$ref"] = pointer + ref[1:]
        return out
    if isinstance(value, list):
        return [_repointed(item, pointer) for item in value]
    return value


def pointer_key(key: str) -> str:
    """A property name as one JSON pointer step."""
    return key.replace("~", "~0").replace("/", "~1")


def exact_object(properties: Mapping[str, Any], required: tuple[str, ...], at: str = "#") -> dict[str, Any]:
    """An object schema with these properties in this order and no others (`at`: where it sits);
    each property schema may hold local definitions and references (`placed`)."""
    defs: dict[str, dict[str, Any]] = {}
    placed_properties = {key: placed(schema, f"{at}/properties/{pointer_key(key)}", defs)
                         for key, schema in properties.items()}
    out: dict[str, Any] = {"type": "object", "properties": placed_properties, "required": list(required),
                           "additionalProperties": False}
    return {**out, **defs}


def any_of(variants: list[dict[str, Any]]) -> dict[str, Any]:
    """One of the schemas (each built to sit at `#/anyOf/<i>`), their definitions at the root."""
    if len(variants) == 1:
        return variants[0]
    defs: dict[str, dict[str, Any]] = {}
    bare = []
    for variant in variants:
        for key in _DEFINITIONS:
            defs.setdefault(key, {}).update(variant.get(key, {}))
        bare.append({k: v for k, v in variant.items() if k not in _DEFINITIONS})
    return {"anyOf": bare, **{key: found for key, found in defs.items() if found}}


_PLACES = {"{id}": Regex(r"[A-Za-z0-9_-]{1,64}"), "{index}": Regex(r"[0-9]{1,4}")}


def from_template(template: str, name: str, parameters: Mapping[str, Any]) -> Node:
    """A call written by a declared template: `{name}` is the tool name, `{arguments}` the JSON
    arguments (JSON whitespace around them), `{id}` a model-written id (letters, digits, `_`, `-`),
    `{index}` a call number; the rest is literal (`functions.{name}:{index}<|tool_call_argument_begin|>{arguments}`)."""
    parts: list[Node] = []
    for piece in re.split(r"(\{name\}|\{arguments\}|\{id\}|\{index\})", template):
        if piece == "{name}":
            parts.append(Lit(name))
        elif piece == "{arguments}":
            parts += [SPACE, Json(parameters), SPACE]
        elif piece in _PLACES:
            parts.append(_PLACES[piece])
        else:
            parts.append(Lit(piece))
    return seq(*parts)


def ordered_members(members: Sequence[tuple[Node, bool]], separator: Node | None = None, *,
                    at_least_one: bool = False) -> Node:
    """Members in this order, each (member, required): an optional one may be left out, `separator`
    (None: nothing) stands between two that are written; `at_least_one`: not all may be left out
    (`members` must not be empty then).

    Which member is written first decides whether a separator goes before each later one, so "the
    members from i on, the first written with no separator" differs for every i: written out as a
    tree, once per i, that is O(n²) (500 optional properties took 0.4 s to build, 1,000 went past
    Python's stack; issue 39). So the members stay one `Members` node, O(n), and a syntax with rule
    references (GBNF, Lark) writes one rule per suffix, "the members from i on, each after a
    separator", which the rule for "the first written is i" and the one for i - 1 both refer to:
    O(n) rules of O(1) size each. A structural tag has no references (it is a JSON tree): it writes
    `Members.expanded()`, O(n log n)."""
    if not members:
        return EMPTY
    members = tuple(members)
    separator = separator if separator is not None else EMPTY
    if len(members) == 1:
        member, required = members[0]
        return member if required or at_least_one else optional(member)
    return Members(members, separator, at_least_one)


def _written(members: list[tuple[Node, bool]], separator: Node) -> Node:
    """At least one of `members` written (each required one), in order, `separator` between two."""
    if len(members) == 1:
        return members[0][0]
    half = len(members) // 2
    first, rest = members[:half], members[half:]
    after = seq(*(seq(separator, member) if required else optional(seq(separator, member))
                  for member, required in rest))
    head = seq(_written(first, separator), after)
    if any(required for _, required in first):
        return head
    return Alt((head, _written(rest, separator)))
