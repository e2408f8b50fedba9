"""Google Gemma 4 (`gemma4`): the format and its Decisions (FORMATS.md, third wave 1, 3, 4), by example.

Every example goes through `read`: `parse()` checked against streaming it in both emit modes, 1
and 5 characters at a time (chunk splits inside every `<|…|>` marker and inside the `<|"|>` token).
"""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import FIXTURES, agreeing, shared_cases

import streamparse
from streamparse import Message, Token, parse

FMT = "gemma4"
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
Q = '<|"|>'


def call(name: str, args: str, close: str = "<tool_call|>") -> str:
    return f"<|tool_call>call:{name}{args}{close}"


def read(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 5), **options)


def named(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


@pytest.mark.parametrize("case", shared_cases(FMT), ids=lambda c: f"{c['template']}:{c['case']}")
def test_every_real_render_reads_as_the_template_wrote_it(case: dict) -> None:
    message = read(case["output"], tools=case["tools"])
    expected = case["expected"]
    assert message.content == (expected["content"] or "").strip()
    assert message.reasoning == (expected["reasoning"] or "").strip()
    assert named(message) == [(c["name"], c["arguments"]) for c in expected["tool_calls"]]
    assert message.rejected == []


def test_values_of_every_kind() -> None:
    args = (f"{{s:{Q}a \\n \"b\" {{x}}, y:1{Q},t:true,f:false,n:None,m:null,i:-12,x:0.5,e:1e-05,"
            f"d:108.,big:1.5e10,l:[1,{Q}two{Q},[]],o:{{{Q}quoted key{Q}:{{}}, bare key :2,}},}}")
    message = read(call("f", args))
    assert named(message) == [("f", {"s": 'a \\n "b" {x}, y:1', "t": True, "f": False, "n": None, "m": None,
                                     "i": -12, "x": 0.5, "e": 1e-05, "d": 108.0, "big": 1.5e10,
                                     "l": [1, "two", []], "o": {"quoted key": {}, "bare key": 2}})]
    assert isinstance(message.tool_calls[0].arguments["d"], float)


def test_a_repeated_key_keeps_the_last_value_and_values_are_not_retyped() -> None:
    message = read(call("get_weather", f"{{location:{Q}A{Q},location:{Q}B{Q}}}"), tools=TOOLS)
    assert named(message) == [("get_weather", {"location": "B"})]
    message = read(call("get_time", "{timezone:5}"), tools=TOOLS)
    assert statuses(message) == ["schema_violation"]


@pytest.mark.parametrize("args", ["{city:London}", "{n:NULL}", "{n:none}", "{a:1 b:2}", "{a:}", "{:1}",
                                  f"{{a:{Q}x}}", "{a:[1,2}", "{a:01}"])
def test_malformed_arguments_are_invalid_json_and_the_next_call_stands(args: str) -> None:
    message = read(call("f", args) + call("g", "{}"))
    assert statuses(message) == ["invalid_json"] or (args == f"{{a:{Q}x}}" and statuses(message) == ["truncated"])
    if statuses(message) == ["invalid_json"]:
        assert named(message) == [("g", {})]


def test_partial_calls_at_the_end_are_truncated_and_the_closer_is_not_optional() -> None:
    done = call("get_time", f"{{timezone:{Q}UTC{Q}}}")
    for tail in ("<|tool_call>call:get_wea", f"<|tool_call>call:get_weather{{location:{Q}Par",
                 f"<|tool_call>call:get_weather{{location:{Q}Paris{Q}}}"):
        message = read(done + tail, tools=TOOLS)
        assert named(message) == [("get_time", {"timezone": "UTC"})]
        assert statuses(message) == ["truncated"]
        assert message.rejected[0].raw == tail
    # An unclosed call followed by another call: invalid_json, the next one stands.
    message = read(call("get_time", f"{{timezone:{Q}UTC{Q}}}", close="") + done, tools=TOOLS)
    assert statuses(message) == ["invalid_json"]
    assert named(message) == [("get_time", {"timezone": "UTC"})]


def test_the_closer_and_next_opener_inside_a_string_are_data() -> None:
    message = read(call("f", f"{{s:{Q}<tool_call|> and <|tool_call>{Q}}}"))
    assert named(message) == [("f", {"s": "<tool_call|> and <|tool_call>"})]


def test_framing_of_channels_and_turn_ends() -> None:
    assert read("<|channel>thought<channel|>Hi.<turn|>").content == "Hi."
    message = read("<|channel>thought\nplan\n<channel|>Hi.<|channel>thought\n<channel|> there<channel|>")
    assert (message.reasoning, message.content) == ("plan", "Hi. there")
    # A second opener right after the first is framing.
    assert read("<|channel>thought\n<|channel>thought\nplan<channel|>Hi.").reasoning == "plan"
    # ... also when it comes before the channel name (fourth-wave Decision 24, llama.cpp test 3093).
    message = read("<|channel><|channel>thought\n<channel|>Hello")
    assert (message.reasoning, message.content) == ("", "Hello")
    message = read("<|channel><|channel>thought\nplan<channel|>Hello")
    assert (message.reasoning, message.content) == ("plan", "Hello")
    # Any other later <|channel> block is content (its closer is framing, as a stray one is).
    assert read("Hi <|channel>thought\nx<channel|>").content == "Hi <|channel>thought\nx"
    message = read(call("f", "{}") + "Done.<|tool_response>")
    assert (named(message), message.content) == ([("f", {})], "Done.")


def test_progressive_mode_starts_the_call_at_its_header() -> None:
    parser = streamparse.StreamParser(FMT, tools=TOOLS, emit_calls="progressive")
    deltas = parser.feed(f"<|tool_call>call:get_time{{timezone:{Q}U")
    assert [(tc.name, tc.index) for d in deltas for tc in d.tool_calls] == [("get_time", 0)]
    parser.feed(f"TC{Q}}}<tool_call|>")
    parser.close()
    assert named(parser.message) == [("get_time", {"timezone": "UTC"})]


def test_token_aware_mode() -> None:
    tokens = [Token("<|channel>", special=True), Token("thought\nplan"), Token("<channel|>", special=True),
              Token("<|tool_call>", special=True), Token(f"call:f{{a:{Q}x{Q}}}"), Token("<tool_call|>", special=True),
              Token("ok")]
    message = parse(tokens, FMT, special_tokens="require")
    assert (message.reasoning, named(message), message.content) == ("plan", [("f", {"a": "x"})], "ok")
    plain = parse([Token("<|tool_call>call:f{}<tool_call|>")], FMT, special_tokens="require")
    assert plain.tool_calls == [] and plain.content == "<|tool_call>call:f{}<tool_call|>"


def test_render_writes_what_the_template_writes() -> None:
    from streamparse import ToolCall
    message = Message(content="Done.", reasoning="R", tool_calls=[
        ToolCall("c", "f", {"b": [1, None], "a": {"z": True, "y": "s"}, "k y": 0.75}, "")])
    text = streamparse.render(message, FMT)
    assert text == (f"<|channel>thought\nR<channel|><|tool_call>call:f{{a:{{y:{Q}s{Q},z:true}},b:[1,None],"
                    f"k y:0.75}}<tool_call|>Done.")


def _reads_as_the_grammar(body: str) -> None:
    """The reader gives the grammar's values, types and all (None where the grammar does not read
    the body), and the JSON text it hands over is the value's `json_text`."""
    from parsimonious.exceptions import ParseError

    from streamparse.bodies.object_literal import _VISITOR, _Reader
    from streamparse.grammar import load_grammar
    from streamparse.strict_json import json_text

    try:
        expected = _VISITOR.visit(load_grammar(FMT).parse(body))
    except (ParseError, RecursionError):
        expected = None
    read = _Reader(FMT).call(body)
    assert repr(read[:2] if read is not None else None) == repr(expected)
    if read is not None and read[2] is not None:
        assert read[2] == json_text(read[1])


def test_the_fast_reader_reads_as_the_grammar_does() -> None:
    """The reader (`_Reader`: JSON respelled and read at C speed, else a walk of the grammar's
    terminals) gives the grammar's values, types and all, and the JSON text it hands over is the
    value's `json_text`."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = st.sampled_from(["{", "}", "[", "]", ",", ":", " ", "a", "k y", Q, "1", "-0.5", "1e3", "2.",
                              "true", "None", "nul", "x<", "\n", '"', "\\", "NaN", "Infinity", "-0", "0.0",
                              "1.50", "0.00001", "0.0001", "12345678901234567", "None:", "b.c", "\x00", "\x0c",
                              "é", "\ud800", "a:1", ",a:2", "{a:", "x1.5"])

    @settings(max_examples=600, deadline=None)
    @given(st.lists(pieces, max_size=16))
    def check(parts: list[str]) -> None:
        body = "call:f{" + "".join(parts)
        _reads_as_the_grammar(body)

    check()


def test_the_fast_reader_reads_well_formed_literals_as_the_grammar_does() -> None:
    """Object literals as a template or a model writes them (numbers in every spelling, keys written
    twice, whitespace or none), where the JSON respelling is taken."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    numbers = st.sampled_from(["0", "-0", "7", "-12", "0.0", "-0.0", "1.5", "2.50", "0.0001", "0.00001", "1e-05",
                               "1E5", "108.", "123456789012345.0", "1234567890123456.0", "0.1234567890123456",
                               "3.0", "10.25"])
    words = st.sampled_from(["true", "false", "null", "None"])
    strings = st.text(st.characters(codec="utf-8"), max_size=6).map(lambda text: f"{Q}{text}{Q}")
    keys = st.sampled_from(["a", "b", "k y", "None", "x1.5", "é", f"{Q}q{Q}", f"{Q}a{Q}"])
    space = st.sampled_from(["", "", "", " ", "\n"])
    values = st.recursive(
        numbers | words | strings,
        lambda inner: st.lists(st.tuples(keys, inner, space), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{k}{w}:{v}" for k, v, w in pairs) + "}")
        | st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        max_leaves=12)

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.tuples(keys, values), max_size=5))
    def check(pairs: list[tuple[str, str]]) -> None:
        body = "call:f{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"
        _reads_as_the_grammar(body)

    check()


