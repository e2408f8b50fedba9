"""What the layouts of the tagged and object-literal kinds share (`grammar_ir.CallLayout`): a tool's
parameters in the order a grammar writes them, and a sequence of optional parts.

Order: the templates of these formats write a call's arguments in the order the message holds them
(`arguments|items`; Gemma 4 sorts them, `dictsort`), and the parsers read any order. A grammar
cannot say "each required key once, in any order" without a rule per subset of keys, so it writes
one order: the schema's (Gemma 4: sorted, as its template writes). Every required key is then
written exactly once, no key twice, and every call the grammar allows is one the parser accepts.
This is xgrammar's own choice for its XML styles (`any_order=False`, the default). A tool whose
schema names no properties is called with no arguments (a key the schema does not name would be
the model's invention).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..grammar_ir import GrammarUnsupported, Node, optional, ordered_members, seq


def parameters_in_order(parameters: Mapping[str, Any]) -> list[tuple[str, Any, bool]]:
    """The tool's properties as (key, schema, required), in the schema's order. A top-level union
    of shapes (`anyOf`/`oneOf`/`allOf`, a `$ref`) has no one list of keys: `GrammarUnsupported`."""
    for keyword in ("anyOf", "oneOf", "allOf", "$ref"):
        if keyword in parameters:
            raise GrammarUnsupported(f"a tool's parameters schema with a top-level {keyword!r} has no one list of "
                                     "parameters to write; give its properties at the top level")
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or []
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        raise GrammarUnsupported("the tool's parameters schema has malformed 'properties' or 'required'")
    return [(key, schema, key in required) for key, schema in properties.items()]


def with_definitions(schema: Any, root: Mapping[str, Any]) -> Any:
    """A property's schema carrying the tool schema's `$defs`/`definitions`, so that its local
    `$ref`s still resolve once it stands alone in a `Json` node."""
    if not isinstance(schema, Mapping):
        return schema
    extra = {key: root[key] for key in ("$defs", "definitions") if key in root and key not in schema}
    return {**schema, **extra} if extra else schema


def in_order(parts: Sequence[tuple[Node, bool]], separator: Node | None = None, *, at_least_one: bool = False) -> Node:
    """The parts one after another, each (node, required); an optional part may be left out, with
    `separator` between two written parts. `at_least_one`: not all may be left out. Size: one node of
    n parts (`grammar_ir.ordered_members`, written in linear size), a sequence without a separator."""
    if not parts and at_least_one:
        raise GrammarUnsupported("an object with no property cannot be written here")
    if separator is None and not at_least_one:
        return seq(*(node if required else optional(node) for node, required in parts))
    return ordered_members(parts, separator, at_least_one=at_least_one)


def enum_strings(schema: Any) -> list[str] | None:
    """The strings a string schema's `enum`/`const` allows, or None when it names no constant."""
    if not isinstance(schema, Mapping):
        return None
    values = list(schema["enum"]) if isinstance(schema.get("enum"), list) else None
    if "const" in schema:
        values = [schema["const"]]
    if values is None or not all(isinstance(value, str) for value in values):
        return None
    return values
