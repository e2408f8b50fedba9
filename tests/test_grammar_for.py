"""`streamparse.grammar_for`: the grammars accept what the real templates write, and refuse what the
parser would not accept as the chosen calls; per format with a layout and per syntax, each checked
with the real engine's library (xgrammar for structural tags, llguidance for Lark and for GBNF)."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest
from conftest import ROOT, SHARED
from grammar_engines import gbnf_accepts, lark_accepts, structural_tag_accepts, token_ids

import streamparse
from streamparse.constrain import GrammarUnsupported, grammar_for, grammar_triggers
from streamparse.constrain.lark import lark
from streamparse.grammar_ir import Special
from streamparse.registry import get_format

CASE_FILES = ("cases.json", "cases_new_families.json", "cases_more.json", "cases_wave3.json", "cases_wave4.json")
CASE_FORMATS = {"deepseek_v3_2_dsml": "deepseek_v3_2", "mistral_nemo": "mistral", "mistral_call_id": "mistral",
                "mistral_args": "mistral"}
SYNTAXES = ("structural_tag", "lark", "gbnf")


def _cases() -> list[dict[str, Any]]:
    """Every real render of a format this tree reads (cases_wave4.json also holds formats to come)."""
    known = set(streamparse.formats())
    return [case for name in CASE_FILES if (SHARED / "templates" / name).exists()
            for case in json.loads((SHARED / "templates" / name).read_text(encoding="utf-8"))
            if CASE_FORMATS.get(case["format"], case["format"]) in known]


CASES = _cases()


def _format(case: dict[str, Any]) -> str:
    return CASE_FORMATS.get(case["format"], case["format"])


@cache
def _laid(fmt: str) -> bool:
    """Whether the format has a layout for the case tools (the others say why they have none)."""
    tools = [{"name": "get_weather", "parameters": {"type": "object"}}]
    try:
        grammar_for(fmt, tools)
    except GrammarUnsupported:
        return False
    return True


def accepts(fmt: str, syntax: str, text: str, tools: Any, **options: Any) -> bool:
    """Whether the format's grammar in `syntax`, compiled by its engine, accepts `text` whole."""
    if syntax == "structural_tag":
        tag = grammar_for(fmt, tools, syntax=syntax, **options)
        assert isinstance(tag, dict)
        return structural_tag_accepts(tag, text)
    if syntax == "lark":
        # (Reka Edge's template writes `\u2014`: JSON strings may hold printable escapes.)
        lark = grammar_for(fmt, tools, syntax=syntax, token_ids=token_ids(tuple(get_format(fmt).special)),
                           unicode_escapes=True, **options)
        assert isinstance(lark, str)
        return lark_accepts(lark, text, tuple(get_format(fmt).special))
    gbnf = grammar_for(fmt, tools, syntax=syntax, **options)
    assert isinstance(gbnf, str)
    return gbnf_accepts(gbnf, text)


LAID = [case for case in CASES if _laid(_format(case))]
CALLING = [case for case in LAID if case["expected"]["tool_calls"]]
TALKING = [case for case in LAID if not case["expected"]["tool_calls"]]


def _label(case: dict[str, Any]) -> str:
    return f"{case['template']}:{case['case']}{':forced' if case.get('thinking_forced_open') else ''}"


def _options(case: dict[str, Any]) -> dict[str, Any]:
    return {"thinking_forced_open": bool(case.get("thinking_forced_open"))}


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("case", LAID, ids=_label)
def test_every_real_output_is_accepted_with_auto(case: dict[str, Any], syntax: str) -> None:
    fmt, text = _format(case), case["output"]
    assert accepts(fmt, syntax, text, case["tools"], **_options(case))


