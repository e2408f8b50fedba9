"""What `streamparse serve` sends upstream so the engine enforces a request's `tool_choice`,
`parallel_tool_calls`, strict tools and `response_format`: the grammar of `streamparse.grammar_for`
in the field each engine reads on `/v1/completions`.

- vLLM (>= 0.12): `structured_outputs` (its `StructuredOutputsParams`): `structural_tag` as a JSON
  string for calls, `json` (a schema) or `json_object: true` for `response_format`;
- SGLang: `response_format` holding the structural tag object for calls (its completions endpoint
  turns a `structural_tag` response format into the sampling parameter), `json_schema` (a JSON
  string) for `response_format`;
- llama.cpp server: `grammar` (GBNF) with `grammar_lazy`, `grammar_triggers` and `preserved_tokens`
  (`grammar_triggers`) for calls, `json_schema` (an object) for `response_format`;
- llama-cpp-python's `llama_cpp.server` ("llama-cpp-python"): `grammar` (GBNF) alone, the whole
  answer's grammar (`grammar_for`, the free text of "auto" included) for calls and a JSON grammar for
  `response_format`: its `/v1/completions` applies a grammar from the first token and ignores (does not
  refuse) `grammar_lazy`, `grammar_triggers`, `preserved_tokens` and `json_schema`.

Every grammar sent matches text, the structural tag (vLLM, SGLang) and GBNF (llama.cpp) alike: a
delimiter the format spells with a special token is a literal there, which the model may also write as
ordinary tokens (random weights do on vLLM 0.32), and a token-aware reading takes no delimiter from
those, so a call the engine enforced would come back unaccepted. The answer to a constraint is
therefore read as text, as the grammar held it (`reads_as_text`). Naming the delimiters as xgrammar
`token` elements instead is not sent: vLLM 0.32 checks a tag without its tokenizer (a token named by
text is refused), and its xgrammar (0.2.8) caches compiled grammars under a key that leaves the token
ids out, so a grammar differing from an earlier one only in a token gets the earlier one's masks, and
vLLM ends that request with "grammar rejected tokens" (a 500) (docs/server.md, "Running it in front of").

A request needs a constraint when its `tool_choice` is "required", a named function or
`allowed_tools`, when `parallel_tool_calls` is false, when a tool is `"strict": true` (then under
"auto" too: the auto grammar leaves text free and holds every call to its tool's schema), or when
`response_format` is `json_object` / `json_schema`. The fields are built once per engine, format,
compiled tools and choice (an LRU of 128, as `Tools` is compiled once per tool list).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..constrain import grammar_for, grammar_triggers
from ..constrain.assemble import reasoning_part
from ..constrain.gbnf import gbnf
from ..constrain.structural_tag import structural_tag
from ..grammar_ir import SPACE, Json, seq
from ..registry import get_format
from ..validation import Tools

__all__ = ["OWNERS", "TEXT_GRAMMAR_KINDS", "UPSTREAM_KINDS", "Constraint", "Unenforceable", "constraint_of",
           "kind_of_models", "reads_as_text", "upstream_fields"]

UPSTREAM_KINDS = ("vllm", "sglang", "llama.cpp", "llama-cpp-python")
# The engines whose grammar, as sent, matches text where a delimiter is a special token: all of them.
TEXT_GRAMMAR_KINDS = frozenset(UPSTREAM_KINDS)
# `owned_by` in an engine's `/v1/models` answer -> its kind (vLLM's ModelCard, SGLang's, llama-server's).
OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}
_OBJECT = {"type": "object"}


class Unenforceable(ValueError):
    """The request asks for a constraint this proxy cannot have the upstream enforce (answered 400)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Constraint:
    """What one request asks the upstream to enforce: its calls (`tools` under `choice`, the
    tool_choice as canonical JSON) or, with `schema` set, a JSON answer (the schema as JSON text)."""

    tools: Tools | None
    choice: str
    parallel: bool
    forced_open: bool
    schema: str | None = None


def constraint_of(body: Mapping[str, Any], tools: Tools | None, forced_open: bool) -> Constraint | None:
    """The constraint a checked request (`checks.check_request`) asks for, None when it asks none
    (tool_choice "auto" or "none", parallel calls allowed, no strict tool, no JSON response format)."""
    choice = body.get("tool_choice") or "auto"
    parallel = body.get("parallel_tool_calls") is not False
    offered = choice != "none" and bool(body.get("tools"))
    strict = offered and any(tool["function"].get("strict") is True for tool in body["tools"])
    calls = offered and (choice != "auto" or not parallel or strict)
    schema = _schema_of(body.get("response_format"))
    if schema is not None and offered:
        raise Unenforceable("response_format asks for a JSON answer while tools are offered: the upstream takes "
                            "one constraint per request, so the proxy cannot enforce both; send tool_choice 'none' "
                            "(or no tools) with response_format, or drop response_format", "response_format")
    if schema is not None:
        return Constraint(None, "none", True, forced_open, json.dumps(schema, sort_keys=True))
    if not calls:
        return None
    return Constraint(tools, json.dumps(choice, sort_keys=True), parallel, forced_open)


