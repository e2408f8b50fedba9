"""pythonic (Llama 3.2 / 4 pythonic prompts, Granite; the `pythonic` body kind lfm2 reads too): the spec,
as FORMATS.md and decisions 19-21 state it.

No real template renders this format; the values are those the LFM2.5 renders show. Every example is
checked with `parse`, and streamed one character at a time in both emit modes.
"""

from __future__ import annotations

import json
import time

import pytest
from conftest import agreeing
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse import Message, StreamParser, Token
from streamparse.bodies.pythonic import BracketScanner, ListRead, PythonicCalls, PythonicStreamer
from streamparse.spec import ArgumentsFragment, CallStart, Envelope, ParsedCall
from streamparse.validation import ToolSet

FMT = "pythonic"


def read(text: str, **options: object) -> Message:
    """parse(text), checked against 1-character streams in both emit modes."""
    return agreeing(text, FMT, **options)


def calls(message: Message) -> list[tuple[str, dict[str, object]]]:
    return [(c.name, c.arguments) for c in message.tool_calls]


def test_a_list_of_calls_with_dotted_names() -> None:
    message = read('[get_weather(location="Paris, France", unit="celsius"), Calendar.create_event(title=\'Sync\')]')
    assert calls(message) == [("get_weather", {"location": "Paris, France", "unit": "celsius"}),
                              ("Calendar.create_event", {"title": "Sync"})]
    assert message.tool_calls[0].arguments_json == '{"location": "Paris, France", "unit": "celsius"}'


def test_lfm25_values_python_and_json_literals() -> None:
    text = ("[create_event(title='Team \"sync\" — Q3', duration_minutes=45, all_day=False, priority=0.75, "
            "location=None, attendees=[{'name': 'Zoë', 'optional': False}], metadata={\"ok\": true, \"n\": null}, "
            "neg=-3, empty={})]")
    assert calls(read(text)) == [("create_event", {
        "title": 'Team "sync" — Q3', "duration_minutes": 45, "all_day": False, "priority": 0.75, "location": None,
        "attendees": [{"name": "Zoë", "optional": False}], "metadata": {"ok": True, "n": None}, "neg": -3,
        "empty": {}})]


def test_escapes_are_decoded_and_strings_may_hold_brackets() -> None:
    text = '[f(a="x\\ny\\t\\"q\\"", b=' + "'it\\'s ] ) [g('" + ")]"
    assert text == '[f(a="x\\ny\\t\\"q\\"", b=\'it\\\'s ] ) [g(\')]'
    assert calls(read(text)) == [("f", {"a": 'x\ny\t"q"', "b": "it's ] ) [g("})]


def test_no_arguments_and_a_trailing_comma() -> None:
    assert calls(read("[list_calendars()]")) == [("list_calendars", {})]
    assert calls(read("[f(a=1,), g(),]")) == [("f", {"a": 1}), ("g", {})]


@pytest.mark.parametrize(("text", "why"), [
    ('[f("Paris")]', "positional"), ("[f(a=1, a=2)]", "twice"), ("[f(*args)]", "positional"),
    ("[f(**kw)]", "positional"), ("[f(a=g())]", "not a literal"), ("[f(a=x)]", "not a literal"),
    ("[f(a=1+2)]", "not a literal"), ("[f(a={1, 2})]", "not a literal"), ("[f(a={1: 2})]", "key"),
    ("[f(a=1e999)]", "double"), ("[f(a=b'x')]", "bytes"),
])
def test_decision_19_what_is_not_keyword_literals_rejects_that_call(text: str, why: str) -> None:
    message = read(text.replace("]", ", ok(x=1)]"))
    assert calls(message) == [("ok", {"x": 1})]
    assert [r.status for r in message.rejected] == ["invalid_json"] and why in message.rejected[0].errors[0]


def test_decision_20_a_list_must_end_the_output() -> None:
    message = read("Let me check.\n[get_time(timezone='UTC')]  \n")
    assert message.content == "Let me check." and calls(message) == [("get_time", {"timezone": "UTC"})]
    for prose in ["see [f(x)] below", "[f(a=1)] and more", "[link](url) text", "a [b] c", "[]", "[ f (",
                  "call [f(a=1)]!"]:
        parsed = read(prose)
        if prose != "[ f (":
            assert parsed.content == prose and parsed.tool_calls == [] and parsed.rejected == []
    later = read("see [f(a=1)] below, then [g(b=2)]")
    assert later.content == "see [f(a=1)] below, then" and calls(later) == [("g", {"b": 2})]


def test_decision_21_an_unclosed_list_keeps_its_complete_calls() -> None:
    message = read("[f(a=1), g(b='x")
    assert calls(message) == [("f", {"a": 1})] and [r.status for r in message.rejected] == ["truncated"]
    assert calls(read("[f(a=1), g(b=2)")) == [("f", {"a": 1}), ("g", {"b": 2})]
    assert calls(read("[f(a=1),")) == [("f", {"a": 1})]