def test_long_strings_in_little_structure_read_as_the_grammar_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings long enough to be read by jiter as stand-ins (`_stand_ins`: ASCII, at least
    `_LONG_STRING` long, the strings outweighing their structure `_LONG_STRING` times; here 2, so
    that short literals take that way) beside short ones, non-ASCII ones, repeated keys and
    malformed structure: the reader gives the grammar's values, and the JSON text it hands over
    is the value's `json_text`."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from streamparse.bodies import object_literal

    monkeypatch.setattr(object_literal, "_LONG_STRING", 2)
    long_text = st.tuples(st.text(st.sampled_from('ab "\\\n\t\x01{}:,<é'), max_size=4),
                          st.integers(3, 150)).map(lambda tr: (tr[0] or "x") * tr[1])
    strings = (long_text | long_text | st.sampled_from(["", "s", "\x00", "\ud800" * 9])).map(lambda t: f"{Q}{t}{Q}")
    scalars = strings | st.sampled_from(["1", "-0", "2.50", "true", "None", "[]", "{}"])
    values = st.recursive(
        scalars,
        lambda inner: st.lists(st.tuples(st.sampled_from(["a", "b", f"{Q}k{Q}"]), inner), max_size=3).map(
            lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}")
        | st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
        max_leaves=6)
    junk = st.sampled_from([""] * 8 + [",", "}", "{", ":", " ", f"{Q}"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["a", "b"]), values), min_size=1, max_size=3), junk)
    def check(pairs: list[tuple[str, str]], tail: str) -> None:
        body = "call:f{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}" + tail
        _reads_as_the_grammar(body)

    check()


