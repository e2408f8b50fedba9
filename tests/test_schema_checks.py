"""Schema checks with jsonschema-rs (issue #22): the same verdicts as jsonschema, and SECURITY.md's bounds.

The property test draws schemas and instances and requires the compiled validator's verdict to
equal `jsonschema`'s (the reference) on every draw. The bounds: no remote resource is ever fetched
(a real local HTTP server must see no request), a deep recursive schema on deep arguments is a
`schema_violation` (never an exception or a crashed process), and bad schemas are a `ValueError`
naming the tool when compiled.
"""

from __future__ import annotations

import http.server
import json
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import hypothesis.strategies as st
import jsonschema
import pytest
from hypothesis import given, settings

import streamparse
from streamparse import Tools
from streamparse.validation import MAX_SCHEMA_DEPTH, ToolSet

# ----------------------------------------------------------------- verdicts equal jsonschema's

KEYS = st.sampled_from(["a", "b", "c"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.0, 1.0, 1.5, -2.5]),
                    st.sampled_from(["", "a", "ab", "abc", "é", "bab"]))
INSTANCES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=3)), max_leaves=12)
TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])
NUMBER = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1.0, -1.5]))
# Patterns that mean the same in ECMA-262 (jsonschema-rs) and Python's `re` (jsonschema) on the
# strings drawn (no newline: Python's `$` also matches before a final "\n", ECMA-262's does not).
PATTERNS = st.sampled_from(["^a", "b$", "^$", "[é]", "^(a|b)+$", "a{2,}", "^[a-c]*$", "^[^\\0]+$", "[\\b]"])


def schemas() -> st.SearchStrategy[Any]:
    def node(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keywords = {
            "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
            "enum": st.lists(INSTANCES, min_size=1, max_size=3), "const": INSTANCES,
            "properties": st.dictionaries(KEYS, inner, max_size=2),
            "required": st.lists(KEYS, max_size=2, unique=True),
            "additionalProperties": inner, "items": inner, "prefixItems": st.lists(inner, min_size=1, max_size=2),
            "contains": inner, "propertyNames": inner,
            "patternProperties": st.dictionaries(PATTERNS, inner, max_size=2),
            "minItems": st.integers(0, 3), "maxItems": st.integers(0, 3), "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3), "minProperties": st.integers(0, 3), "maxProperties": st.integers(0, 3),
            "minimum": NUMBER, "maximum": NUMBER, "exclusiveMinimum": NUMBER, "exclusiveMaximum": NUMBER,
            "anyOf": st.lists(inner, min_size=1, max_size=2), "allOf": st.lists(inner, min_size=1, max_size=2),
            "oneOf": st.lists(inner, min_size=1, max_size=2), "not": inner, "if": inner, "then": inner,
            "else": inner, "dependentRequired": st.dictionaries(KEYS, st.lists(KEYS, max_size=2, unique=True),
                                                                max_size=2),
            "$ref": st.just("#/$defs/d"), "description": st.just("annotation"), "x-vendor": INSTANCES,
            "pattern": PATTERNS, "uniqueItems": st.booleans(),
        }
        return st.dictionaries(st.sampled_from(sorted(keywords)), st.none(), max_size=4).flatmap(
            lambda chosen: st.fixed_dictionaries({k: keywords[k] for k in chosen}))

    leaf = st.one_of(st.booleans(), st.fixed_dictionaries({"type": TYPES}))
    body = st.recursive(leaf, node, max_leaves=6)
    return st.tuples(body, body).map(lambda pair: {"$defs": {"d": pair[1]}, "allOf": [pair[0]]})


def _reference(schema: Any, instance: Any) -> bool | None:
    """jsonschema's verdict; None where it has none (a `$ref` cycle that never reaches a keyword
    recurses until Python's stack runs out)."""
    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(instance))
    except RecursionError:
        return None


