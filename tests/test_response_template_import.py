"""`streamparse.format_from_response_template(template)` against the reference: transformers' own
`parse_response` with the same template, on the real-template cases of the family the template was
written for (bench/templates/*.json, written for every family the benchmark reads; the four formats
`streamparse.response_template` exports). Where the two part, the difference is one docs/formats.md
lists, checked here as such:
- CONTENT_KEPT: transformers keeps only the last stretch of a `content` field without `repeats`, and
  drops text outside every field where the content field has an `open`; streamparse keeps all content
  (nothing lost), the field's delimiters dropped, and the whitespace between stretches that transformers'
  `text` parser strips from each. Checked: transformers with the content field as
  streamparse reads it (the implicit field, `repeats`, joined, its delimiters closing stretches) agrees.
- RAISES: transformers raises on a body its content parser cannot read; streamparse rejects the call.
- SCHEMA: streamparse checks calls against the tools' schemas (transformers does not): a call it
  rejects `schema_violation` is the one transformers returns (checked without tools).
- BOUNDED: a lookahead opener's unbounded repetitions are tried at most `LOOKAHEAD_REPEAT` times (what is
  held back is bounded); a call whose name is longer is content, its text kept, where transformers reads a
  call (no real case has one: checked on written outputs).
Not met in the cases (stated by their own tests below): a call field opened by a pattern alone is looked
for only where a field may begin, its unbounded repetitions capped; transformers also searches the text
outside every field, which it drops and streamparse keeps as content.
Then: any chunking streams to the final parse (hypothesis), the round trip through the export, grammars,
and what is refused, with the construct named."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, assert_nothing_lost, assert_stream_matches, fold, run_stream, shared_cases
from corpus import CASE_FORMATS
from grammar_engines import gbnf_accepts, lark_accepts, structural_tag_accepts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_properties import TOOLS, generate
from transformers.utils.chat_parsing import parse_response

import streamparse
from streamparse.bodies.template_layout import plain_ways
from streamparse.constrain import GrammarUnsupported, grammar_for
from streamparse.spec import FormatSpec
from streamparse.template_import import LOOKAHEAD_REPEAT, _bounded, format_from_response_template

BENCH = ROOT / "bench" / "templates"
EXPORTED = ("hermes", "longcat", "command_r7b", "cohere_command")


def _templates() -> list[tuple[str, str, dict[str, Any]]]:
    found = [(f"bench:{path.stem}", path.stem, json.loads(path.read_text())) for path in sorted(BENCH.glob("*.json"))]
    return found + [(f"export:{fmt}", fmt, json.loads(json.dumps(streamparse.response_template(fmt))))
                    for fmt in EXPORTED]


TEMPLATES = _templates()
IMPORTED = TEMPLATES  # every stored template imports (`test_every_stored_template_imports`)


def cases(fmt: str) -> list[dict[str, Any]]:
    """The real-template cases of a format, those the cases files file under another name too (`mistral_args`)."""
    return [case for name in (fmt, *(n for n, f in CASE_FORMATS.items() if f == fmt)) for case in shared_cases(name)]


CASES = [(label, template, case) for label, fmt, template in IMPORTED for case in cases(fmt)]


def _spec(template: dict[str, Any]) -> FormatSpec:
    return format_from_response_template(template, name="imported")


def _prefix(template: dict[str, Any], case: dict[str, Any]) -> str:
    """The prompt transformers reads: the generation prompt for the exported templates (their anchor takes its
    end); for a template anchored at its model's assistant header, the reasoning opener a forced-open prompt
    ends with (the cases' prompts are of several chat templates, not all of them writing that header)."""
    if "start_anchor_pattern" in template:
        return str(case["generation_prompt"] or "")
    opener = template["fields"].get("reasoning_content", {}).get("open")
    return opener if case["thinking_forced_open"] and isinstance(opener, str) else ""


def theirs(output: str, template: dict[str, Any], prefix: str, tools: Any) -> tuple[str, str, list[Any]] | None:
    try:
        message = parse_response(output, template, prefix=prefix, tools=tools)
    except ValueError:
        return None
    calls = [(call["function"]["name"], call["function"]["arguments"]) for call in message.get("tool_calls", [])]
    return message.get("content") or "", message.get("reasoning_content") or "", calls


def ours(message: streamparse.Message) -> tuple[str, str, list[Any]]:
    return message.content, message.reasoning, [(call.name, call.arguments) for call in message.tool_calls]


def as_streamparse_keeps_content(template: dict[str, Any]) -> dict[str, Any]:
    """The template with its content field read as streamparse reads it: every stretch kept, joined, the
    field's own delimiters closing stretches (dropped)."""
    changed = json.loads(json.dumps(template))
    field = changed["fields"]["content"]
    delimiters = [*_listed(field.pop("open", [])), *_listed(field.pop("close", []))]
    patterns = [pattern for pattern in (field.pop("open_pattern", None), field.pop("close_pattern", None)) if pattern]
    field.update({"repeats": True, "join": ""})
    if delimiters or patterns:
        alternatives = [*(json.dumps(d)[1:-1].replace("|", "\\|").replace("[", "\\[") for d in delimiters)]
        field["close_pattern"] = "|".join(alternatives + patterns)
    return changed


def _spaceless(read: tuple[str, str, list[Any]]) -> tuple[str, str, list[Any]]:
    """Content and reasoning without whitespace: transformers strips each stretch it joins (`text`)."""
    return "".join(read[0].split()), "".join(read[1].split()), read[2]


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def difference(template: dict[str, Any], case: dict[str, Any]) -> str:
    """'' where transformers and the import agree on the case, else the listed difference that explains it."""
    output, tools, prefix = case["output"], case["tools"], _prefix(template, case)
    spec = _spec(template)
    message = streamparse.parse(output, spec, tools=tools, thinking_forced_open=case["thinking_forced_open"])
    reference = theirs(output, template, prefix, tools)
    if reference == ours(message) and not message.rejected:
        return ""
    if reference is None:
        assert message.rejected and not message.tool_calls, (output, message)
        return "RAISES"
    if any(r.status == "schema_violation" for r in message.rejected):
        untyped = streamparse.parse(output, spec, thinking_forced_open=case["thinking_forced_open"])
        assert not untyped.rejected and ours(untyped)[2] == theirs(output, template, prefix, None)[2]  # type: ignore[index]
        return "SCHEMA"
    assert not message.rejected, message.rejected
    kept = theirs(output, as_streamparse_keeps_content(template), prefix, tools)
    assert kept is not None and _spaceless(kept) == _spaceless(ours(message)), (output, reference, kept, ours(message))
    return "CONTENT_KEPT"


@functools.cache
def case_difference(index: int) -> str:
    _, template, case = CASES[index]
    return difference(template, case)


@pytest.mark.parametrize("index", range(len(CASES)),
                         ids=[f"{label}-{c['template']}-{c['case']}" for label, _, c in CASES])
def test_the_import_reads_the_cases_as_transformers_does_or_as_a_listed_difference(index: int) -> None:
    assert case_difference(index) in ("", "RAISES", "SCHEMA", "CONTENT_KEPT")


GPT_OSS = json.loads((BENCH / "gpt_oss.json").read_text())


def _expected(case: dict[str, Any]) -> tuple[str, str, list[Any]]:
    want = case["expected"]
    return (want["content"] or "", want["reasoning"] or "",
            [(call["name"], call["arguments"]) for call in want["tool_calls"]])


@pytest.mark.parametrize("case", shared_cases("gpt_oss"), ids=lambda case: case["case"])
def test_openers_that_require_the_start_anchor_miss_the_first_message_in_transformers_too(
        case: dict[str, Any]) -> None:
    """The stored gpt_oss template writes the start anchor `<|start|>assistant` optional before each opener,
    as Muse Glimmer's does: the generation prompt writes the anchor before the first message, and
    transformers keeps only the prompt's text after its last anchor (here none). Required there, the first
    message's opener is never whole in what transformers reads: no field holds that message and it is
    dropped; streamparse reads that template as transformers does, the message kept as content
    (CONTENT_KEPT). Both read the stored template exactly (the case checks above)."""
    prompt, output = case["generation_prompt"], case["output"]
    assert prompt.endswith(GPT_OSS["start_anchor"]) and not output.startswith(GPT_OSS["start_anchor"])
    required = _anchor_required(GPT_OSS)
    assert theirs(output, required, prompt, case["tools"]) != _expected(case)
    assert difference(required, case) == "CONTENT_KEPT"
    assert theirs(GPT_OSS["start_anchor"] + output, required, "", case["tools"]) == _expected(case)
    assert theirs(output, GPT_OSS, prompt, case["tools"]) == _expected(case)
    assert difference(GPT_OSS, case) == ""


def _anchor_required(template: dict[str, Any]) -> dict[str, Any]:
    """The template with the optional start anchor before each opener required (`<\\|start\\|>assistant…`)."""
    changed = json.loads(json.dumps(template))
    anchor = re.escape(template["start_anchor"])
    for field in changed["fields"].values():
        pattern = field["open_pattern"]
        assert pattern.startswith(f"(?:{anchor})?"), pattern
        field["open_pattern"] = anchor + pattern[len(anchor) + 5:]
    return changed


@pytest.mark.parametrize("output", ["  to=get_weather:{\"city\": \"Paris\"}<end>", " to=get_weather:{}<end>",
                                    "\n to=get_weather:{}", "  tone", " to=", "to=get_weather:{}<end>", "\n\n"])
def test_an_opener_that_begins_with_whitespace_opens_at_the_start_of_the_output(output: str) -> None:
    # transformers matches ` to=…` at the output's first character (gpt-oss's first call follows the prompt's
    # `<|start|>assistant`); the whitespace before the opener is framing, and so is whitespace before text.
    template = _field(open_pattern=r" to=(?P<name>\w+):", close="<end>", content="json", repeats=True,
                      transform={"function": {"name": "{name}", "arguments": "{content}"}})
    spec, want = _spec(template), theirs(output, template, "", None)
    assert want is not None
    assert ours(streamparse.parse(output, spec)) == (want[0].strip(), *want[1:])
    for cut in range(len(output) + 1):
        for chunks in ([output[:cut], output[cut:]], list(output)):
            folded, message = run_stream(chunks, format=spec)
            assert ours(message) == ours(streamparse.parse(output, spec)), chunks
            assert_stream_matches(folded, message)
            assert_nothing_lost(output, message, spec)


def test_the_templates_of_the_families_with_cases_import_and_most_cases_are_exact() -> None:
    exact = sum(case_difference(index) == "" for index in range(len(CASES)))
    assert len({label for label, _, _ in CASES}) >= 25
    assert exact >= 0.85 * len(CASES), (exact, len(CASES))


def test_the_exported_templates_read_their_cases_exactly() -> None:
    exported = [index for index, (label, _, _) in enumerate(CASES) if label.startswith("export:")]
    assert len(exported) == sum(len(shared_cases(fmt)) for fmt in EXPORTED)
    for index in exported:
        assert case_difference(index) == "", CASES[index][0]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_chunking_streams_to_the_final_parse(data: st.DataObject) -> None:
    label, template, case = data.draw(st.sampled_from(CASES))
    spec = _spec(template)
    text = case["output"]
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=12)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    options = {"format": spec, "tools": case["tools"], "thinking_forced_open": case["thinking_forced_open"]}
    folded, message = run_stream(chunks, **options)
    whole = streamparse.parse(text, **options)  # type: ignore[arg-type]
    assert ours(message) == ours(whole) and message.rejected == whole.rejected, label
    assert_stream_matches(folded, message)
    assert_nothing_lost(text, message, spec)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", EXPORTED)