def test_a_long_string_is_read_as_a_stand_in_and_put_back() -> None:
    """A call whose strings outweigh its structure (a file's content): its long strings are not
    read again by jiter, the value holds them as written and the JSON text is the value's."""
    from streamparse.bodies import object_literal
    from streamparse.strict_json import json_text

    code = 'def f(x):\n    return {"a": x}  # \\ "quoted"\n' * 400
    body = f"call:write{{content:{Q}{code}{Q},opts:{{mode:420,tags:[{Q}{code}{Q},{Q}b{Q}]}},path:{Q}p.py{Q}}}"
    raw = [code, code, "b", "p.py"]
    assert object_literal._stand_ins(raw, [json.dumps(s) for s in raw]) is not None
    read = object_literal._Reader(FMT).call(body)
    arguments = {"content": code, "opts": {"mode": 420, "tags": [code, "b"]}, "path": "p.py"}
    assert read == ("write", arguments, json_text(arguments))


def _reference_end(text: str, quote: str, closer: str, stops: tuple[str, ...]) -> tuple[int, int] | None:
    """Where a body ends, from a plain character walk: at the first closer or stop outside strings
    (the longest token where several start at one place), a string running from a quote to the next."""
    tokens = sorted({quote, closer, *stops}, key=len, reverse=True)
    at, in_string = 0, False
    while at < len(text):
        if in_string:
            close = text.find(quote, at)
            if close < 0:
                return None
            at, in_string = close + len(quote), False
            continue
        token = next((t for t in tokens if text.startswith(t, at)), None)
        if token == quote:
            at, in_string = at + len(quote), True
        elif token is not None:
            return at, at + len(token) if token == closer else at
        else:
            at += 1
    return None


