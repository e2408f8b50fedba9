"""Grammars from the format declarations: constrained decoding that writes only what the parser reads.

A use above the core (STYLE §9): it imports the core (the format declarations, the body kinds'
layouts in the grammar IR of `streamparse.grammar_ir`) and nothing of `serve` or `batch`.
`grammar_for` assembles a format's whole output (`assemble.py`) and writes it in one syntax:
an xgrammar structural tag (`structural_tag.py`), a Lark grammar for llguidance (`lark.py`) or a
llama.cpp GBNF grammar (`gbnf.py`, with `grammar_triggers` for its request fields).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ..grammar_ir import SPACE, GrammarUnsupported, seq
from ..registry import get_format
from ..spec import FormatLike, FormatSpec
from ..validation import Tools
from .assemble import Choice, call_openers, choice_of
from .gbnf import gbnf
from .lark import lark
from .output import output_grammar
from .structural_tag import structural_tag

SYNTAXES = ("structural_tag", "lark", "gbnf")
WORD_TRIGGER = 1  # llama.cpp's COMMON_GRAMMAR_TRIGGER_TYPE_WORD, as its server reads `grammar_triggers`

__all__ = ["SYNTAXES", "GrammarUnsupported", "grammar_for", "grammar_triggers"]


def _tools(tools: Sequence[Mapping[str, Any]] | Tools | None) -> Tools | None:
    if tools is None:
        return None
    return tools if isinstance(tools, Tools) else Tools(tools)


def grammar_for(format: FormatLike, tools: Sequence[Mapping[str, Any]] | Tools | None = None, *,
                tool_choice: str | Mapping[str, Any] = "auto", parallel_tool_calls: bool = True,
                thinking_forced_open: bool = False, syntax: str = "structural_tag",
                token_ids: Mapping[str, int] | None = None, unicode_escapes: bool = False,
                marker_suffix: str | None = None) -> dict[str, Any] | str:
    """The grammar of what the model of `format` may write, its calls limited by `tool_choice`.

    `syntax`: "structural_tag" (a dict, xgrammar's structural tag for vLLM and SGLang), "lark" (a
    str for llguidance) or "gbnf" (a str for llama.cpp; `grammar_triggers` gives the request fields
    that go with it). `token_ids`: for "lark", the ids of the format's special tokens whose text is
    not in angle brackets (Mistral's `[TOOL_CALLS]`), which Lark can only name by id. `unicode_escapes`:
    for "lark", let JSON strings hold a `\\uXXXX` escape of a printable character (`"\\u2014"`, valid
    JSON that llguidance refuses unless told: its `json_allow_general_unicode_escapes`, llguidance 1.8
    and later; an older llguidance refuses the grammar); the other syntaxes always take them.
    `marker_suffix`: for a format whose markers carry a checkpoint's suffix (`hy_v4`, `hy_v3`), the
    markers spelled with it (`:6124c78e`; the parser's option of that name).
    Raises `ValueError` for an unknown format, syntax or tool, or a bad
    `tool_choice`; `GrammarUnsupported` (a `ValueError`) where the format's layout has no grammar."""
    if syntax not in SYNTAXES:
        raise ValueError(f"syntax must be one of {', '.join(SYNTAXES)}; got {syntax!r}")
    spec = get_format(format, marker_suffix)
    toolset = _tools(tools)
    choice = choice_of(tool_choice, toolset, parallel_tool_calls)
    ids = tuple(sorted(token_ids.items())) if token_ids else ()
    written = _written(spec, toolset, choice, bool(thinking_forced_open), syntax, ids,
                       bool(unicode_escapes) and syntax == "lark")
    return json.loads(written) if syntax == "structural_tag" else written


@lru_cache(maxsize=256)
def _written(spec: FormatSpec, tools: Tools | None, choice: Choice, thinking_forced_open: bool, syntax: str,
             token_ids: tuple[tuple[str, int], ...] = (), unicode_escapes: bool = False) -> str:
    """The grammar text, built once per format (the declaration itself, so that a registered format
    replaced under its name is written again), tool list, choice and syntax (a structural tag as JSON)."""
    node = output_grammar(spec, tools, choice, thinking_forced_open).whole
    if syntax == "structural_tag":
        return json.dumps(structural_tag(node), ensure_ascii=False)
    if syntax == "lark":
        return lark(node, dict(token_ids), unicode_escapes)
    return gbnf(node)


def grammar_triggers(format: FormatLike, tools: Sequence[Mapping[str, Any]] | Tools | None = None, *,
                     tool_choice: str | Mapping[str, Any] = "auto", parallel_tool_calls: bool = True,
                     thinking_forced_open: bool = False, marker_suffix: str | None = None) -> dict[str, Any]:
    """llama.cpp server's request fields for the format's GBNF grammar: `grammar`, `grammar_lazy`,
    `grammar_triggers` (`{"type": 1, "value": WORD}`: a word trigger) and `preserved_tokens`.

    With calls optional ("auto", or allowed_tools in auto mode) the grammar is lazy: the text before a
    call is free, and the grammar, rooted at the call opener, applies from the first trigger word
    (the wrapper's or envelope's opener). Otherwise it is the whole-output grammar `grammar_for`
    gives, applied from the first token, with no triggers. `marker_suffix` as for `grammar_for`."""
    spec = get_format(format, marker_suffix)
    toolset = _tools(tools)
    choice = choice_of(tool_choice, toolset, parallel_tool_calls)
    output = output_grammar(spec, toolset, choice, bool(thinking_forced_open))
    preserved = list(spec.special)
    if output.calls is None or not output.calls_optional:
        grammar = _written(spec, toolset, choice, bool(thinking_forced_open), "gbnf")
        return {"grammar": grammar, "grammar_lazy": False, "grammar_triggers": [], "preserved_tokens": preserved}
    words = call_openers(spec)
    return {"grammar": gbnf(seq(output.calls, SPACE)), "grammar_lazy": True,
            "grammar_triggers": [{"type": WORD_TRIGGER, "value": word} for word in words],
            "preserved_tokens": preserved}