def test_the_round_trip_through_the_export_parses_as_the_declared_format(fmt: str) -> None:
    spec = format_from_response_template(streamparse.response_template(fmt))
    for case in shared_cases(fmt):
        options = {"tools": case["tools"], "thinking_forced_open": case["thinking_forced_open"]}
        assert ours(streamparse.parse(case["output"], spec, **options)) \
            == ours(streamparse.parse(case["output"], fmt, **options)), case["case"]


# ----------------------------------------------------------------- grammars

SYNTAXES = ("structural_tag", "lark", "gbnf")
GRAMMARED = IMPORTED


def grammar_accepts(spec: FormatSpec, syntax: str, text: str, tools: Any, **options: Any) -> bool:
    grammar = grammar_for(spec, tools, syntax=syntax, **({"unicode_escapes": True} if syntax == "lark" else {}),
                          **options)
    if syntax == "structural_tag":
        assert isinstance(grammar, dict)
        return structural_tag_accepts(grammar, text)
    assert isinstance(grammar, str)
    return lark_accepts(grammar, text, ()) if syntax == "lark" else gbnf_accepts(grammar, text)


def _calling(fmt: str, spec: FormatSpec) -> list[tuple[dict[str, Any], streamparse.Message]]:
    """The real cases whose calls the imported format reads, each with its parse."""
    found = []
    for case in cases(fmt):
        message = streamparse.parse(case["output"], spec, tools=case["tools"],
                                    thinking_forced_open=case["thinking_forced_open"])
        if message.tool_calls and not message.rejected:
            found.append((case, message))
    return found


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(("label", "fmt", "template"), GRAMMARED, ids=[label for label, _, _ in GRAMMARED])
def test_the_grammars_of_an_imported_format_accept_its_real_calls(label: str, fmt: str, template: dict[str, Any],
                                                                  syntax: str) -> None:
    """Every real output whose calls the import reads: whole with "auto", its calls alone (the content left
    out, where it is one piece) with "required"; and a call of a tool the grammar was not asked for is refused."""
    spec = _spec(template)
    closers = {closer for envelope in spec.envelopes for closer in getattr(envelope.body, "closers", ())}
    for case, message in _calling(fmt, spec):
        options = {"thinking_forced_open": case["thinking_forced_open"]}
        # A call closer that is the stop token the case cut off (gpt-oss's `<|call|>`): the grammar asks for it.
        text = case["output"] + (case["stop"] if case["stop"] in closers else "")
        assert grammar_accepts(spec, syntax, text, case["tools"], **options), case["case"]
        if message.content.strip():
            if text.count(message.content) != 1:
                continue  # (content on both sides of the calls: a wrapper the template does not read)
            text = text.replace(message.content, "", 1)
        assert grammar_accepts(spec, syntax, text, case["tools"], tool_choice="required", **options), case["case"]
        called, raw = message.tool_calls[0].name, message.tool_calls[0].raw
        assert raw and raw in text, (case["case"], raw)
        broken = text.replace(raw, raw.replace(called, called[:-1] + "_"), 1)  # the name wherever the call writes it
        assert not grammar_accepts(spec, syntax, broken, case["tools"], tool_choice="required", **options), case["case"]
        others = [tool["function"]["name"] for tool in case["tools"] if tool["function"]["name"] != called]
        if others and len(message.tool_calls) == 1:
            named = {"type": "function", "function": {"name": others[0]}}
            assert not grammar_accepts(spec, syntax, text, case["tools"], tool_choice=named, **options), case["case"]