def test_llama4_python_start_and_end_are_framing() -> None:
    message = read("<|python_start|>[f(a=1)]<|python_end|>")
    assert calls(message) == [("f", {"a": 1})] and message.content == ""


def test_unknown_tools_and_schemas_are_checked() -> None:
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]
    message = read("[f(a='x'), h()]", tools=tools)
    assert [r.status for r in message.rejected] == ["schema_violation", "unknown_tool"]


def test_a_list_held_back_is_at_most_its_lead() -> None:
    parser = StreamParser(FMT)
    text = "Look: [link](https://example.com) and more"
    out = ""
    for char in text:
        out += "".join(d.content for d in parser.feed(char))
        assert parser.held_back <= len("[link]")
    out += "".join(d.content for d in parser.close())
    assert out == text


def test_token_aware_mode() -> None:
    tokens = [Token("<|python_start|>", special=True), Token("[f(a"), Token("=1)]"),
              Token("<|python_end|>", special=True)]
    assert calls(streamparse.parse(tokens, FMT, special_tokens="require")) == [("f", {"a": 1})]


# ----------------------------------------------------------------- the kind's progressive streamer (lfm2 uses it)

def _stream(kind: PythonicCalls, body: str, sizes: list[int]) -> list[object]:
    streamer = PythonicStreamer(kind)
    events: list[object] = []
    pos = k = 0
    while pos < len(body):
        step = sizes[k % len(sizes)]
        events += streamer.feed(body[pos:pos + step])
        pos, k = pos + step, k + 1
    return events


@given(sizes=st.lists(st.integers(1, 7), min_size=1, max_size=5))
def test_streamer_sends_each_name_then_its_arguments_exactly(sizes: list[int]) -> None:
    body = "[get_weather(location='Paris, (FR)', days=[1, 2]), Calendar.add(x={\"a\": \"]\"}), bad(1), g()]"
    kind = PythonicCalls()
    events = _stream(kind, body, sizes)
    final = kind.parse(Envelope("", body, "", True, False), ToolSet(None))
    assert [e for e in events if isinstance(e, CallStart)] == [
        CallStart(0, "get_weather"), CallStart(1, "Calendar.add"), CallStart(2, "bad"), CallStart(3, "g")]
    fragments = {e.k: e.text for e in events if isinstance(e, ArgumentsFragment)}
    assert fragments == {k: c.arguments_json for k, c in enumerate(final) if hasattr(c, "arguments_json")}
    assert json.loads(fragments[1]) == {"x": {"a": "]"}}


@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_streamer_of_one_builtin_call(sizes: list[int]) -> None:
    kind = PythonicCalls(listed=False, name_suffix=".call")
    events = _stream(kind, 'brave_search.call(query="a)b")', sizes)
    assert events == [CallStart(0, "brave_search"), ArgumentsFragment(0, '{"query": "a)b"}')]


@pytest.mark.parametrize(("value", "why"), [
    ("float('nan')", "not a literal"), ("1e999", "double"), ('"x\\ud800y"', "surrogate"),
    ("{'k': 1, 'k': 2}", "duplicate"),
    ("[" * 5000 + "]" * 5000, ""), ("NaN", "not a literal"), ("-Infinity", "not a literal"),
])
def test_arguments_are_strict_json_values(value: str, why: str) -> None:
    message = read(f"[f(a={value}), ok()]")
    assert [c.name for c in message.tool_calls] == ["ok"]
    assert [r.status for r in message.rejected] == ["invalid_json"] and why in message.rejected[0].errors[0]
    for call in message.tool_calls:
        assert json.loads(call.arguments_json) == call.arguments


def test_arguments_json_is_json_dumps_of_the_arguments_however_each_value_was_read() -> None:
    """Values jiter read as `json.dumps` writes them (their text kept), as JSON written otherwise, by
    the one-pass reader and by `ast`: `arguments_json` is `json.dumps(arguments)` all the same."""
    message = read('[f(a={"k": [1, 2.5, "x \\"q\\""], "n": None}, b={"k":1,"j" : [true]}, c=-0, d=1.10, '
                   "e=(1, 'two'), f='\\u00e9', g=\"caf\u00e9\", h=[])]")
    (call,) = message.tool_calls
    assert call.arguments == {"a": {"k": [1, 2.5, 'x "q"'], "n": None}, "b": {"k": 1, "j": [True]}, "c": 0,
                              "d": 1.1, "e": [1, "two"], "f": "\u00e9", "g": "caf\u00e9", "h": []}
    assert call.arguments_json == json.dumps(call.arguments, ensure_ascii=False)