def _calls_only(case: dict[str, Any]) -> str:
    """The output without its content (what tool_choice="required" leaves the model to write)."""
    message = streamparse.parse(case["output"], format=_format(case), tools=case["tools"], **_options(case))
    text = case["output"]
    if message.content.strip():
        assert text.count(message.content) == 1, "the content is one piece of the output"
        text = text.replace(message.content, "", 1)
    return text


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("case", CALLING, ids=_label)
def test_the_calls_of_every_real_output_are_accepted_with_required(case: dict[str, Any], syntax: str) -> None:
    fmt, text = _format(case), _calls_only(case)
    assert accepts(fmt, syntax, text, case["tools"], tool_choice="required", **_options(case))


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("case", [c for c in CALLING if c["case"] == "tool_call_single"], ids=_label)
def test_tool_choice_decides_which_calls_are_allowed(case: dict[str, Any], syntax: str) -> None:
    fmt, text, tools, options = _format(case), case["output"], case["tools"], _options(case)
    called = case["expected"]["tool_calls"][0]["name"]
    other = next(tool["function"]["name"] for tool in tools if tool["function"]["name"] != called)
    named = {"type": "function", "function": {"name": called}}
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [named]}}
    assert accepts(fmt, syntax, text, tools, tool_choice=named, **options)
    assert accepts(fmt, syntax, text, tools, tool_choice=allowed, **options)
    assert not accepts(fmt, syntax, text, tools, tool_choice={"type": "function", "function": {"name": other}},
                       **options)
    assert not accepts(fmt, syntax, text, tools, tool_choice="none", **options)


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("case", [c for c in CALLING if c["case"] == "tool_calls_parallel"], ids=_label)
def test_parallel_tool_calls_false_allows_one_call(case: dict[str, Any], syntax: str) -> None:
    fmt, text = _format(case), case["output"]
    assert accepts(fmt, syntax, text, case["tools"], **_options(case))
    assert not accepts(fmt, syntax, text, case["tools"], parallel_tool_calls=False, **_options(case))


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("case", [c for c in TALKING if c["output"].strip()], ids=_label)
def test_content_is_refused_where_a_call_is_required(case: dict[str, Any], syntax: str) -> None:
    fmt = _format(case)
    assert accepts(fmt, syntax, case["output"], case["tools"], tool_choice="none", **_options(case))
    message = streamparse.parse(case["output"], format=fmt, tools=case["tools"], **_options(case))
    if message.content.strip():
        assert not accepts(fmt, syntax, case["output"], case["tools"], tool_choice="required", **_options(case))


# ----------------------------------------------------------------- mutated calls are refused

SINGLE = [c for c in CALLING if c["case"] == "tool_call_single" and '"location": "Paris, France"' in c["output"]]
MUTATIONS = {
    "wrong name": lambda text: text.replace("get_weather", "get_wether", 1),
    "missing required key": lambda text: text.replace('"location": "Paris, France", ', "", 1),
    "wrong type": lambda text: text.replace('"Paris, France"', "48.85", 1),
    "value outside the enum": lambda text: text.replace('"celsius"', '"kelvin"', 1),
    "broken delimiter": lambda text: text.replace('{"location"', '{"location', 1),
}


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("case", SINGLE, ids=_label)
def test_mutated_calls_are_refused(case: dict[str, Any], mutation: str, syntax: str) -> None:
    fmt = _format(case)
    mutated = MUTATIONS[mutation](case["output"])
    assert mutated != case["output"]
    assert not accepts(fmt, syntax, mutated, case["tools"], tool_choice="required", **_options(case))