@settings(max_examples=300, deadline=None)
@given(schemas(), st.lists(INSTANCES, min_size=1, max_size=5))
def test_verdicts_equal_jsonschemas(schema: Any, instances: list[Any]) -> None:
    validator = ToolSet([{"name": "f", "parameters": schema}]).tools._tools["f"].validator  # type: ignore[union-attr]
    for instance in instances:
        expected = _reference(schema, instance)
        if expected is None:  # no reference answer; ours is still an answer (it must not raise)
            validator.is_valid(instance)
            continue
        assert validator.is_valid(instance) == expected, (schema, instance)


def test_a_ref_cycle_is_a_schema_violation_not_an_exception() -> None:
    tools = [{"name": "f", "parameters": {"$defs": {"d": {"$ref": "#/$defs/d"}}, "not": {"$ref": "#/$defs/d"}}}]
    message = streamparse.parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>', "hermes", tools)
    assert [r.status for r in message.rejected] == ["schema_violation"]


def test_a_null_for_an_optional_property_behind_a_ref_means_not_given() -> None:
    schema = {"type": "object", "properties": {"opts": {"$ref": "#/$defs/opts"}}, "$defs": {"opts": {
        "type": "object", "properties": {"deep": {"type": "boolean"}, "name": {"type": "string"}},
        "required": ["name"]}}}
    toolset = ToolSet([{"name": "f", "parameters": schema}])
    assert toolset.check("f", {"opts": {"name": "x", "deep": None}}) is None
    assert toolset.check("f", {"opts": {"name": None}}) == (
        "schema_violation", ["$.opts.name: None is not of type 'string'"])


@pytest.mark.parametrize(("schema", "value", "error"), [
    ({"type": "integer"}, "five", "$.v: 'five' is not of type 'integer'"),
    ({"enum": [1, 2, 3]}, 4, "$.v: 4 is not one of [1, 2, 3]"),
    ({"const": "x"}, "y", "$.v: 'x' was expected"),
    ({"minimum": 5}, 2, "$.v: 2 is less than the minimum of 5"),
    ({"exclusiveMaximum": 1.5}, 2, "$.v: 2 is greater than or equal to the maximum of 1.5"),
    ({"minLength": 1}, "", "$.v: '' should be non-empty"),
    ({"maxItems": 1}, [1, 2], "$.v: [1, 2] is too long"),
    ({"pattern": "^a"}, "b", "$.v: 'b' does not match '^a'"),
    ({"format": "email"}, "nope", "$.v: 'nope' is not a 'email'"),
    ({"multipleOf": 3}, 4, "$.v: 4 is not a multiple of 3"),
    ({"uniqueItems": True}, [1, 1.0], "$.v: [1, 1.0] has non-unique elements"),
    ({"items": {"type": "string"}}, ["a", 2], "$.v[1]: 2 is not of type 'string'"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, 1, "$.v: 1 is not valid under any of the given schemas"),
    ({"not": {"type": "integer"}}, 1, "$.v: 1 should not be valid under {'type': 'integer'}"),
    ({"type": "integer"}, "x" * 500, "$.v: '" + "x" * 59 + "... is not of type 'integer'"),  # values shortened
])
def test_errors_keep_jsonschemas_words_and_paths(schema: dict[str, Any], value: Any, error: str) -> None:
    verdict = ToolSet([{"name": "f", "parameters": {"properties": {"v": schema}}}]).check("f", {"v": value})
    assert verdict == ("schema_violation", [error])


def test_errors_are_sorted_by_path_and_at_most_twenty() -> None:
    toolset = ToolSet([{"name": "f", "parameters": {"type": "object", "additionalProperties": {"type": "string"}}}])
    verdict = toolset.check("f", {f"k{i:02}": i for i in range(25)})
    assert verdict is not None and verdict[0] == "schema_violation"
    assert verdict[1][0] == "$.k00: 0 is not of type 'string'" and verdict[1][19].startswith("$.k19:")
    assert verdict[1][20:] == ["... and 5 more errors"]