def test_every_imported_format_with_real_calls_has_a_grammar() -> None:
    with_calls = [label for label, fmt, template in GRAMMARED if _calling(fmt, _spec(template))]
    assert len(with_calls) >= 20, with_calls
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for _, _, template in GRAMMARED:
        grammar_for(_spec(template), tools, tool_choice="required")  # none raises GrammarUnsupported


# The properties' tools without a string length bound: a raw text or Python string value is not bounded by
# the grammar (docs/grammars.md), and the tools check would reject a long one.
UNBOUNDED_TOOLS = json.loads(json.dumps(TOOLS).replace(', "maxLength": 12', ""))
assert UNBOUNDED_TOOLS != TOOLS


NAMED = {"type": "function", "function": {"name": "get_weather"}}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(label=st.sampled_from([label for label, _, _ in GRAMMARED]),
       choice=st.sampled_from(["auto", "required", "named"]), data=st.data())
def test_a_grammar_of_an_imported_format_writes_what_it_parses(label: str, choice: str, data: st.DataObject) -> None:
    """Text generated token by token from the Lark grammar parses into accepted calls: one at least when
    calls are required, exactly one of the named tool when one is named."""
    spec = _spec(next(template for lb, _, template in GRAMMARED if lb == label))
    text = generate(spec, NAMED if choice == "named" else choice, data, UNBOUNDED_TOOLS)  # type: ignore[arg-type]
    if text is None:
        return
    message = streamparse.parse(text, spec, tools=UNBOUNDED_TOOLS)
    assert message.rejected == [], (label, text, message.rejected)
    assert choice == "auto" or message.tool_calls, (label, text)
    assert choice != "named" or [call.name for call in message.tool_calls] == ["get_weather"], (label, text)


