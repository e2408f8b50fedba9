"""Tencent HY V4 (`hy_v4`): the format, and the fourth-wave Decisions for it (1, 7, 9, 21, 22), by example.

Hy3's markers without `<tool_sep>`, every one spelled with the checkpoint's marker suffix
(`<tool_call:6124c78e>`); no template is stored: the wire is FORMATS.md's block and the peers'
fixtures (vLLM `hy_v4`, SGLang `hunyuan`)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import FIXTURES, agreeing, ids, named_calls
from grammar_engines import gbnf_accepts, lark_accepts, structural_tag_accepts
from hypothesis import given, settings
from hypothesis import strategies as st

import streamparse
from streamparse import Message, StreamParser, Token
from streamparse.families.hy_v4 import spec
from streamparse.testing import messages, splittings

FMT = "hy_v4"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
TYPED = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "days": {"type": "integer"}, "city": {"type": "string"}}}}}]

# FORMATS.md's wire block, with HY4-preview's suffix.
WIRE = ("reasoning</think:6124c78e>content<tool_calls:6124c78e><tool_call:6124c78e>get_weather"
        "<arg_key:6124c78e>location</arg_key:6124c78e><arg_value:6124c78e>Paris, France</arg_value:6124c78e>"
        "<arg_key:6124c78e>days</arg_key:6124c78e><arg_value:6124c78e>3</arg_value:6124c78e></tool_call:6124c78e>"
        "<tool_call:6124c78e>get_current_date</tool_call:6124c78e></tool_calls:6124c78e>")
CALLS = [("get_weather", {"location": "Paris, France", "days": 3}), ("get_current_date", {})]


def both_modes(text: str, **options: object) -> Message:
    """parse(), and streams of 1, 3 and 7 characters in both emit modes, agree; the message is returned."""
    return agreeing(text, FMT, sizes=(1, 3, 7), **options)


@pytest.mark.parametrize("source", [
    {"marker_suffix": ":6124c78e", "thinking_forced_open": True},  # (a) the option
    {"prompt": "<｜hy_start:6124c78e｜>assistant<｜hy_middle:6124c78e｜><think:6124c78e>"},  # (d) the prompt
    {"thinking_forced_open": True},  # (e) the output's first marker
])
def test_the_wire_block_from_each_source_of_the_suffix(source: dict[str, object]) -> None:
    msg = both_modes(WIRE, tools=TOOLS, **source)
    assert (msg.reasoning, msg.content, named_calls(msg), msg.rejected) == ("reasoning", "content", CALLS, [])


def test_the_real_fixture_and_its_prompt() -> None:
    text = (FIXTURES / FMT / "hy4_reasoning_two_calls.txt").read_text()
    prompt = (FIXTURES / FMT / "hy4_reasoning_two_calls.prompt").read_text()
    msg = both_modes(text, tools=TOOLS, prompt=prompt)
    assert msg.reasoning.startswith("The user wants") and msg.content == "Checking both."
    assert named_calls(msg) == CALLS


def test_the_hy3_release_suffix_and_newlines_between_elements() -> None:
    text = ("<tool_calls:opensource>\n<tool_call:opensource>get_weather\n<arg_key:opensource>location"
            "</arg_key:opensource>\n<arg_value:opensource>Paris, France</arg_value:opensource>\n"
            "</tool_call:opensource>\n</tool_calls:opensource>")
    assert named_calls(both_modes(text, tools=TOOLS)) == [("get_weather", {"location": "Paris, France"})]


def test_an_empty_suffix_is_the_plain_spelling() -> None:
    msg = both_modes(WIRE.replace(":6124c78e", ""), tools=TOOLS, thinking_forced_open=True)
    assert (msg.reasoning, msg.content, named_calls(msg)) == ("reasoning", "content", CALLS)


def test_once_the_output_fixed_the_suffix_other_spellings_are_text() -> None:
    # Decision 7 (e): the first complete marker fixes SUF for the rest of the output.
    first = "<tool_calls:a><tool_call:a>f</tool_call:a></tool_calls:a>"
    other = "<tool_calls:b><tool_call:b>g</tool_call:b></tool_calls:b>"
    msg = both_modes(f"Hi {first} and {other}")
    assert named_calls(msg) == [("f", {})] and msg.content == f"Hi  and {other}"
    plain = "<tool_calls><tool_call>g</tool_call></tool_calls>"
    msg = both_modes(f"{plain} {first}")
    assert named_calls(msg) == [("g", {})] and msg.content == first
    # Any of the markers fixes it, wherever it stands: here a stray closer in the content.
    msg = both_modes(f"x</arg_key:c> {first}")
    assert msg.tool_calls == [] and msg.content == f"x</arg_key:c> {first}"


def test_the_option_or_the_prompt_wins_over_the_output() -> None:
    first = "<tool_calls:a><tool_call:a>f</tool_call:a></tool_calls:a>"
    msg = both_modes(first, marker_suffix=":b")
    assert msg.tool_calls == [] and msg.content == first
    msg = both_modes(first, prompt="<｜hy_start｜>assistant<｜hy_middle｜><think></think>")  # the prompt says: plain
    assert msg.tool_calls == [] and msg.content == first


def test_a_partial_marker_is_held_back_until_its_end_and_content_before_it_streams() -> None:
    parser = StreamParser(FMT, id_factory=ids)
    streamed = parser.feed("Checking. <tool_calls:6124")
    assert "".join(d.content for d in streamed) == "Checking."
    assert parser.held_back == len(" <tool_calls:6124")
    parser.feed("c78e><tool_call:6124c78e>get_current_date</tool_call:6124c78e>")
    parser.close()
    assert named_calls(parser.message) == [("get_current_date", {})]


@pytest.mark.parametrize("text", ["<tool_calls:" + "x" * 65 + ">", "<tool_calls:a b>", "<tool_calls:>",
                                  "<tool_calls:a", "a <think:"])
def test_what_cannot_be_a_marker_is_text(text: str) -> None:
    # A suffix is `:` and 1-64 characters, no whitespace; cut off by the end, a partial marker is text.
    msg = both_modes(text + "<tool_call>f</tool_call>")
    assert msg.content == text and named_calls(msg) == [("f", {})]
    assert both_modes(text).content == text


def test_a_cut_off_block_is_truncated_and_the_closers_are_optional_at_the_end() -> None:
    # Decision 1.
    head = "<tool_calls:s><tool_call:s>f<arg_key:s>days</arg_key:s><arg_value:s>3</arg_value:s>"
    assert named_calls(both_modes(head, tools=TYPED)) == [("f", {"days": 3})]
    msg = both_modes(head + "</tool_call:s><tool_call:s>f<arg_key:s>city</arg_key:s><arg_value:s>Par", tools=TYPED)
    assert named_calls(msg) == [("f", {"days": 3})] and [r.status for r in msg.rejected] == ["truncated"]
    assert msg.rejected[0].raw == "<tool_call:s>f<arg_key:s>city</arg_key:s><arg_value:s>Par"
    msg = both_modes("<tool_calls:s><tool_call:s>get_cur")
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["truncated"]


def test_names_pairs_and_typing() -> None:
    # Decision 9: the name ends at the first <arg_key:SUF> (trimmed); a repeated key keeps the last value;
    # a value that fits no schema type stays a string and validation decides; an unknown tool.
    msg = both_modes("<tool_calls:s><tool_call:s> f <arg_key:s>days</arg_key:s><arg_value:s>3</arg_value:s>"
                     "<arg_key:s>days</arg_key:s><arg_value:s>4</arg_value:s></tool_call:s></tool_calls:s>",
                     tools=TYPED)
    assert named_calls(msg) == [("f", {"days": 4})]
    msg = both_modes("<tool_call:s>f<arg_key:s>days</arg_key:s><arg_value:s>three</arg_value:s></tool_call:s>",
                     tools=TYPED)
    assert [r.status for r in msg.rejected] == ["schema_violation"]
    msg = both_modes("<tool_call:s>nope</tool_call:s>", tools=TYPED)
    assert [(r.status, r.name) for r in msg.rejected] == [("unknown_tool", "nope")]
    # A string-typed value is its text, byte-exact; others are typed by the schema.
    msg = both_modes("<tool_call:s>f<arg_key:s>days</arg_key:s><arg_value:s> 7 </arg_value:s><arg_key:s>city"
                     "</arg_key:s><arg_value:s> 03106</arg_value:s></tool_call:s>", tools=TYPED)
    assert named_calls(msg) == [("f", {"days": 7, "city": " 03106"})]


@pytest.mark.parametrize("call", [
    "<tool_call:s><arg_key:s>days</arg_key:s><arg_value:s>3</arg_value:s></tool_call:s>",  # an empty name
    "<tool_call:s>f<arg_key:s>days</arg_key:s>x<arg_value:s>3</arg_value:s></tool_call:s>",  # text between elements
    "<tool_call:s>f<arg_key:s>days</arg_key:s></tool_call:s>",  # a key without its value
])
def test_malformed_calls_are_invalid_json_and_their_siblings_stand(call: str) -> None:
    good = "<tool_call:s>f</tool_call:s>"
    msg = both_modes(f"<tool_calls:s>{good}{call}{good}</tool_calls:s>", tools=TYPED)
    assert named_calls(msg) == [("f", {}), ("f", {})] and [r.status for r in msg.rejected] == ["invalid_json"]
    assert msg.rejected[0].raw == call and msg.content == ""


def test_text_in_the_block_is_content_and_a_bare_call_is_a_call() -> None:
    # Decision 2.
    msg = both_modes("A<tool_calls:s>\n<tool_call:s>f</tool_call:s>\nnote\n</tool_calls:s>B")
    assert named_calls(msg) == [("f", {})] and msg.content == "A\nnote\nB"


@pytest.mark.parametrize(("prompt", "forced"), [
    ("<｜hy_start:6124c78e｜>assistant<｜hy_middle:6124c78e｜><think:6124c78e>", True),
    ("<｜hy_start:6124c78e｜>assistant<｜hy_middle:6124c78e｜><think:6124c78e></think:6124c78e>", False),
    ("<｜hy_start｜>assistant<｜hy_middle｜><think>", True),
    ("<｜hy_start｜>assistant<｜hy_middle｜><think></think>", False)])
def test_thinking_prompts_leave_reasoning_open(prompt: str, forced: bool) -> None:
    # Decision 21, suffixed markers included.
    assert streamparse.thinking_forced_open(prompt, FMT) is forced


def test_a_learned_suffix_keeps_the_forced_open_flag() -> None:
    msg = both_modes("plan</think:z>answer", thinking_forced_open=True)
    assert (msg.reasoning, msg.content) == ("plan", "answer")


def test_token_aware_mode_learns_the_suffix_from_a_special_token_only() -> None:
    tokens = [Token("Hi <tool_calls:q>", special=False), Token("<tool_calls:z>", special=True),
              Token("<tool_call:z>", special=True), Token("f"), Token("</tool_call:z>", special=True)]
    msg = streamparse.parse(tokens, FMT, special_tokens="require", id_factory=ids)
    assert named_calls(msg) == [("f", {})] and msg.content == "Hi <tool_calls:q>"


def test_detection() -> None:
    # Decision 22: `<tool_calls` with `<arg_key` and no `<tool_sep`; the suffix from the vocabulary (b) or the
    # template (c).
    template = ("{%- for m in messages %}{{ '<tool_calls:6124c78e><tool_call:6124c78e>' + m.name + "
                "'<arg_key:6124c78e>k</arg_key:6124c78e><arg_value:6124c78e>v</arg_value:6124c78e>' }}{% endfor %}")
    assert streamparse.detect_format(template) == FMT
    assert streamparse.detect_marker_suffix(template, FMT) == ":6124c78e"
    assert streamparse.detect_format(template.replace("k</arg_key", "<tool_sep:6124c78e>k</arg_key")) == "hy_v3"
    config = {"chat_template": template.replace(":6124c78e", ""),
              "added_tokens_decoder": {"9": {"content": "<tool_calls:opensource>", "special": True}}}
    assert streamparse.detect_format(config) == FMT and streamparse.detect_marker_suffix(config, FMT) == ":opensource"
    tokenizer = {"added_tokens": [{"id": 1, "content": "<tool_calls:a1>"}, {"id": 2, "content": "<tool_call:a1>"}]}
    assert streamparse.detect_marker_suffix(tokenizer, FMT) == ":a1"


def test_a_bad_suffix_for_a_grammar_says_what_a_suffix_is() -> None:
    with pytest.raises(ValueError, match="marker_suffix must be '' or ':' and 1-64 characters"):
        streamparse.grammar_for(FMT, TOOLS, marker_suffix="6124c78e")


@pytest.mark.parametrize("suffix", [None, ":6124c78e"])
def test_grammars_in_every_syntax_accept_the_markers_spelled_with_the_suffix(suffix: str | None) -> None:
    text = WIRE if suffix else WIRE.replace(":6124c78e", "")
    special = spec(suffix or "").special
    shape: dict[str, Any] = {"tool_choice": "auto", "thinking_forced_open": True, "marker_suffix": suffix}
    assert structural_tag_accepts(streamparse.grammar_for(FMT, TOOLS, syntax="structural_tag", **shape), text)
    assert lark_accepts(streamparse.grammar_for(FMT, TOOLS, syntax="lark", **shape), text, special)
    gbnf = streamparse.grammar_for(FMT, TOOLS, syntax="gbnf", **shape)
    assert gbnf_accepts(gbnf, text) and not gbnf_accepts(gbnf, WIRE.replace(":6124c78e", ":other"))
    triggers = streamparse.grammar_triggers(FMT, TOOLS, marker_suffix=suffix)["grammar_triggers"]
    assert {"type": 1, "value": f"<tool_calls{suffix or ''}>"} in triggers
    assert all(trigger["value"].endswith(f"{suffix or ''}>") for trigger in triggers)


_SUFFIXES = st.one_of(st.just(""), st.from_regex(r":[0-9a-z._\-]{1,12}", fullmatch=True))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_suffix_learned_from_the_output_reads_as_the_suffix_given_whatever_the_chunking(data: st.DataObject) -> None:
    # The property behind Decision 7 (e): learning the suffix changes nothing but where it comes from, and any
    # chunking of the output gives the same message.
    suffix = data.draw(_SUFFIXES)
    message = data.draw(messages(FMT))
    text = spec(suffix).render(message)
    given_suffix = streamparse.parse(text, FMT, marker_suffix=suffix, id_factory=ids)
    assert (given_suffix.content, given_suffix.reasoning, named_calls(given_suffix)) == (
        message.content, message.reasoning, [(c.name, c.arguments) for c in message.tool_calls])
    chunks = data.draw(splittings(text))
    parser = StreamParser(FMT, id_factory=ids)
    deltas = [delta for chunk in chunks for delta in parser.feed(chunk)] + parser.close()
    assert parser.message == given_suffix == streamparse.parse(text, FMT, id_factory=ids)
    assert "".join(d.content for d in deltas) == given_suffix.content
    assert "".join(d.reasoning for d in deltas) == given_suffix.reasoning


@pytest.mark.parametrize("unit", ["<tool_calls:" + "x" * 63, "<tool_calls:" + "x" * 64 + " ", "<", "</arg_value:a"])
def test_learning_the_suffix_takes_linear_work(unit: str) -> None:
    # Partial markers held back and read again with the next chunk: the work stays linear in the output.
    counts = []
    for repeat in (400, 1600):
        text = unit * repeat
        parser = StreamParser(FMT)
        for at in range(0, len(text), 3):
            parser.feed(text[at:at + 3])
        parser.close()
        assert parser.message.content == text.strip()
        counts.append(parser.scanned)
    assert counts[1] <= 4.2 * counts[0], counts


def test_serve_spells_the_markers_as_the_rendered_prompt_does(tmp_path: Any) -> None:
    # Decision 7 (d) in the proxy: the parser and the grammar the upstream enforces read the prompt's suffix.
    pytest.importorskip("starlette")
    from streamparse.serve.app import ServerConfig, _prepare

    source = tmp_path / "hy4.jinja"
    source.write_text("{% for m in messages %}<｜hy_User:6124c78e｜>{{ m.content }}{% endfor %}"
                      "{% if add_generation_prompt %}<｜hy_start:6124c78e｜>assistant<｜hy_middle:6124c78e｜>"
                      "<think:6124c78e>{% endif %}", encoding="utf-8")
    config = ServerConfig("http://127.0.0.1:9", streamparse.ChatTemplate(source), streamparse.Options(FMT))
    prepared = _prepare(config, {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS,
                                 "tool_choice": "required"})
    assert prepared.options.marker_suffix == ":6124c78e"
    assert prepared.constraint is not None and prepared.constraint.forced_open
    parser = StreamParser.from_options(prepared.options)
    parser.feed(WIRE)
    parser.close()
    assert named_calls(parser.message) == CALLS and parser.message.reasoning == "reasoning"


def test_the_suffix_from_a_model_directory(tmp_path: Any) -> None:
    # Decision 7 (b) before (c): what `serve --chat-template DIR` reads at start.
    (tmp_path / "chat_template.jinja").write_text("{{ '<tool_calls:abc><tool_call:abc>' }}<arg_key:abc><arg_value:abc>",
                                                  encoding="utf-8")
    assert streamparse.detect_marker_suffix(tmp_path, FMT) == ":abc"
    added = {"added_tokens": [{"id": 5, "content": "<tool_calls:opensource>"}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(added), encoding="utf-8")
    assert streamparse.detect_marker_suffix(tmp_path, FMT) == ":opensource"
    assert streamparse.detect_marker_suffix(str(tmp_path / "tokenizer.json"), FMT) == ":opensource"
    assert streamparse.detect_marker_suffix(tmp_path, "glm45") is None  # its markers carry no suffix


def test_a_model_directory_whose_vocabulary_spells_two_suffixes_names_no_format(tmp_path: Any) -> None:
    # Decision 7 (b): ambiguous, not detected.
    template = "{{ '<tool_calls><tool_call>' }}<arg_key><arg_value>"
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": template}), encoding="utf-8")
    assert streamparse.detect_format(tmp_path) == FMT == streamparse.detect_format(str(tmp_path))
    tokens = {"added_tokens_decoder": {"1": {"content": "<tool_calls:a>"}, "2": {"content": "<tool_calls:b>"}}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokens), encoding="utf-8")
    assert streamparse.detect_format(tmp_path) is None and streamparse.detect_marker_suffix(tmp_path, FMT) is None
    # `serve` detecting the format from that directory says so before it listens.
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    done = subprocess.run([sys.executable, "-m", "streamparse", "serve", "--upstream", "http://127.0.0.1:9/v1",
                           "--chat-template", str(tmp_path), "--text-prompt"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "several suffixes; pass --format and --marker-suffix" in done.stderr