# ----------------------------------------------------------------- nothing fetched


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]]  # each server's own list (the fixture's subclass)

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        body = json.dumps({"type": "integer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server that serves a schema at every path and records each request."""
    seen: list[str] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_recording_server_serves_schemas(schema_server: tuple[str, list[str]]) -> None:
    """The server the next tests rely on answers and records (so "no request" means none was made)."""
    import urllib.request

    base, seen = schema_server
    with urllib.request.urlopen(f"{base}/probe.json") as answer:
        assert json.load(answer) == {"type": "integer"}
    assert seen == ["/probe.json"]


@pytest.mark.parametrize("where", ["$ref", "relative $ref under a remote $id", "$dynamicRef", "nested $ref"])
def test_remote_refs_are_never_fetched(schema_server: tuple[str, list[str]], where: str) -> None:
    base, seen = schema_server
    schema = {"$ref": f"{base}/remote.json"} if where == "$ref" else \
        {"$id": f"{base}/root.json", "properties": {"a": {"$ref": "other.json"}}} \
        if where.startswith("relative") else {"$dynamicRef": f"{base}/dyn.json#node"} \
        if where == "$dynamicRef" else {"properties": {"a": {"items": {"$ref": f"{base}/deep.json#/x"}}}}
    with pytest.raises(ValueError, match=r"tool 'remote'.*(does not resolve|cannot be compiled)"):
        Tools([{"name": "remote", "parameters": schema}])
    assert seen == []


def test_a_remote_meta_schema_is_never_fetched(schema_server: tuple[str, list[str]]) -> None:
    """An unknown `$schema` is Draft 2020-12 (as jsonschema's `validator_for` has it), not a download."""
    base, seen = schema_server
    tools = [{"name": "meta", "parameters": {"$schema": f"{base}/meta.json", "type": "object",
                                              "properties": {"n": {"type": "integer"}}}}]
    message = streamparse.parse('<tool_call>{"name": "meta", "arguments": {"n": "x"}}</tool_call>', tools=tools)
    assert [r.status for r in message.rejected] == ["schema_violation"]
    assert seen == []


# ----------------------------------------------------------------- depth, drafts, compile errors


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _negated(depth: int) -> Any:
    schema: Any = {"type": "string"}
    for _ in range(depth):
        schema = {"not": schema}
    return schema


TREE = {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}}, "$defs": {"node": {
    "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/node"}}, {"type": "integer"}]}}}


@pytest.mark.parametrize("depth", [150, 201, 900])
def test_a_deep_recursive_schema_on_deep_arguments(depth: int) -> None:
    """The schema check answers at any depth; through `parse`, the strict JSON reader (jiter: about 200
    levels) refuses the deepest arguments before the schema sees them."""
    tools = [{"name": "tree", "parameters": TREE}]
    check = ToolSet(tools).check("tree", {"a": _nested(depth)})
    text = '<tool_call>{"name": "tree", "arguments": {"a": ' + "[" * depth + "]" * depth + "}}</tool_call>"
    message = streamparse.parse(text, tools=tools)
    if depth <= 150:
        assert check is None
        assert message.rejected == [] and len(message.tool_calls) == 1
    else:
        assert check == ("schema_violation", ["$: the arguments nest too deeply to be checked against the schema"])
        assert [(r.status, r.errors) for r in message.rejected] == [
            ("invalid_json", ["not one JSON call object: nested too deeply"])]


def test_deeper_arguments_than_any_reader_gives_are_still_an_answer() -> None:
    """100,000 levels: deep enough to overflow the stack of a Rust validator that followed them."""
    toolset = ToolSet([{"name": "tree", "parameters": TREE}])
    assert toolset.check("tree", {"a": _nested(100_000)}) is not None