def _field(**field: Any) -> dict[str, Any]:
    return {"version": 1, "start_anchor": "A:", "fields": {"content": {"content": "text"}, "tool_calls": field}}


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}, "required": ["city"]}}}]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_kv_lines_calls_are_written_one_parameter_a_line(syntax: str) -> None:
    spec = _spec(_field(open_pattern=r"<call name=(?P<name>\w+)>", close="</call>", content="kv-lines",
                        transform={"function": {"name": "{name}", "arguments": "{content}"}}))
    text = "<call name=get_weather>\ncity: Paris, France\ndays: 3\n</call>"
    message = streamparse.parse(text, spec, tools=WEATHER)
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("get_weather",
                                                                    {"city": "Paris, France", "days": 3})]
    assert grammar_accepts(spec, syntax, text, WEATHER, tool_choice="required")
    assert not grammar_accepts(spec, syntax, text.replace("days: 3", "days: three"), WEATHER, tool_choice="required")
    assert not grammar_accepts(spec, syntax, text.replace("city: Paris, France\n", ""), WEATHER,
                               tool_choice="required")  # a required key left out


@pytest.mark.parametrize(("pattern", "ways"), [
    (r"<p>(?|<!\[CDATA\[(?P<v>.*?)\]\]>|(?P<v>.*?))</p>", (r"<p>(?:<!\[CDATA\[(?P<v>.*?)\]\]>)</p>",
                                                          r"<p>(?:(?P<v>.*?))</p>")),
    (r"a(?|b|c(?|d|e)|[|)](?|f))?z", ("a(?:b)?z", "a(?:c(?:d))?z", "a(?:c(?:e))?z", "a(?:[|)](?:f))?z")),
    (r"(?|x|y)(?|1|2)", ("(?:x)(?:1)", "(?:x)(?:2)", "(?:y)(?:1)", "(?:y)(?:2)")),
    (r"[(?|a)]\(?|b)", (r"[(?|a)]\(?|b)",)),  # in a class, escaped: no branch reset
])
def test_a_branch_reset_is_written_one_alternative_at_a_time(pattern: str, ways: tuple[str, ...]) -> None:
    assert plain_ways(pattern, "field") == ways


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_tag_pattern_with_a_branch_reset_writes_each_alternative_with_its_own_groups(syntax: str) -> None:
    # MiniMax-CPM5's spelling: a value in CDATA, or raw; each alternative names the same `value` group.
    spec = _spec(_field(open_pattern=r"<c name=(?P<name>\w+)>", close="</c>", content="xml-inline", content_args={
        "tag_pattern": r"<p name=(?P<key>\w+)>(?|<!\[CDATA\[(?P<value>.*?)\]\]>\s*|(?P<value>.*?))</p>"},
        transform={"function": {"name": "{name}", "arguments": "{content}"}}))
    text = "<c name=get_weather><p name=city><![CDATA[a </p> b]]>\n</p><p name=days>3</p></c>"
    message = streamparse.parse(text, spec, tools=WEATHER)
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("get_weather", {"city": "a </p> b", "days": 3})]
    assert grammar_accepts(spec, syntax, text, WEATHER, tool_choice="required")
    cdata_days = text.replace(">3<", "><![CDATA[3]]><")
    assert streamparse.parse(cdata_days, spec, tools=WEATHER).tool_calls[0].arguments["days"] == 3
    assert grammar_accepts(spec, syntax, cdata_days, WEATHER, tool_choice="required")
    for broken in (text.replace(">3<", "><![CDATA[3]]>x<"),  # neither way: an integer, or in CDATA
                   text.replace("]]>\n</p>", "]]>\nx</p>")):  # in CDATA, but text after it
        assert not grammar_accepts(spec, syntax, broken, WEATHER, tool_choice="required"), broken