_BLOCK_TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}]


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("fmt", ["minimax_m2", "deepseek_v3_2", "hy_v3", "deepseek_v4_1", "gigachat3_5"])
def test_calls_in_a_block_and_content_after_it_are_accepted_with_auto(fmt: str, syntax: str) -> None:
    # Whitespace in the block meets content that may begin there too (after a block left open):
    # llguidance's greedy lexer must still end the whitespace at the next call or the closer.
    spec = get_format(fmt)
    calls = [streamparse.ToolCall(f"call_{i}", "get_time", {"a": value}, json.dumps({"a": value}))
             for i, value in enumerate("xy")]
    block = spec.render(streamparse.Message(tool_calls=calls)).strip()
    closer = spec.wrappers[0].closers[0]
    assert block.endswith(closer)
    for text in (block, "Checking.\n" + block, block + "\nDone.", block.removesuffix(closer)):
        assert accepts(fmt, syntax, text, _BLOCK_TOOLS), text
        assert len(streamparse.parse(text, format=fmt, tools=_BLOCK_TOOLS).tool_calls) == 2
    assert not accepts(fmt, syntax, block, _BLOCK_TOOLS, parallel_tool_calls=False)
    assert not accepts(fmt, syntax, block.replace("get_time", "get_tme", 1), _BLOCK_TOOLS)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_every_wrapper_a_format_reads_is_written_each_with_its_own_closer(syntax: str) -> None:
    # DeepSeek V3.2's `function_calls` block and V4's `tool_calls` block; a block is not closed by the other's closer.
    spec = get_format("deepseek_v3_2")
    body = ('\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="a" string="true">x</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n")
    first, second = spec.wrappers
    for wrapper in spec.wrappers:
        assert accepts("deepseek_v3_2", syntax, wrapper.openers[0] + body + wrapper.closers[0], _BLOCK_TOOLS,
                       tool_choice="required")
    assert not accepts("deepseek_v3_2", syntax, first.openers[0] + body + second.closers[0], _BLOCK_TOOLS,
                       tool_choice="required")
    triggers = grammar_triggers("deepseek_v3_2", _BLOCK_TOOLS)["grammar_triggers"]
    assert [trigger["value"] for trigger in triggers] == [first.openers[0], second.openers[0]]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_gigachat3_content_calls_and_the_trailing_marker_are_accepted(syntax: str) -> None:
    # The trailing marker `<|message_sep|>` also begins the call opener: after content, and after
    # the whitespace between calls, a Lark lexeme must not end the output at it.
    opener = get_format("gigachat3").envelopes[0].openers[0]
    call = opener + '{"name": "get_time", "arguments": {"a": "x"}}'
    for text in (call, "Checking." + call, call + "\n" + call, call + call, call + "<|message_sep|>",
                 "Checking.<|message_sep|>", call + "Done."):
        assert accepts("gigachat3", syntax, text, _BLOCK_TOOLS), text
    assert not accepts("gigachat3", syntax, call + "\n" + call, _BLOCK_TOOLS, parallel_tool_calls=False)
    assert not accepts("gigachat3", syntax, "Checking." + call.replace("get_time", "get_tme"), _BLOCK_TOOLS)


def test_a_call_envelope_cut_short_is_refused() -> None:
    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    whole = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    for syntax in SYNTAXES:
        assert accepts("hermes", syntax, whole, tools)
        assert not accepts("hermes", syntax, whole[:-3], tools)
        assert not accepts("hermes", syntax, "Sure. " + whole[:-3], tools)


# ----------------------------------------------------------------- formats without a layout, misuse

def test_a_format_whose_layout_is_not_written_says_why() -> None:
    unlaid = sorted({_format(case) for case in CASES} - {_format(case) for case in LAID})
    for fmt in unlaid:
        with pytest.raises(GrammarUnsupported, match=fmt):
            grammar_for(fmt, [{"name": "f", "parameters": {"type": "object"}}])


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(("tool_choice", "message"), [
    ("sometimes", "tool_choice must be"),
    ({"type": "function", "function": {"name": "get_time"}}, "not among the tools"),
    ({"type": "function", "name": "get_weather"}, "must look like"),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "any", "tools": []}}, "allowed_tools must look like"),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "nope"}}]}}, "not among the tools"),
])
def test_a_bad_tool_choice_is_a_value_error_saying_what_to_do(tool_choice: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        grammar_for("hermes", TOOLS, tool_choice=tool_choice)


def test_required_without_tools_and_unknown_syntax_or_format_are_value_errors() -> None:
    with pytest.raises(ValueError, match="needs tools"):
        grammar_for("hermes", None, tool_choice="required")
    with pytest.raises(ValueError, match="syntax must be one of"):
        grammar_for("hermes", TOOLS, syntax="ebnf")
    with pytest.raises(ValueError, match="unknown format"):
        grammar_for("no_such_format", TOOLS)
    with pytest.raises(TypeError, match="parallel_tool_calls"):
        grammar_for("hermes", TOOLS, parallel_tool_calls="no")  # type: ignore[arg-type]


def test_mistral_special_tokens_need_their_ids_in_lark() -> None:
    with pytest.raises(GrammarUnsupported, match="token_ids"):
        grammar_for("mistral", TOOLS, syntax="lark")
    assert "<[9]>" in str(grammar_for("mistral", TOOLS, syntax="lark", token_ids={"[TOOL_CALLS]": 9, "[THINK]": 34,
                                                                                  "[/THINK]": 35}))


def test_a_special_token_llguidance_would_read_as_several_is_named_by_its_id_in_lark() -> None:
    # `<|close|>call<|sep|>` written bare is read by llguidance as `<|close|>`, a rule `call`, `<|sep|>`.
    assert lark(Special("<|sep|>")) == "start: <|sep|>\n"
    assert lark(Special("<|close|>call<|sep|>"), {"<|close|>call<|sep|>": 7}) == "start: <[7]>\n"
    with pytest.raises(GrammarUnsupported, match="token_ids"):
        lark(Special("<|close|>call<|sep|>"))
    with pytest.raises(GrammarUnsupported, match="token_ids"):
        grammar_for("kimi_k3", TOOLS, syntax="lark")


def test_printable_unicode_escapes_in_json_strings_are_taken_in_lark_when_asked_for() -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris \\u2014 \\u00c9toile"}}</tool_call>'
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 14}}}}}]
    special = tuple(get_format("hermes").special)
    plain = grammar_for("hermes", tools, syntax="lark")
    escaping = grammar_for("hermes", tools, syntax="lark", unicode_escapes=True)
    assert isinstance(plain, str) and isinstance(escaping, str)
    assert "json_allow_general_unicode_escapes" not in plain  # an llguidance before 1.8 refuses the option
    assert not lark_accepts(plain, call, special)
    assert lark_accepts(escaping, call, special)
    assert not lark_accepts(escaping, call.replace("Paris", "Paris!"), special)  # 15 characters
    assert not lark_accepts(escaping, call.replace("\\u2014", "\\ud800"), special)  # a lone surrogate
    assert grammar_for("hermes", tools, unicode_escapes=True) == grammar_for("hermes", tools)