def _scanned_end(scanner: object, text: str, cuts: list[int]) -> tuple[int, int] | None:
    """`text` given to `scanner` in pieces as the engine gives it (the held-back text again, with the
    next piece): where the body ends, as positions in `text`."""
    given, carry = 0, ""  # where the text the scanner is given starts
    for start, end in itertools.pairwise([0, *sorted(set(cuts)), len(text)]):
        view = carry + text[start:end]
        result = scanner.scan(view, 0)  # type: ignore[attr-defined]
        if result.end is not None:
            return given + result.safe, given + result.end
        given, carry = given + result.safe, view[result.safe:]
    return None


@pytest.mark.parametrize("fmt", ["gemma4", "function_gemma"])
def test_the_scanner_ends_the_body_where_a_character_walk_does_whatever_the_chunking(fmt: str) -> None:
    """Closers, stops and pieces of them inside and outside strings, cut anywhere: the scanner (which
    tells strings by counting quotes) ends where the walk does."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from streamparse.registry import get_format

    body = get_format(fmt).envelopes[0].body
    tokens = [body.quote, body.closer, *body.stops]
    pieces = st.sampled_from([*tokens, *(t[:len(t) // 2] for t in tokens), *(t[len(t) // 2:] for t in tokens),
                              "<", "|", "x", "{a:", "}", "\n"])

    @settings(max_examples=400, deadline=None)
    @given(st.lists(pieces, max_size=14), st.data())
    def check(parts: list[str], data: st.DataObject) -> None:
        text = "".join(parts)
        cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
        assert _scanned_end(body.scanner(), text, cuts) == _reference_end(text, body.quote, body.closer, body.stops)

    check()


def test_a_literal_as_the_template_writes_it_is_read_at_c_speed_with_its_json_text() -> None:
    """The template's spelling (no whitespace, keys bare, numbers as Python writes them) is read by the
    JSON respelling, whose text is handed over as the arguments' `json_text` (not written again)."""
    from streamparse.bodies.object_literal import _as_json
    from streamparse.families.gemma4 import BODY
    from streamparse.strict_json import json_text

    arguments = {"query": {"filters": [{"field": f"f{i}", "op": 'a "b", c: d', "value": [i, None, {"max": i * 2.5}]}
                                       for i in range(20)]},
                 "page": {"cursor": None, "size": 50}, "flags": [True, False, -0.5, 1e-3], "empty": {}, "none": []}
    body = BODY.write_call("search", arguments)
    found = _as_json(body, len("call:search"), BODY.quote)
    assert found is not None and found[0] == arguments and found[1] == json_text(found[0])  # (keys sorted)