MINIMAX_M1 = json.loads((BENCH / "minimax_m1.json").read_text())


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_json_before_a_closer_it_could_hold_is_written_on_one_line(syntax: str) -> None:
    # MiniMax M1's call ends at `}⏎`: a JSON value written with a line break in its whitespace can hold that
    # (`{"city": "Paris"}⏎}⏎` ends the call after "Paris"}); one whose whitespace is spaces cannot.
    spec = _spec(MINIMAX_M1)
    text = '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_calls>'
    message = streamparse.parse(text, spec, tools=WEATHER)
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("get_weather", {"city": "Paris", "days": 3})]
    assert grammar_accepts(spec, syntax, text, WEATHER, tool_choice="required")
    assert grammar_accepts(spec, syntax, text.replace(", ", ",").replace(": ", ":"), WEATHER, tool_choice="required")
    cut = text.replace("3}}", "3}\n}")
    assert streamparse.parse(cut, spec, tools=WEATHER).rejected  # the call ends inside its arguments
    assert not grammar_accepts(spec, syntax, cut, WEATHER, tool_choice="required")
    assert not grammar_accepts(spec, syntax, text.replace(', "days"', ',\n"days"'), WEATHER, tool_choice="required")


# ----------------------------------------------------------------- openers the real cases leave untried

PYTHONIC = json.loads((BENCH / "pythonic.json").read_text())
APRIEL = json.loads((BENCH / "apriel.json").read_text())
CALLS = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'
WRITTEN = [  # (template, output, the difference from transformers' reading)
    # pythonic: an opener that looks ahead (`\s*(?=\[NAME\()`): found where the lookahead matches, anywhere
    (PYTHONIC, "[get_weather(city='Paris', days=3)]", ""),
    (PYTHONIC, "Sure, checking.\n  [get_weather(city='Paris'), get_weather(city='Rome', metric=True)]\n", ""),
    (PYTHONIC, "See [1], [a](b) and [x, y].\n[get_weather(city='Paris')]", ""),  # brackets the lookahead refuses
    (PYTHONIC, "A list [1, 2] and a call-like [f (x)] are text.", ""),
    (PYTHONIC, "[ get_weather(city='Paris')]", ""),  # a space after the bracket: the lookahead refuses it
    (PYTHONIC, "<think>maybe [get_weather(city='Oslo')]?</think>[get_weather(city='Paris')]", ""),
    (PYTHONIC, "[get_weather(city='Paris')] and then words", "RAISES"),  # the field runs to the end
    (PYTHONIC, "Cut off: [get_weather(city='Par", "RAISES"),
    (PYTHONIC, "Ends at the trigger [", ""),
    # apriel: reasoning opened at `\A`, where the output starts, unless a call opens there
    (APRIEL, "Thinking.\n[BEGIN FINAL RESPONSE]\nThe answer.", ""),
    (APRIEL, "Only thinking, never closed.", ""),
    (APRIEL, "[BEGIN FINAL RESPONSE]The answer.", ""),
    (APRIEL, CALLS, ""),
    (APRIEL, " \n" + CALLS + "\nAfter the call.", ""),
    (APRIEL, "Thinking of " + CALLS + " still.\n[BEGIN FINAL RESPONSE]\n" + CALLS, ""),  # reasoning keeps it
    (APRIEL, "<tool_calls", ""),  # an opener cut off: the reasoning's text
    (APRIEL, "", ""),
]


@pytest.mark.parametrize(("template", "output", "kind"), WRITTEN,
                         ids=[f"{'pythonic' if t is PYTHONIC else 'apriel'}-{n}" for n, (t, _, _) in
                              enumerate(WRITTEN)])
def test_openers_at_the_start_and_ahead_read_as_transformers_reads_them_under_any_chunking(
        template: dict[str, Any], output: str, kind: str) -> None:
    case = {"output": output, "tools": WEATHER, "thinking_forced_open": False, "generation_prompt": ""}
    assert difference(template, case) == kind
    spec = _spec(template)
    whole = streamparse.parse(output, spec, tools=WEATHER)
    for cut in range(len(output) + 1):
        for chunks in ([output[:cut], output[cut:]], [*output[:cut], output[cut:]]):
            folded, message = run_stream(chunks, format=spec, tools=WEATHER)
            assert ours(message) == ours(whole) and message.rejected == whole.rejected, chunks
            assert_stream_matches(folded, message)
    assert_nothing_lost(output, whole, spec)  # type: ignore[arg-type]


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(("template", "text", "choice", "accepted"), [
    (PYTHONIC, "Sure.\n[get_weather(city='Paris', days=3)]", "auto", True),
    (PYTHONIC, "\n[get_weather(city='Paris'), get_weather(city='Rome')]", "required", True),
    (PYTHONIC, "[get_weathe_(city='Paris')]", "required", False),
    (PYTHONIC, "[ get_weather(city='Paris')]", "required", False),  # content: the lookahead refuses the space
    (PYTHONIC, "[get_weather(city='Paris')] and words", "auto", False),  # the list ends the output
    (APRIEL, "\n" + CALLS + "\n", "auto", True),  # calls where the output starts: no reasoning
    (APRIEL, "Thinking.\n[BEGIN FINAL RESPONSE]\n" + CALLS, "required", True),
    (APRIEL, "Thinking.\n[BEGIN FINAL RESPONSE]\nThe answer.", "auto", True),
    (APRIEL, "Content first " + CALLS, "auto", False),  # the reasoning's text, its closer never written
], ids=lambda value: "" if not isinstance(value, dict) else "pythonic" if value is PYTHONIC else "apriel")
def test_the_grammars_of_openers_at_the_start_and_ahead(template: dict[str, Any], text: str, choice: str,
                                                        accepted: bool, syntax: str) -> None:
    assert grammar_accepts(_spec(template), syntax, text, WEATHER, tool_choice=choice) == accepted


