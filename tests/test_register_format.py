"""Formats built from data at run time (`streamparse.register_format`), usable wherever a name is.

The format under test is Hermes' declaration with other delimiters (`dataclasses.replace`):
`<reflect>…</reflect>` reasoning and `<call>{json}</call>` calls. It is held to the promises the
declared formats are (random chunkings, nothing lost, grammars the parser reads back) and used
through every entry point; the refusals say what to do."""

from __future__ import annotations

import dataclasses
import io
import json
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, assert_nothing_lost, assert_stream_matches, ids, run_stream
from grammar_engines import format_accepts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_properties import TOOLS, generate

import streamparse
from streamparse import cli
from streamparse.bodies.json_call import JsonCall
from streamparse.families.hermes import HERMES, call_object
from streamparse.openai import chat_completion
from streamparse.registry import formats, get_format, unregister_format
from streamparse.spec import EnvelopeSpec, FormatSpec, reasoning_block
from streamparse.testing import messages, splittings
from streamparse.types import Message

NAME, ALIAS = "reflect_call", "reflect_call_v1"
THINK = ("<reflect>", "</reflect>")
OPENER, CLOSER = "<call>", "</call>"


def render(message: Message) -> str:
    out = reasoning_block(message, THINK) + message.content
    for call in message.tool_calls:
        out += ("\n" if out else "") + f"{OPENER}{call_object(call)}{CLOSER}"
    return out


def reflect_call(name: str = NAME, aliases: tuple[str, ...] = (ALIAS,)) -> FormatSpec:
    return dataclasses.replace(
        HERMES, name=name, aliases=aliases, reasoning=(THINK,),
        envelopes=(EnvelopeSpec(openers=(OPENER,), body=JsonCall("hermes", closers=(CLOSER,), tag=OPENER)),),
        render=render, special=(*THINK, OPENER, CLOSER), detect=((OPENER,),), detect_turns=())


SPEC = reflect_call()


@pytest.fixture(autouse=True)
def registered() -> Iterator[FormatSpec]:
    streamparse.register_format(SPEC)
    yield SPEC
    for name in (NAME, "other_name"):
        if name in formats():
            unregister_format(name)


TEXT = (f'{THINK[0]}look it up{THINK[1]}Sure.'
        f'{OPENER}{{"name": "get_weather", "arguments": {{"location": "Oslo"}}}}{CLOSER}')


def test_a_registered_name_an_alias_and_the_spec_itself_parse_alike() -> None:
    expected = streamparse.parse(TEXT, NAME, tools=TOOLS, id_factory=ids)
    assert (expected.reasoning, expected.content) == ("look it up", "Sure.")
    assert [(c.name, c.arguments) for c in expected.tool_calls] == [("get_weather", {"location": "Oslo"})]
    assert streamparse.parse(TEXT, ALIAS, tools=TOOLS, id_factory=ids) == expected
    assert streamparse.parse(TEXT, SPEC, tools=TOOLS, id_factory=ids) == expected
    # The declared format does not read the new delimiters: the registration is what made this work.
    assert streamparse.parse(TEXT, "hermes", tools=TOOLS).tool_calls == []
    assert get_format(SPEC) is SPEC and get_format(NAME) is SPEC and get_format(ALIAS) is SPEC
    assert NAME in formats() and ALIAS in formats()


def test_a_spec_passed_itself_needs_no_registration() -> None:
    unregistered = reflect_call("never_registered", ())
    message = streamparse.parse(TEXT, unregistered, tools=TOOLS)
    assert [c.name for c in message.tool_calls] == ["get_weather"]
    assert "never_registered" not in formats()
    with pytest.raises(ValueError, match="unknown format 'never_registered'"):
        streamparse.parse(TEXT, "never_registered")


@pytest.mark.parametrize("emit", ["validated", "progressive"])
@given(data=st.data())
def test_rendered_messages_round_trip_under_any_chunking(emit: str, data: st.DataObject) -> None:
    message = data.draw(messages(NAME))
    text = streamparse.render(message, NAME)
    parsed = streamparse.parse(text, NAME, id_factory=ids)
    assert (parsed.content, parsed.reasoning) == (message.content, message.reasoning)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(c.name, c.arguments) for c in message.tool_calls]
    assert parsed.rejected == []
    folded, streamed = run_stream(data.draw(splittings(text)), format=NAME, emit_calls=emit, id_factory=ids)
    assert streamed == parsed
    assert_stream_matches(folded, parsed)
    folded, streamed = run_stream(data.draw(splittings(text)), format=SPEC, emit_calls=emit, id_factory=ids)
    assert streamed == parsed


@given(pieces=st.lists(st.sampled_from([*THINK, OPENER, CLOSER, "<ca", "</refl", '{"name": "f", "arguments": {}}',
                                        "a", " ", "\n", "{", "}", '"', "é"]), max_size=16),
       data=st.data())