def test_grammar_for_is_exported_and_returns_a_fresh_structural_tag_each_time() -> None:
    first = streamparse.grammar_for("hermes", TOOLS)
    assert isinstance(first, dict) and first["type"] == "structural_tag"
    first["format"] = None
    second = streamparse.grammar_for("hermes", TOOLS)
    assert isinstance(second, dict) and second["format"] is not None


def test_grammar_triggers_are_lazy_words_for_auto_and_the_whole_grammar_otherwise() -> None:
    lazy = grammar_triggers("hermes", TOOLS)
    assert lazy["grammar_lazy"] is True
    assert lazy["grammar_triggers"] == [{"type": 1, "value": "<tool_call>"}]
    assert lazy["preserved_tokens"] == ["<think>", "</think>", "<tool_call>", "</tool_call>"]
    call = '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    assert gbnf_accepts(lazy["grammar"], call)
    assert not gbnf_accepts(lazy["grammar"], "Hello " + call)  # the text before a trigger is not the grammar's
    forced = grammar_triggers("hermes", TOOLS, tool_choice="required")
    assert forced["grammar_lazy"] is False and forced["grammar_triggers"] == []
    assert forced["grammar"] == grammar_for("hermes", TOOLS, tool_choice="required", syntax="gbnf")


_WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
_SYNTAX_NAMES = {"structural_tag": "structural tag", "lark": "Lark", "gbnf": "GBNF"}


def _written(fmt: str) -> str:
    """What the README's grammars column should say of `fmt`: the syntaxes grammar_for writes, and
    whether Lark needs the special tokens' ids."""
    written, needs_ids = [], False
    for syntax in SYNTAXES:
        try:
            grammar_for(fmt, _WEATHER, syntax=syntax)
        except GrammarUnsupported as error:
            if syntax != "lark" or "token_ids" not in str(error):
                continue
            needs_ids = True
        written.append(_SYNTAX_NAMES[syntax])
    return (", ".join(written) or "—") + (" (Lark: `token_ids=`)" if needs_ids else "")


def test_the_readmes_grammars_column_says_what_grammar_for_writes() -> None:
    rows = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        found = re.fullmatch(r"\| `(\w+)` \|.*\| ([^|]+) \|", line.strip())
        if found:
            rows[found.group(1)] = found.group(2).strip()
    from streamparse.families import FAMILIES

    assert {spec.name for spec in FAMILIES} <= rows.keys()
    assert {spec.name: rows[spec.name] for spec in FAMILIES} == {spec.name: _written(spec.name) for spec in FAMILIES}