def _schema_of(response_format: Any) -> Mapping[str, Any] | None:
    if not response_format or response_format["type"] == "text":
        return None
    if response_format["type"] == "json_object":
        return _OBJECT
    schema: Mapping[str, Any] = response_format["json_schema"]["schema"]
    return schema


def kind_of_models(answer: Any) -> str | None:
    """The engine kind an upstream's `/v1/models` answer names by `owned_by`, None when it names none known."""
    data = answer.get("data") if isinstance(answer, Mapping) else None
    for model in data if isinstance(data, list) else ():
        owner = model.get("owned_by") if isinstance(model, Mapping) else None
        if isinstance(owner, str) and owner.lower() in OWNERS:
            return OWNERS[owner.lower()]
    return None


def reads_as_text(kind: str, constraint: Constraint | None) -> bool:
    """Whether the answer to a request with `constraint`, from a `kind` engine, is read as text even where
    the generated ids arrive: the engine held it to a grammar of text (`TEXT_GRAMMAR_KINDS`), which a
    delimiter spelled by ordinary tokens meets, so it is read as the grammar read it (else a call the
    engine enforced would come back unaccepted). Without a constraint the reading is as configured."""
    return constraint is not None and kind in TEXT_GRAMMAR_KINDS


@lru_cache(maxsize=128)  # a structural tag of many tools can be megabytes (docs/grammars.md): few are kept
def upstream_fields(kind: str, format: str, constraint: Constraint,
                    marker_suffix: str | None = None) -> Mapping[str, Any]:
    """The completions request fields that make the `kind` engine enforce `constraint` for `format`
    (its markers spelled with `marker_suffix`, where they carry one; shared between requests: merge it
    into a body, never change it). `Unenforceable` when the format's grammar cannot express the choice
    (`grammar_for` raises)."""
    if constraint.schema is not None:
        try:
            return _json_fields(kind, format, json.loads(constraint.schema), constraint.forced_open, marker_suffix)
        except ValueError as error:  # GrammarUnsupported: a schema too deep (or a chain of $refs) to write
            raise Unenforceable(f"response_format cannot be enforced for the {format} format: {error}",
                                "response_format") from None
    choice = json.loads(constraint.choice)
    shape = {"tool_choice": choice, "parallel_tool_calls": constraint.parallel,
             "thinking_forced_open": constraint.forced_open, "marker_suffix": marker_suffix}
    try:
        if kind == "llama.cpp":
            return grammar_triggers(format, constraint.tools, **shape)
        if kind == "llama-cpp-python":
            return {"grammar": grammar_for(format, constraint.tools, syntax="gbnf", **shape)}
        tag = grammar_for(format, constraint.tools, syntax="structural_tag", **shape)
        assert isinstance(tag, dict)  # the structural_tag syntax is a dict
    except ValueError as error:  # GrammarUnsupported, or a choice the tools cannot meet
        raise Unenforceable(f"tool_choice {choice!r} cannot be enforced for the {format} format: {error}",
                            "tool_choice") from None
    return _tag_fields(kind, tag)


def _tag_fields(kind: str, tag: dict[str, Any]) -> Mapping[str, Any]:
    if kind == "vllm":
        return {"structured_outputs": {"structural_tag": json.dumps(tag, ensure_ascii=False)}}
    return {"response_format": tag}


def _json_fields(kind: str, format: str, schema: Mapping[str, Any], forced_open: bool,
                 marker_suffix: str | None) -> Mapping[str, Any]:
    """A JSON answer: the engine's own JSON mode for a format without reasoning; else a grammar of
    the format's reasoning (forced when the prompt opened it) and then the JSON, so that what the
    model writes first still reads as reasoning and the JSON as the answer."""
    spec = get_format(format, marker_suffix)
    if kind == "llama-cpp-python":  # no JSON mode on its /v1/completions: the grammar of the answer
        reasoning = (reasoning_part(spec, forced_open), SPACE) if spec.reasoning else ()
        return {"grammar": gbnf(seq(*reasoning, Json(schema), SPACE))}
    if spec.reasoning:
        node = seq(reasoning_part(spec, forced_open), SPACE, Json(schema), SPACE)
        if kind == "llama.cpp":
            return {"grammar": gbnf(node), "grammar_lazy": False, "grammar_triggers": [],
                    "preserved_tokens": list(spec.special)}
        return _tag_fields(kind, structural_tag(node))
    if kind == "vllm":
        return {"structured_outputs": {"json_object": True} if schema == _OBJECT else {"json": schema}}
    if kind == "sglang":
        return {"json_schema": json.dumps(schema, ensure_ascii=False)}
    return {"json_schema": schema}