def test_a_lookahead_opener_holds_back_a_bounded_text() -> None:
    # `[\w.]*` in the lookahead is tried at most LOOKAHEAD_REPEAT times: a longer name is content (BOUNDED),
    # where transformers, holding back without bound, reads a call.
    spec = _spec(PYTHONIC)
    for length, called in ((LOOKAHEAD_REPEAT + 1, True), (LOOKAHEAD_REPEAT + 2, False)):
        output = f"[{'n' * length}(a=1)]"
        assert [name for name, _ in theirs(output, PYTHONIC, "", None)[2]] == ["n" * length]  # type: ignore[index]
        message = streamparse.parse(output, spec)
        assert [call.name for call in message.tool_calls] == (["n" * length] if called else [])
        assert called or message.content == output
    sent = fold(streamparse.StreamParser(spec).feed("text [" + "n" * 10_000)).content
    assert sent == "text [" + "n" * 10_000  # before the output ends: nothing held back past the bound


@pytest.mark.parametrize(("pattern", "bounded"), [
    (r"\[[A-Za-z_][\w.]*\(", r"\[[A-Za-z_][\w.]{0,128}\("),
    (r"a+b*?c{2,}d{1,3}+e++f?+", r"a{1,128}b{0,128}?c{2,128}d{1,3}+e{1,128}+f?+"),  # lazy, possessive kept
    (r"[]*+]x*[^]*]y+[\]*](?:ab)*\p{L}+", r"[]*+]x{0,128}[^]*]y{1,128}[\]*](?:ab){0,128}\p{L}{1,128}"),
    (r"(?P<n>\w+)|(?=a*)\*\+", r"(?P<n>\w{1,128})|(?=a{0,128})\*\+"),
])
def test_a_lookahead_is_bounded_repetition_by_repetition(pattern: str, bounded: str) -> None:
    assert _bounded(pattern) == bounded


@pytest.mark.parametrize(("field", "construct"), [
    ({"open_pattern": "<c (?P<name>\\w+)>.", "close": "</c>", "content": "json",
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, r"any character \('\.'\)"),
    ({"open": "<c>", "close": "</c>", "content": "json", "content_args": {"string_delims": [["'", "'"]]},
      "transform": {"function": {"name": "{content.name}", "arguments": "{content.arguments}"}}}, "string_delims"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close": "</c>", "content": "text",
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, "text content holds no arguments"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close": "</c>", "content": "kv-lines",
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, "kv-lines value of type object"),
    ({"open_pattern": "<c (?P<name>[a-z]+)>", "close": "</c>", "content": "json",
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, "'get_weather' cannot be written"),
    ({"open": "<c>", "close": "</c>", "content": "json",
      "transform": {"function": {"name": "python", "arguments": "{content}"}}}, "writes 'python' itself"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close": "</c>", "content": "xml-inline", "content_args": {
        "tag_pattern": "<(?P<key>\\p{L}+)>(?P<value>.*?)</p>"},
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, "one Python's re cannot read"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close": "</c>", "content": "xml-inline", "content_args": {
        "tag_pattern": "<(?P<key>\\w+)>(?|(?P<value>\\d)|x(?P<value>.*?)y)*</p>"},
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, "a repeated branch reset"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close": "</c>", "content": "xml-inline", "content_args": {
        "tag_pattern": "<(?P<key>\\w+)>(?|a|b)(?|a|b)(?|a|b)(?|a|b)(?P<value>.*?)</p>"},
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, "make more than 8 ways"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close_pattern": "\\} ", "content": "json",
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, r"the closer '\} ' is text JSON"),
    ({"open_pattern": "<c (?P<name>\\w+)>", "close_pattern": "(?:\\n\\s*)?\\}\\n", "content": "json",
      "transform": {"function": {"name": "{name}", "arguments": "{content}"}}}, r"the closer '\}\\n' is text JSON"),
])
def test_a_field_a_grammar_cannot_write_says_what_construct(field: dict[str, Any], construct: str) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"place": {"type": "object"}}}}}]
    with pytest.raises(GrammarUnsupported, match=construct):
        grammar_for(_spec(_field(**field)), tools, tool_choice="required")


MUSE_GLIMMER = json.loads((BENCH / "muse_glimmer.json").read_text())
FUNCTIONARY_V3_2 = json.loads((BENCH / "functionary_v3_2.json").read_text())


def _one_character_at_a_time(text: str, spec: FormatSpec) -> tuple[streamparse.Message, int]:
    """The message streamed one character a feed, and the most text the parser held back at once."""
    parser, held = streamparse.StreamParser(spec), 0
    for character in text:
        parser.feed(character)
        held = max(held, parser.held_back)
    parser.close()
    return parser.message, held


@pytest.mark.parametrize(("after", "content"), [
    ("", ""), ("<|eom|>", ""), ("<|eot|>", ""), ("<|eo", "<|eo"), ("<|start|>assistant to=user<|message|>hi", "hi"),
    ("x", "x")])