def test_any_text_parses_the_same_in_chunks_and_loses_nothing(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    parsed = streamparse.parse(text, NAME, id_factory=ids)
    assert_nothing_lost(text, parsed, NAME)
    folded, streamed = run_stream(data.draw(splittings(text)), format=NAME, id_factory=ids)
    assert streamed == parsed
    assert_stream_matches(folded, parsed)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(required=st.booleans(), data=st.data())
def test_what_its_grammar_allows_parses_into_accepted_calls(required: bool, data: st.DataObject) -> None:
    text = generate(NAME, "required" if required else "auto", data)
    if text is None:
        return
    message = streamparse.parse(text, NAME, tools=TOOLS)
    assert message.rejected == [], (text, message.rejected)
    if required:
        assert message.tool_calls and OPENER in text
    assert all(call.name in {"get_weather", "list_calendars"} for call in message.tool_calls)


@pytest.mark.parametrize("syntax", ["structural_tag", "lark", "gbnf"])
def test_its_grammars_accept_its_calls_and_refuse_the_declared_ones(syntax: str) -> None:
    call = f'{OPENER}{{"name": "get_weather", "arguments": {{"location": "Oslo"}}}}{CLOSER}'
    assert format_accepts(NAME, syntax, call, TOOLS, tool_choice="required")
    assert not format_accepts(NAME, syntax, call.replace(OPENER, "<tool_call>").replace(CLOSER, "</tool_call>"),
                              TOOLS, tool_choice="required")
    assert streamparse.grammar_for(SPEC, TOOLS, syntax=syntax) == streamparse.grammar_for(NAME, TOOLS, syntax=syntax)
    triggers = streamparse.grammar_triggers(NAME, TOOLS)
    assert triggers["grammar_lazy"] and triggers["grammar_triggers"] == [{"type": 1, "value": OPENER}]
    assert triggers["preserved_tokens"] == [*THINK, OPENER, CLOSER]


def test_the_openai_adapters_take_it() -> None:
    completion = chat_completion({"id": "c1", "choices": [{"index": 0, "text": TEXT, "finish_reason": "stop"}]},
                                 NAME, tools=TOOLS, id_factory=ids)
    message = completion["choices"][0]["message"]
    assert message["content"] == "Sure." and message["reasoning_content"] == "look it up"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] \
        == [("get_weather", {"location": "Oslo"})]
    assert completion["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="workers inherit the registry by forking")
def test_parse_many_workers_inherit_the_registry() -> None:
    texts = [TEXT, "plain", TEXT * 2] * 3
    many = streamparse.parse_many(texts, workers=2, format=NAME, tools=TOOLS, id_factory=ids)
    assert many == [streamparse.parse(text, NAME, tools=TOOLS, id_factory=ids) for text in texts]
    assert [len(m.tool_calls) for m in many[:3]] == [1, 0, 2]


def test_the_command_line_in_this_process_takes_it(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TEXT.encode())))
    assert cli.main(["parse", "--format", ALIAS]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reasoning"] == "look it up" and [c["name"] for c in out["tool_calls"]] == ["get_weather"]
    assert cli.main(["formats"]) == 0
    assert NAME in capsys.readouterr().out.split()


@pytest.mark.parametrize("name", ["hermes", "qwen3", "gpt_oss"])
def test_a_declared_name_or_alias_is_refused_even_with_replace(name: str) -> None:
    for aliases in ((), (name,)):
        spec = reflect_call(name if not aliases else "other_name", aliases)
        with pytest.raises(ValueError, match=f"{name!r} names the declared format .*give it another name"):
            streamparse.register_format(spec, replace=True)
    assert get_format(name) is not None and get_format(name).envelopes != SPEC.envelopes
    assert "other_name" not in formats()


def test_a_registered_name_is_refused_unless_replaced() -> None:
    again = reflect_call()
    with pytest.raises(ValueError, match=f"{NAME!r} is already registered .*replace=True"):
        streamparse.register_format(again)
    with pytest.raises(ValueError, match=f"{ALIAS!r} is already registered"):
        streamparse.register_format(reflect_call("other_name", (ALIAS,)))
    assert "other_name" not in formats() and get_format(NAME) is SPEC
    streamparse.register_format(SPEC)  # the same object again changes nothing
    # Replacing drops every name of the format replaced, and parsers made from then on read the new one.
    streamparse.parse(TEXT, NAME)  # options and a parser state are now kept for the old format
    fn = EnvelopeSpec(openers=("<fn>",), body=JsonCall("hermes", closers=("</fn>",), tag="<fn>"))
    plain = dataclasses.replace(reflect_call(aliases=()), envelopes=(fn,))
    assert streamparse.register_format(plain, replace=True) is plain
    assert get_format(NAME) is plain and ALIAS not in formats()
    assert streamparse.parse(TEXT, NAME).tool_calls == []
    assert streamparse.grammar_for(NAME, TOOLS, syntax="gbnf") != streamparse.grammar_for(SPEC, TOOLS, syntax="gbnf")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"takes a streamparse\.spec\.FormatSpec"):
        streamparse.register_format("hermes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty strings"):
        streamparse.register_format(reflect_call("", ()))
    with pytest.raises(ValueError, match="no format is registered at run time as 'hermes'"):
        unregister_format("hermes")
    with pytest.raises(TypeError, match="a format name \\(str\\) or a FormatSpec"):
        get_format(3)  # type: ignore[arg-type]



SPAWNED = '''
import dataclasses, multiprocessing
import streamparse
from streamparse.registry import get_format

if __name__ == "__main__":
    multiprocessing.set_start_method("spawn")
    spec = streamparse.register_format(dataclasses.replace(get_format("hermes"), name="spawned_fmt", aliases=()))
    for format in ("spawned_fmt", spec):
        try:
            streamparse.parse_many(["a"] * 20000, workers=2, format=format)
        except ValueError as error:
            print(str(error).split(";")[0])
'''


def test_under_spawn_workers_do_not_see_a_name_the_guarded_main_registered(tmp_path: Path) -> None:
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = done.stdout.splitlines()
    assert lines[0] == "unknown format 'spawned_fmt'", done.stderr  # the worker's error, raised in the caller
    assert lines[1:] == [], done.stderr  # the spec itself is sent (pickled), registered or not