# Bodies that make a reader of brackets and strings do the most work per character: brackets that
# never close, strings that never close inside them, nesting deeper than one match takes
# (`python_literals.balanced`), and many calls each too deep for it.
WORST_BODIES = {
    "open brackets": lambda n: "[f(a=" + "[" * n,
    "an open string in open brackets": lambda n: "[f(a=" + "[" * 9 + "'" + "x" * n,
    "open brackets of strings": lambda n: "[f(a=" + '["a", ' * (n // 6),
    "deep brackets, then text": lambda n: "[f(a=" + "[" * 12 + "1, " * (n // 3),
    "calls nested past a match": lambda n: "[" + "f(a=[[[[[[[[[[1]]]]]]]]]), " * (n // 27) + "g()]",
    "long values": lambda n: "[" + f"f(a={{'k': [1, \"{'x' * 50}\"]}}, b=True), " * (n // 70) + "g()]",
    # where a value's end is guessed (`read_argument`): at a keyword past many positional values, and
    # at `=`s and `)`s inside strings
    "positional values, then a keyword": lambda n: "[f(" + '{"a": [1]}, ' * (n // 12) + "k={})]",
    "ends in strings": lambda n: "[" + 'f(a={"s": "x), y=(1"}, b=["=)", "a"]), ' * (n // 40) + "g()]",
}


@pytest.mark.parametrize("fmt", ["pythonic", "lfm2"])
@pytest.mark.parametrize("shape", list(WORST_BODIES))
def test_worst_case_bodies_are_read_in_linear_time(fmt: str, shape: str) -> None:
    """Four times the text costs about four times the time, never the sixteen of quadratic work
    (best of three, and a wide margin: the machine is shared)."""
    def cost(size: int) -> float:
        body = WORST_BODIES[shape](size)
        text = f"<|tool_call_start|>{body}<|tool_call_end|>" if fmt == "lfm2" else body
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            streamparse.parse(text, fmt)
            best = min(best, time.perf_counter() - started)
        return best

    small, large = cost(25_000), cost(100_000)
    assert large < 9 * small + 0.05, (small, large)


# Values whose strings hold brackets, quotes and backslashes, brackets that do not close or nest past
# one match, triple quotes (the walker reads them as runs of plain strings), and what is not a value.
SCANNED_VALUES = ["1", "True", "'a)b'", '"]"', "'x\\''", '"\\\\"', "'C:\\\\'", "(1, 2)", "{'a': [1]}", "'unclosed",
                  "[1", ")", '"q\\"q"', "'''t'''", '"""a"]"""', "[" * 11 + "1" + "]" * 11, "f(x)", "'['", '"("',
                  "x" * 70, "'\\n'", "a.b", "-1e5", "[1,]"]
_CALL = st.builds(lambda name, arguments: f"{name}({', '.join(arguments)})", st.sampled_from(["f", "g.h", "k "]),
                  st.lists(st.builds("{}={}".format, st.sampled_from(["a", "b", "a", "c "]),
                                     st.sampled_from(SCANNED_VALUES)), max_size=4))


@given(st.lists(_CALL, max_size=5), st.booleans(), st.sampled_from(["]", ",]", "", "] after", " ]  "]),
       st.sampled_from(["", "  ", "\n"]))
def test_a_list_read_whole_by_its_scanner_ends_and_reads_as_when_walked(
        calls: list[str], raw: bool, close: str, lead: str) -> None:
    """`BracketScanner` with `read_list` (a long list in one piece): the same end as the walk, and
    the kind's parse of the calls it kept is the parse of the body."""
    text = (lead + "[" + ", ".join(calls) + close).ljust(80)
    kind = PythonicCalls("lfm2" if raw else "pythonic", raw_single_quotes=raw)
    walked, reading = BracketScanner(raw), BracketScanner(raw, kind.read_list)
    end = walked.scan(text, 0)
    assert reading.scan(text, 0) == end
    if end.end is not None:
        body = text[:end.safe]
        assert kind.parse(Envelope("", body, "", True, False, reading.decoded), ToolSet(None)) == kind.parse(
            Envelope("", body, "", True, False), ToolSet(None))


def test_a_long_list_in_one_piece_is_read_by_its_scanner_only() -> None:
    kind = PythonicCalls("pythonic")
    text = "[" + ", ".join(f"f(a={i}, b='{'x' * 40}')" for i in range(50)) + "]"
    scanner = BracketScanner(False, kind.read_list)
    assert scanner.scan(text, 0) == (len(text), len(text)) and scanner.decoded is not None
    assert scanner.decoded is not None
    kept = scanner.decoded.values[0][0]
    assert isinstance(kept, ListRead) and len(kept.calls) == 50
    parsed = kind.parse(Envelope("", text, "", True, False, scanner.decoded), ToolSet(None))
    assert all(call is read for call, read in zip(parsed, kept.calls, strict=True))  # not read again
    # Text that is not that body (a look-alike blanked, a cut) is read again.
    other = text.replace("a=7,", "a=8,")
    seventh = kind.parse(Envelope("", other, "", True, False, scanner.decoded), ToolSet(None))[7]
    assert isinstance(seventh, ParsedCall) and seventh.arguments["a"] == 8
    tripled = BracketScanner(False, kind.read_list)  # a triple quote in a value: walked, not read
    quoted = text.replace("a=7,", 'a="""]""",')
    assert tripled.scan(quoted, 0) == (len(quoted), len(quoted)) and tripled.decoded is None
    after = BracketScanner(False, kind.read_list)  # after the list's `]`: not the list's; read
    assert after.scan(text + '"""', 0) == (len(text), len(text)) and after.decoded is not None