def test_a_close_pattern_s_optional_ending_is_taken_where_it_follows(after: str, content: str) -> None:
    # `</atem:invoke>\s*</atem:function_calls>(?:<\|eom\|>|<\|eot\|>)?`: transformers' greedy match takes the
    # `<|eom|>` where it follows; the call is the same either way, and the text after it is not the call's.
    call = ('<|start|>assistant to=f<|message|><atem:function_calls>\n<atem:invoke name="f">\n'
            '<atem:parameter name="a">1</atem:parameter>\n</atem:invoke>\n</atem:function_calls>')
    text = " to=self<|message|>r<|eom|>" + call + after
    spec = _spec(MUSE_GLIMMER)
    whole = streamparse.parse(text, spec)
    assert ours(whole) == (content, "r", [("f", {"a": "1"})]) and not whole.rejected
    assert whole.tool_calls[0].raw.endswith(call[-22:] + (after if after in ("<|eom|>", "<|eot|>") else ""))
    streamed, held = _one_character_at_a_time(text, spec)
    assert ours(streamed) == ours(whole) and streamed.tool_calls[0].raw == whole.tool_calls[0].raw
    # A closer held while a longer one could follow is bounded as any delimiter is: by the longest.
    assert held <= max(map(len, (*spec.delimiters, "</atem:function_calls><|eom|>")))
    if after in ("", "<|eom|>", "<|eot|>"):
        assert theirs(text, MUSE_GLIMMER, "", None) == ours(whole)


@pytest.mark.parametrize(("text", "content", "calls"), [
    ('all\nhi>>>f\n{"a": 1}>>>g\n{}>>>all\nbye', "hibye", [("f", {"a": 1}), ("g", {})]),
    ('<think>r</think>f\n{}', "", [("f", {})]),
    ("f\n{}>>>>>>g\n{}", "", [("f", {}), ("g", {})]),
    ("all\nno call\nhere", "no call\nhere", []),
    # Where no field may begin (after text outside every field), or longer than the cap: content, where
    # transformers, which drops the text outside every field, searches it and finds a call.
    ('a>b\n{}', 'a>b\n{}', []),
    ("x" * 65 + "\n{}", "x" * 65 + "\n{}", []),
])
def test_a_call_field_opened_by_a_pattern_alone_is_found_where_a_field_begins(text: str, content: str,
                                                                               calls: list[Any]) -> None:
    spec = _spec(FUNCTIONARY_V3_2)
    whole = streamparse.parse(text, spec)
    assert ours(whole)[0::2] == (content, calls) and not whole.rejected
    streamed, held = _one_character_at_a_time(text, spec)
    assert ours(streamed) == ours(whole)
    assert held <= 65  # the opener's pattern, capped: `[^\n>]{1,64}\n`
    if "x" not in text and "a>b" not in text:
        reference = theirs(text, FUNCTIONARY_V3_2, "", None)
        assert reference is not None and _spaceless(reference)[2] == calls


def test_a_call_field_opened_by_a_pattern_alone_beside_a_field_without_an_opener_is_refused() -> None:
    fields = {**FUNCTIONARY_V3_2["fields"], "content": {"content": "text"}}
    # (transformers looks for the opener anywhere in the text that field holds.)
    with pytest.raises(ValueError, match=r"field 'tool_calls': open_pattern .* does not start with literal text"):
        format_from_response_template({**FUNCTIONARY_V3_2, "fields": fields})


@pytest.mark.parametrize(("template", "pattern"), [
    (FUNCTIONARY_V3_2, "(?P<name>(a+)+)\n"),            # an opener led by a pattern alone
    (FUNCTIONARY_V3_2, "(?P<name>(?:x|\\w*)*)\n"),
    (PYTHONIC, "\\s*(?=\\[(x*)*\\()"),                 # a lookahead opener
    (PYTHONIC, "\\s*(?=\\[(?:a|aa)*\\()"),
], ids=["pattern-led-repetition", "pattern-led-alternation", "lookahead-repetition", "lookahead-alternation"])
def test_a_new_opener_construct_that_could_backtrack_without_bound_is_refused(template: dict[str, Any],
                                                                               pattern: str) -> None:
    # A checkpoint's template is untrusted: its patterns run on every output. The anchored openers cap their
    # unbounded repetitions, and a repetition of a repetition or of an alternation is refused before that.
    changed = json.loads(json.dumps(template))
    changed["fields"]["tool_calls"]["open_pattern"] = pattern
    with pytest.raises(ValueError, match=r"repeats a repetition|repeats an alternation"):
        format_from_response_template(changed)


def test_every_stored_template_imports() -> None:
    # apriel's `\A`, pythonic's lookahead, Functionary v3.2's pattern-led opener and Muse Glimmer's optional
    # close ending were refused once; what is still refused is named by the tests above and below.
    assert len(TEMPLATES) == len(list(BENCH.glob("*.json"))) + len(EXPORTED)
    for _, _, template in TEMPLATES:
        format_from_response_template(template)  # raises ValueError naming the construct it cannot place


def _nested(depth: int) -> Any:
    value: Any = "{content}"
    for _ in range(depth):
        value = [value]
    return value


HERMES_FIELDS = {"content": {"content": "text"}, "tool_calls": {"open": "<tool_call>", "close": "</tool_call>",
                                                                  "content": "json", "repeats": True}}


