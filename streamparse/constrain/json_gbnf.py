"""JSON Schema as GBNF rules, for the subset llama.cpp's own converter handles.

Expressed: `type` (one or a list), `const`, `enum`, `properties` with `required` (members in the
declared order, optional ones skippable; no other member when properties are declared, any members
when none are), `items` with `minItems`/`maxItems`, string `minLength`/`maxLength` and `pattern`
(the portable regex subset), `anyOf`/`oneOf` (as alternatives), a one-element `allOf`, and local
`$ref`s (JSON pointers into the same schema; recursion allowed). Anything else (numeric bounds,
`format`, `patternProperties`, `not`, conditionals, several `allOf` parts, a pattern outside the
subset) is the generic JSON value of the type the schema names, or any JSON value: the grammar then
allows text the tools check may still reject.

Each schema is a rule of its own, referred to by name: a schema's rule body names its subschemas'
rules, which are written after it (a work list), so a schema nested or `$ref`-chained any depth deep
is written without recursing as deep (the `Json` node's depth bound, `grammar_ir.JSON_DEPTH`, holds
for every syntax).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..grammar_ir import GrammarUnsupported, check_json_depth
from .terms import RuleSet, bounds, literal, regex_rule

_WS = '[ \\t\\n\\r]{0,16}'
_SPACES = '[ ]{0,16}'  # (the whitespace of a `one_line` value)
_HEX = "[0-9a-fA-F]"
# A JSON string's characters: no control characters, escapes but no lone surrogate (the strict
# reader rejects one).
_CHAR = (f'([^"\\\\\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" ([0-9a-cA-CefEF] {_HEX}{{3}} | '
         f'[dD] [89abAB] {_HEX}{{2}} "\\\\u" [dD] [c-fC-F] {_HEX}{{2}} | [dD] [0-7] {_HEX}{{2}})))')
_INTEGER = '"-"? ("0" | [1-9] [0-9]{0,15})'
_NUMBER = f'{_INTEGER} ("." [0-9]{{1,16}})? ([eE] [-+]? [0-9]{{1,3}})?'
_BASIC = {"string": '"\\"" char* "\\""', "integer": _INTEGER, "number": _NUMBER, "boolean": '("true" | "false")',
          "null": '"null"'}


# A pattern that may match a quote, a backslash or a control character: a negated class, `.`, a
# negated category, or either character written out.
_UNSAFE_PATTERN = re.compile(r'\[\^|(?<!\\)\.|\\[SWD]|"|\\\\|\\[nrt]')


class JsonRules:
    """Writes the rules of JSON Schema values into a `RuleSet`, sharing the generic rules; with
    `one_line`, values whose whitespace is spaces only (`Json.one_line`)."""

    def __init__(self, rules: RuleSet, one_line: bool = False) -> None:
        self._rules = rules
        self._one_line = one_line
        self._root: Any = None
        self._generic: dict[str, str] = {}
        self._pending: list[tuple[str, Mapping[str, Any], str]] = []  # (rule, schema, pointer) to write

    def value(self, schema: Mapping[str, Any] | bool) -> str:
        """The rule of a whole schema document (its `$ref`s resolve against it)."""
        check_json_depth(schema)
        self._root = schema
        name = self._schema(schema, "#")
        while self._pending:
            rule, subschema, pointer = self._pending.pop()
            self._rules.define(rule, self._body(subschema, pointer))
        return name

    # ----------------------------------------------------------------- the generic JSON value

    def _basic(self, kind: str) -> str:
        found = self._generic.get(kind)
        if found is not None:
            return found
        if kind == "char":
            found = self._rules.name("char", _CHAR)
        elif kind == "ws":
            found = self._rules.name("ws", _SPACES if self._one_line else _WS)
        elif kind == "value":
            found = self._rules.reserve("value")
            self._generic[kind] = found
            options = [self._basic(k) for k in ("object", "array", "string", "number", "boolean", "null")]
            self._rules.define(found, "(" + " | ".join(options) + ")")
            return found
        elif kind == "object":
            found = self._rules.reserve("object")
            self._generic[kind] = found
            ws, member = self._basic("ws"), f'{self._basic("string")} {self._basic("ws")} ":" ' \
                                             f'{self._basic("ws")} {self._basic("value")}'
            self._rules.define(found, f'"{{" {ws} ({member} ({ws} "," {ws} {member})*)? {ws} "}}"')
            return found
        elif kind == "array":
            found = self._rules.reserve("array")
            self._generic[kind] = found
            ws, value = self._basic("ws"), self._basic("value")
            self._rules.define(found, f'"[" {ws} ({value} ({ws} "," {ws} {value})*)? {ws} "]"')
            return found
        else:
            body = _BASIC[kind].replace("char*", f"{self._basic('char')}*")
            found = self._rules.name(kind, body)
        self._generic[kind] = found
        return found

    # ----------------------------------------------------------------- schemas

    def _schema(self, schema: Any, pointer: str) -> str:
        """The rule of the schema at `pointer`. A schema with a `$ref` is its target's (its other
        keywords are not read): a chain of references is followed here, in a loop, to the schema
        it ends at, and every pointer on the way names that one rule."""
        key = (id(self._root), pointer, self._one_line)
        found = self._rules.known(key)
        chain, seen = [key], {key}
        while found is None and isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if not ref.startswith("#"):
                schema = True  # a remote reference: not followed, any value
                break
            schema, key = self._target(ref), (id(self._root), ref, self._one_line)
            found = self._rules.known(key)
            if key in seen:
                raise GrammarUnsupported(f"the $ref {ref!r} leads back to itself through references alone: "
                                         "it describes no value; give the schema a type")
            chain.append(key)
            seen.add(key)
        if found is None:
            found = self._rule(schema, key[1])
        for on_the_way in chain:
            self._rules.remember(on_the_way, found)
        return found

    def _rule(self, schema: Any, pointer: str) -> str:
        """A new rule for a schema without a `$ref`, its body written later (`value`)."""
        if schema is False:
            raise GrammarUnsupported(f"the schema at {pointer} is false: no value is valid")
        if not isinstance(schema, Mapping) or not schema:  # `true`, `{}`, or not a schema: any value
            return self._basic("value")
        name = self._rules.reserve("schema")
        self._pending.append((name, schema, pointer))
        return name

    def _body(self, schema: Mapping[str, Any], pointer: str) -> str:
        if "const" in schema:
            return literal(json.dumps(schema["const"], ensure_ascii=False))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return "(" + " | ".join(literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]) + ")"
        for word in ("anyOf", "oneOf"):
            if isinstance(schema.get(word), list) and schema[word]:
                options = [self._schema(option, f"{pointer}/{word}/{i}") for i, option in enumerate(schema[word])]
                return "(" + " | ".join(options) + ")"
        if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
            return self._schema(schema["allOf"][0], f"{pointer}/allOf/0")
        kinds = schema.get("type")
        if isinstance(kinds, list):
            return "(" + " | ".join(self._typed(schema, kind, pointer) for kind in kinds) + ")"
        if isinstance(kinds, str):
            return self._typed(schema, kinds, pointer)
        if "properties" in schema:
            return self._typed(schema, "object", pointer)
        if "items" in schema:
            return self._typed(schema, "array", pointer)
        return self._basic("value")

    def _target(self, ref: str) -> Any:
        """The schema a local `$ref` points to in the document."""
        target: Any = self._root
        for written in [s for s in ref[1:].split("/") if s]:
            step = written.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and step in target:
                target = target[step]
            elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
                target = target[int(step)]
            else:
                raise GrammarUnsupported(f"the $ref {ref!r} does not resolve in its schema")
        return target

    def _typed(self, schema: Mapping[str, Any], kind: str, pointer: str) -> str:
        if kind == "object":
            return self._object(schema, pointer)
        if kind == "array":
            return self._array(schema, pointer)
        if kind == "string":
            return self._string(schema)
        if kind in _BASIC:
            return self._basic(kind)
        return self._basic("value")

    def _string(self, schema: Mapping[str, Any]) -> str:
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            # Only a whole-string pattern (`^...$`; JSON Schema patterns search) whose characters
            # never need escaping in JSON, so that the raw text is what the pattern sees.
            if "format" not in schema and pattern.startswith("^") and pattern.endswith("$") \
                    and not _UNSAFE_PATTERN.search(pattern):
                try:
                    return f'"\\"" ({regex_rule(pattern)}) "\\""'
                except GrammarUnsupported:
                    pass
            return self._basic("string")
        least, most = schema.get("minLength", 0), schema.get("maxLength")
        if (least, most) == (0, None) or not isinstance(least, int) or not isinstance(most, (int, type(None))):
            return self._basic("string")
        return f'"\\"" {self._basic("char")}{bounds(least, most)} "\\""'

    def _array(self, schema: Mapping[str, Any], pointer: str) -> str:
        items = schema.get("items", True)
        item = self._schema(items, f"{pointer}/items") if isinstance(items, (Mapping, bool)) else self._basic("value")
        least, most = schema.get("minItems", 0), schema.get("maxItems")
        ws = self._basic("ws")
        if not isinstance(least, int) or not isinstance(most, (int, type(None))):
            least, most = 0, None
        if most == 0:
            return f'"[" {ws} "]"'
        rest = f'({ws} "," {ws} {item}){bounds(max(least - 1, 0), None if most is None else most - 1)}'
        some = f"{item} {rest}"
        return f'"[" {ws} {some if least > 0 else f"({some})?"} {ws} "]"'

    def _object(self, schema: Mapping[str, Any], pointer: str) -> str:
        properties = schema.get("properties")
        ws = self._basic("ws")
        if not isinstance(properties, Mapping) or not properties:
            return self._basic("object")
        required = set(schema.get("required", ()))
        members = []
        for key, sub in properties.items():
            step = key.replace("~", "~0").replace("/", "~1")
            value = self._schema(sub, f"{pointer}/properties/{step}")
            members.append((f'{literal(json.dumps(key, ensure_ascii=False))} {ws} ":" {ws} {value}', key in required))
        # after(i): the members from i on, each after a comma (an earlier member was written);
        # first(i): the members from i on, the first of them written with no comma.
        after = [""] * (len(members) + 1)
        first = [""] * (len(members) + 1)
        for i in range(len(members) - 1, -1, -1):
            member, needed = members[i]
            later = f'{ws} "," {ws} {member}'
            after[i] = self._rules.name("after", f"({later}){'' if needed else '?'} {after[i + 1]}".rstrip())
            start = f"{member} {after[i + 1]}".rstrip()
            skipped = f"({start} | {first[i + 1]})" if first[i + 1] else f"({start})?"
            first[i] = self._rules.name("first", start if needed else skipped)
        return f'"{{" {ws} {first[0]} {ws} "}}"'