def test_a_schema_nested_to_the_bound_compiles_and_judges() -> None:
    """99 `not`s deep (198 containers): jsonschema would run out of Python's stack checking it."""
    toolset = ToolSet([{"name": "f", "parameters": {"properties": {"v": _negated(99)}}}])
    assert toolset.check("f", {"v": 1}) is None and toolset.check("f", {"v": "s"}) is not None


def test_draft_selection_by_schema() -> None:
    """Draft 7's `items` list is positional; Draft 2020-12 has `prefixItems` for that."""
    positional = {"type": "object", "properties": {"v": {"items": [{"type": "string"}]}}}
    draft7 = ToolSet([{"name": "f", "parameters": {"$schema": "http://json-schema.org/draft-07/schema#",
                                                   **positional}}])
    assert draft7.check("f", {"v": ["a", 1]}) is None
    assert draft7.check("f", {"v": [1]}) is not None
    draft4 = ToolSet([{"name": "f", "parameters": {"$schema": "http://json-schema.org/draft-04/schema#",
                                                   "properties": {"n": {"maximum": 3, "exclusiveMaximum": True}}}}])
    assert draft4.check("f", {"n": 3}) is not None and draft4.check("f", {"n": 2}) is None


@pytest.mark.parametrize(("parameters", "words"), [
    ({"$schema": "http://json-schema.org/draft-03/schema#"}, "draft-04 or later"),
    ({"properties": {"a": {"pattern": "(unclosed"}}}, "not a valid ECMA-262 regular expression"),
    ({"properties": {"a": {"pattern": "abc\\Z"}}}, "not a valid ECMA-262 regular expression"),  # Python-only
    ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "does not resolve"),
    ({"not": _nested(MAX_SCHEMA_DEPTH + 1)}, f"nests deeper than {MAX_SCHEMA_DEPTH} levels"),
    ({"properties": {"a": {"type": "nope"}}}, r"not a valid JSON Schema \(Draft202012Validator\)"),
])
def test_bad_schemas_are_a_value_error_naming_the_tool(parameters: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=rf"tool 'bad'.*{words}"):
        Tools([{"name": "bad", "parameters": parameters}])


def test_lookaround_patterns_work() -> None:
    """Patterns users write with lookaround (not in the linear engine) run on fancy-regex."""
    toolset = ToolSet([{"name": "f", "parameters": {"properties": {"p": {"pattern": "^(?=.*[A-Z])(?!.*\\s).{8,}$"}}}}])
    assert toolset.check("f", {"p": "Passw0rdX"}) is None
    assert toolset.check("f", {"p": "password"}) is not None


def test_patterns_follow_ecma_262() -> None:
    """Where Python's `re` (jsonschema) and ECMA-262 (the spec, jsonschema-rs) differ, the spec wins:
    `$` does not match before a final newline, `\\d` is an ASCII digit."""
    toolset = ToolSet([{"name": "f", "parameters": {"properties": {"p": {"pattern": "^[a-z]+$"},
                                                                   "d": {"pattern": "^\\d+$"}}}}])
    assert toolset.check("f", {"p": "abc\n"}) is not None
    assert toolset.check("f", {"d": "\u0663"}) is not None  # ARABIC-INDIC DIGIT THREE
    assert toolset.check("f", {"p": "abc", "d": "123"}) is None


def test_ecma_escapes_jsonschema_rs_does_not_read_are_spelled_for_it() -> None:
    """`\\0` (NUL) and `[\\b]` (backspace) are ECMA-262 that users write (this repository's benchmark
    tools do) and that jsonschema-rs refuses; they are handed to it as `\\x00` and `\\x08`."""
    toolset = ToolSet([{"name": "f", "parameters": {"properties": {"p": {"pattern": "^[^\\0]+$"},
                                                                   "b": {"pattern": "^[\\b]x\\b$"}},
                                                    "patternProperties": {"^\\0": {"type": "integer"}}}}])
    assert toolset.check("f", {"p": "ab", "b": "\bx"}) is None
    assert toolset.check("f", {"p": "a\x00b"}) is not None and toolset.check("f", {"b": "bx"}) is not None
    assert toolset.check("f", {"\x00k": "x"}) is not None and toolset.check("f", {"\x00k": 1}) is None