@pytest.mark.parametrize(("change", "message"), [
    ({"fields": {}}, "fields must be a non-empty dict"),
    ({"version": 2}, "unsupported response_template version 2"),
    ({"properties": {}, "x-regex": "x"}, "legacy x-regex response_schema"),
    ({"defaults": {"role": "assistant", "lang": "en"}}, "only 'role' has a place"),
    ({"fields": {**HERMES_FIELDS, "summary": {"open": "<s>", "close": "</s>"}}}, "a field named 'summary'"),
    ({"fields": {"content": {"content": "yaml"}}}, "unknown content parser 'yaml'"),
    ({"fields": {"content": {"content": "text", "colour": 1}}}, r"unknown keys \['colour'\]"),
    ({"fields": {"a": {}, "content": {}}}, "at most one response_template field may have no"),
    ({"fields": {"content": {"open_pattern": "(a+)+b", "close": "c"}}}, "repeats a repetition"),
    ({"fields": {"content": {"open_pattern": "(?:x|\\w*)*y", "close": "c"}}}, "repeats an alternation"),
    ({"fields": {"content": {"open_pattern": "<(?:a|aa)*>", "close": "c"}}}, "repeats an alternation"),
    ({"fields": {"content": {"open_pattern": "<(a)\\1>", "close": "c"}}}, "refers back to a group"),
    ({"fields": {"content": {"open_pattern": "a" * 2001, "close": "c"}}}, "streamparse reads patterns of at most"),
    ({"fields": {"content": {"open_pattern": "(", "close": "c"}}}, "invalid open_pattern regex"),
    ({"fields": {"content": {}, "tool_calls": {"open": "<c>", "transform": "{content} x"}}}, "mixes a"),
    ({"fields": {"content": {}, "tool_calls": {"open": "<c>", "transform": _nested(5000)}}}, "nested too deeply"),
    ({"fields": {"content": {}, "tool_calls": {"open_pattern": "<c (?P<n>\\w+)>"}}}, None),
])
def test_a_bad_template_gets_a_clear_error(change: dict[str, Any], message: str | None) -> None:
    template = {"version": 1, "start_anchor": "A:", "fields": HERMES_FIELDS, **change}
    if message is None:  # named groups without a transform: transformers refuses them; so do we not, quietly
        format_from_response_template(template)
        return
    with pytest.raises(ValueError, match=message):
        format_from_response_template(template)


def test_a_crafted_output_cannot_run_a_pattern_for_long() -> None:
    # The real qwen3_coder template's tag pattern (`<parameter=K>(?P<value>.*?)</parameter>`) passes the check,
    # but on parameters that never close each try runs to the end: quadratic, 28 KB of them already seconds.
    # The regex module's timeout ends it and the call is rejected saying so.
    spec = _spec(json.loads((BENCH / "qwen3_coder.json").read_text()))
    body = "<tool_call>\n<function=f>\n" + "<parameter=k>x" * 4000 + "</function>\n</tool_call>"
    message = streamparse.parse(body, spec)
    assert message.tool_calls == [] and "ran out of time" in message.rejected[0].errors[0]


def test_a_model_directory_without_a_declared_format_uses_its_response_template(tmp_path: Path) -> None:
    template = json.loads((BENCH / "qwen3_coder.json").read_text())
    chat_template = "{% for m in messages %}<turn>{{ m.content }}{% endfor %}<turn>"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": chat_template,
                                                                "response_template": template}))
    from streamparse.serve.template import ChatTemplate

    spec, why = ChatTemplate(str(tmp_path)).choose_format()
    assert isinstance(spec, FormatSpec) and "no declared format matches" in why and "response_template" in why
    text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
    assert [(c.name, c.arguments) for c in streamparse.parse(text, spec).tool_calls] == [("f", {"a": "1"})]
    # A template a declared format matches keeps it; the checkpoint's response_template is not read.
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "<tool_call>" + chat_template,
                                                                "response_template": template}))
    assert ChatTemplate(str(tmp_path)).choose_format()[0] == "hermes"
    shown = subprocess.run([sys.executable, "-m", "streamparse", "detect", str(tmp_path / "missing")],
                           capture_output=True, text=True, check=False)
    assert shown.returncode != 0


def test_the_cli_names_and_shows_an_imported_format(tmp_path: Path) -> None:
    template = json.loads((BENCH / "glm45.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "<turn>{{ messages }}",
                                                                "response_template": template}))
    run = [sys.executable, "-m", "streamparse"]
    found = subprocess.run([*run, "detect", str(tmp_path)], capture_output=True, text=True, check=False, cwd=ROOT)
    assert found.returncode == 0 and found.stdout == "response_template\n", found.stderr
    assert "no declared format matches" in found.stderr
    shown = subprocess.run([*run, "formats", "--show", str(tmp_path)], capture_output=True, text=True, check=True,
                           cwd=ROOT)
    declared = json.loads(shown.stdout)
    assert declared["reasoning"] == [["<think>", "</think>"]]
    assert declared["envelopes"][0]["openers"] == ["<tool_call>"]
    assert declared["envelopes"][0]["body"]["kind"] == "TemplateCalls"
    hermes = json.loads(subprocess.run([*run, "formats", "--show", "qwen3"], capture_output=True, text=True,
                                       check=True, cwd=ROOT).stdout)
    assert hermes["name"] == "hermes" and hermes["envelopes"][0]["body"]["kind"] == "JsonCall"