def test_format_is_checked_as_before() -> None:
    """jsonschema's format checkers decide (called from Rust): `email` needs an @, `date` is ISO."""
    toolset = ToolSet([{"name": "f", "parameters": {"properties": {"e": {"format": "email"},
                                                                   "d": {"format": "date"},
                                                                   "u": {"format": "unknown-format"}}}}])
    assert toolset.check("f", {"e": "a@b", "d": "2024-02-29", "u": "anything"}) is None
    assert toolset.check("f", {"e": "ab"}) is not None and toolset.check("f", {"d": "2023-02-29"}) is not None


def test_tools_pickle_and_judge_the_same() -> None:
    tools = Tools([{"name": "f", "parameters": {"properties": {"n": {"type": "integer", "minimum": 0}}}}])
    again = pickle.loads(pickle.dumps(tools))
    assert again == tools
    for arguments in ({"n": 1}, {"n": -1}, {"n": "x"}):
        assert ToolSet(again).check("f", arguments) == ToolSet(tools).check("f", arguments)


def _many_refs(count: int, target: Any) -> dict[str, Any]:
    return {"type": "object", "$defs": {"s": target},
            "properties": {f"p{i}": {"$ref": "#/$defs/s"} for i in range(count)}}


@pytest.mark.parametrize("cycle", [False, True])
def test_reference_cycles_are_found_in_time_linear_in_the_refs(cycle: bool) -> None:
    """Issue 39: `_recursive` compared every `$ref` with every other (one 124 KB tool of 4,000
    `{"$ref": "#/$defs/s"}` properties compiled in 11.8 s, 23 s on a loaded two-core machine; 20,000
    would take minutes); one depth-first search over containers and refs takes about 0.3 s for 20,000.
    The cycle, when there is one, is the last ref's target pointing back at it."""
    from streamparse.validation import _recursive

    target = {"type": "array", "items": {"$ref": "#/properties/p19999"}} if cycle else {"type": "string"}
    started = time.perf_counter()
    assert _recursive(_many_refs(20_000, target)) is cycle
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(("schema", "recursive"), [
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}, False),
    ({"type": "object", "properties": {"a": {"enum": [{"$ref": "#"}]}}}, False),  # data, not a reference
    ({"type": "object", "properties": {"a": {"$ref": "#"}}}, True),
    ({"type": "object", "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
      "properties": {"a": {"$ref": "#/$defs/n"}}}, True),
    ({"type": "object", "$defs": {"n": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}, False),
    ({"type": "object", "properties": {"a": {"$id": "https://example.com/a", "type": "string"}}}, True),
    ({"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": True, "type": "object",
      "properties": {"a": {"$recursiveRef": "#"}}}, True),
])
def test_a_tool_is_recursive_only_where_its_references_can_lead_back(schema: dict[str, Any],
                                                                    recursive: bool) -> None:
    """A schema without any reference is not recursive without building the reference graph; with
    references, the graph decides (True where unsure: nested `$id`s, dynamic references)."""
    from streamparse.validation import _Tool

    assert _Tool("t", schema).recursive is recursive


def test_a_tool_of_four_thousand_refs_compiles_in_bounded_time() -> None:
    started = time.perf_counter()
    tools = Tools([{"name": "f", "parameters": _many_refs(4000, {"type": "string"})}])
    assert time.perf_counter() - started < 5  # 11.8 s (23 s loaded) before issue 39's fix
    assert ToolSet(tools).check("f", {"p0": "x"}) is None and ToolSet(tools).check("f", {"p0": 1}) is not None
