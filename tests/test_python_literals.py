"""`python_literals.literal` reads the common spellings itself: the same values and the same rejections
as `ast` (`_ast_literal`, what it falls back to), on drawn literals and on drawn near-literals."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

import jiter
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamparse import python_literals
from streamparse.python_literals import (
    _JITER_PAD,
    _PYTHON_NAMES,
    _as_json_names,
    _ast_literal,
    _canonical,
    _json_name,
    _json_value_end,
    _marked_in_a_string,
    _scanned_value_end,
    _unpadded,
    _Unsure,
    literal,
    literal_json,
    read_argument,
    value_end,
)
from streamparse.strict_json import ENTRIES_COUNTED, entries, json_text

# `ast` warns of an invalid escape (`'\s'`) in a drawn string while it reads it, in both readers alike.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:invalid octal escape sequence:DeprecationWarning")]

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=4)),
                      max_leaves=12)


@st.composite
def spelled(draw: st.DrawFn, value: Any) -> str:
    """`value` written as a model might: either quote, JSON or Python names, spaces and line breaks."""
    gap = draw(st.sampled_from(["", " ", "\n  ", "\t"]))
    if isinstance(value, bool) or value is None:
        return draw(st.sampled_from({True: ["True", "true"], False: ["False", "false"], None: ["None", "null"]}[value]))
    if isinstance(value, int):
        return draw(st.sampled_from([str(value), f"{value:_}", hex(value)]))
    if isinstance(value, float):
        return draw(st.sampled_from([repr(value), f"{value:e}", json.dumps(value)]))
    if isinstance(value, str):
        return draw(st.sampled_from([repr(value), json.dumps(value), json.dumps(value, ensure_ascii=False),
                                     f"'{value}'", f'"{value}"', draw(escaped(value))]))
    if isinstance(value, list):
        items = [draw(spelled(item)) for item in value]
        trailing = draw(st.sampled_from(["", ","])) if items else ""
        open_, close = draw(st.sampled_from(["[]", "()"]))
        return open_ + gap + ("," + gap).join(items) + trailing + gap + close
    pairs = [f"{draw(spelled(key))}{draw(st.sampled_from([':', ': ', ' : ']))}{draw(spelled(item))}"
             for key, item in value.items()]
    return "{" + gap + ("," + gap).join(pairs) + gap + "}"


# Escapes that are not a character's own: ones Python keeps as written (and warns of), ones JSON reads
# otherwise (`\\/`), a surrogate pair (one character to JSON, two lone ones to Python), a line
# continuation, and ones Python refuses.
ODD_ESCAPES = ["\\d", "\\/", "\\ud83d\\ude00", "\\ud800", "\\\n", "\\8", "\\477", "\\x4", "\\U00110000", "\\N{bogus}"]


@st.composite
def escaped(draw: st.DrawFn, value: str) -> str:
    """`value` in either quote, each character written as itself or as any escape Python has for it
    (`\\n`, `\\x..`, octal, `\\u....`, `\\U........`, `\\N{NAME}`), with odd escapes drawn between them."""
    quote = draw(st.sampled_from(["'", '"']))
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v",
             "\\": "\\\\", "'": "\\'", '"': '\\"', "\x00": "\\0"}
    out = []
    for char in value:
        code = ord(char)
        forms = [f"\\U{code:08x}"]
        if char not in (quote, "\\", "\n", "\r", "\x00"):
            forms.append(char)
        if char in named:
            forms.append(named[char])
        if code < 0x100:
            forms += [f"\\x{code:02x}", f"\\{code:o}", f"\\{code:03o}"]
        if code < 0x10000:
            forms.append(f"\\u{code:04X}")
        if unicodedata.name(char, ""):
            forms.append(f"\\N{{{unicodedata.name(char)}}}")
        out.append(draw(st.sampled_from(forms)))
        if draw(st.integers(0, 9)) == 0:
            out.append(draw(st.sampled_from(ODD_ESCAPES)))
    return quote + "".join(out) + quote


def typed(value: Any) -> Any:
    """The value with its types spelled out (True is not 1, -0.0 is not 0.0)."""
    if isinstance(value, list):
        return ["list", [typed(item) for item in value]]
    if isinstance(value, dict):
        return ["dict", [[key, typed(item)] for key, item in value.items()]]
    if isinstance(value, float):
        return ["float", value.hex() if math.isfinite(value) else repr(value)]
    return [type(value).__name__, value]


def outcome(read: Any, text: str, raw: bool) -> Any:
    try:
        return typed(read(text, raw))
    except ValueError as error:
        return ["rejected", str(error)]


def agree(text: str, raw: bool) -> None:
    assert outcome(literal, text, raw) == outcome(_ast_literal, text, raw), text
    try:
        value, written = literal_json(text, raw)
    except ValueError:
        return
    assert written is None or written == json_text(value), text  # jiter's reading writes the value


@settings(max_examples=400, deadline=None)
@given(VALUES.flatmap(spelled), st.booleans())
def test_drawn_literals_read_as_ast_reads_them(text: str, raw: bool) -> None:
    agree(text, raw)


NEAR = st.text(alphabet=list("[]{}(),:'\"\\ \n\r\t-+.eE0123456789_xjTrueFalsNonlb#\x00\ud800é/uUdD8N"), max_size=16)


@settings(max_examples=600, deadline=None)
@given(NEAR, st.booleans())
@example("'a' 'b'", False)
@example("'a\\nb'", True)
@example('{"a": 1, "a": 2}', False)
@example("[" * 60 + "]" * 60, False)
@example("1e999", False)
@example("01", False)
@example("'''x'''", True)
@example('{"a": True, "b": [None, "False"]}', False)
@example('{"a": Truex}', False)
@example('[1, {"k": True}, (2, 3)]', False)
@example("[" * 200 + "]" * 200, False)  # as deep as Python's parser nests
@example("[" * 201 + "]" * 201, False)
@example('{"a": ' * 200 + "1" + "}" * 200, True)
@example("[1e308, -2.5E-3, 1E5]", False)
@example("[1e309]", False)
@example('{"a": "x\\/y"}', False)
@example('["\\ud83d\\ude00"]', False)
@example("['it', 'is']", True)
@example("{'a': True, 'b': 'None'}", False)
@example("['a\\'b']", False)
@example("['C:\\dir', \"\\n\"]", True)
@example("\"\\d\\/\"", False)
@example('{"a": 1, "b": [2.5, -0.0, "x"], "c": true}', False)  # as `json.dumps` writes it
@example('{"a": 1, "a": 1}', False)  # as it writes a dict, but a key twice
@example('[-0, 1.10, 1e5, 1E5, 0.0001, 0.00001, 1234567890123456789.5]', False)
@example('["\\u0041", "\\u001f", "\\u001F", "\\t", "\\u0009", "\\\\", "\\""]', False)
@example('{"a": "\\"True\\"", "b": None}', False)  # a name inside a string with escaped quotes
@example('{"a": "x\\\\", "b": None, "c": "None"}', False)
@example('{"k": "Tr\\\\ue", "b": True}', False)  # a name made by taking the escapes out
@example("['True', 'x']", True)
def test_near_literals_read_and_rejected_as_ast_does(text: str, raw: bool) -> None:
    agree(text, raw)


def test_the_common_spellings_are_read() -> None:
    assert literal('{"city": "Paris", "days": [1, 2.5, -3e2], "ok": true, "n": None}') == {
        "city": "Paris", "days": [1, 2.5, -300.0], "ok": True, "n": None}
    assert literal('{"a": True, "b": "True or None", "c": [None, false, 1.5]}') == {
        "a": True, "b": "True or None", "c": [None, False, 1.5]}  # Python's names outside strings only
    assert literal("'C:\\dir\\n'", raw_single_quotes=True) == "C:\\dir\\n"  # LFM2.5: kept as written


NAMED = st.recursive(st.one_of(st.booleans(), st.none(), st.text(alphabet=list('TrueFalsNon"\\ x'), max_size=12)),
                     lambda inner: st.one_of(st.lists(inner, max_size=4),
                                             st.dictionaries(st.text(alphabet="TrueNon", max_size=5), inner,
                                                             max_size=4)), max_leaves=10)


def python_names(text: str) -> str:
    """JSON text with its names outside strings written as Python's (`json.dumps` escapes every quote)."""
    parts = text.replace("\\\\", "\x01").replace('\\"', "\x02").split('"')
    parts[::2] = [part.replace("true", "True").replace("false", "False").replace("null", "None")
                  for part in parts[::2]]
    return '"'.join(parts).replace("\x02", '\\"').replace("\x01", "\\\\")


@given(NAMED)
def test_python_names_are_respelled_outside_strings_only(value: Any) -> None:
    """The names marked and told outside strings respell the text as the one regex pass does."""
    text = python_names(json.dumps(value))
    assert _as_json_names(text) == _PYTHON_NAMES.sub(_json_name, text)
    assert literal(text) == value


NEAR_NAMES = st.lists(st.sampled_from(['"', '\\', "\\\\", '\\"', "True", "False", "None", "true", "Tru", "e",
                                       "\x01", "\x02", "[", "]", "{", "}", ":", ",", " ", "a", "1", "é"]),
                      max_size=24).map("".join)


def _read(text: str) -> object:
    try:
        return jiter.from_json(text.encode("utf-8", "surrogatepass"))
    except ValueError:
        return ValueError


@given(NEAR_NAMES)
@example('"\\True"')  # a backslash before a mark: inside the string
@example('"a" True "b"')
@example('"True" "')  # quotes that do not pair
@example('"\\"True\\""')  # escaped quotes around a name in a string
def test_respelled_names_read_as_the_regex_pass_reads_them(text: str) -> None:
    """On any text: what jiter reads after the names are respelled is what it reads after the regex
    pass respelled them (both refuse, or both give the same value)."""
    assert _read(_as_json_names(text)) == _read(_PYTHON_NAMES.sub(_json_name, text))


def test_values_separated_by_commas_are_a_tuple_not_the_first_value() -> None:
    """Several JSON values with commas between them are one tuple to Python (read as a list), never the
    first of them (jiter is shown the text inside lists that bound its depth)."""
    assert literal("[1], [2]") == [[1], [2]]
    assert literal('{"a": 1}, {"b": 2}') == [{"a": 1}, {"b": 2}]
    assert literal("[1] , 2") == [[1], 2]
    assert literal_json('"a", "b"') == (["a", "b"], None)


def test_the_value_written_by_json_dumps_is_its_own_json_text() -> None:
    text = '{"a": [1, 2.5, "x \\"y\\""], "b": {"c": null}, "d": true}'
    assert literal_json(text) == (json.loads(text), text)
    assert literal_json("{'a': 'b'}") == ({"a": "b"}, '{"a": "b"}')  # single quotes respelled
    assert literal_json('{"a":1}') == ({"a": 1}, '{"a": 1}')  # JSON, but not as it writes it
    assert literal_json("(1, 2)") == ([1, 2], None)  # not JSON: written by the caller


@pytest.mark.parametrize("strings", [0, 1, 40])
@pytest.mark.parametrize(("last", "inside"), [
    ('"b": True', False), ('"b": "x True"', True), ('"b": "x \\" True"', True), ('"b": "x \\" True \\""', True),
    ('"b": "x \\\\", "c": True', False), ('"b": "x", "c": "y", None', False), ('"b": "x"" None', True),
    ('"b": "False', True)])
def test_a_name_is_found_inside_a_string_or_not(strings: int, last: str, inside: bool) -> None:
    text = "{" + "".join(f'"k{i}": "v", ' for i in range(strings)) + last + "}"
    marked = re.sub("True|False|None", lambda match: chr(1 + ["True", "False", "None"].index(match.group())), text)
    assert _marked_in_a_string(marked.encode()) is inside


JSON_LIKE = st.one_of(VALUES.map(lambda value: python_names(json.dumps(value))),
                      VALUES.map(lambda value: json.dumps(value, ensure_ascii=False, indent=1)),
                      st.builds(str.__add__, st.sampled_from(["[", "{", '"']), NEAR))
AFTER = st.sampled_from(["", ",", ", b=1)", ")", "]", "}", " \n ,", "\t)", " x", " 'a'", '"b"', " + 1", "\x0c,",
                         "\ud800,", "é)", "(1)", '""")', "'''"])


@settings(max_examples=400, deadline=None)
@given(JSON_LIKE, AFTER, st.booleans(), st.sampled_from(["", "f(a=", " "]))
def test_a_value_ends_where_the_scan_ends_it(value: str, after: str, raw: bool, before: str) -> None:
    """jiter's look through a JSON value ends it where the regular expressions do, whatever follows."""
    text = before + value + after
    assert value_end(text, len(before), raw) == _scanned_value_end(text, len(before), raw), text


@pytest.mark.parametrize("size", [10, 1000, 1030, 9000, 70_000])  # past one look, and past several
def test_a_long_value_is_looked_through_as_often_as_needed(size: int) -> None:
    value = json.dumps({"k": ["x" * 7] * (size // 10), "s": "é\\n" * (size // 3), "n": None}).replace("null", "None")
    for after, end in (("", len(value)), (", b=2)", len(value)), ("\n  )", len(value) + 3)):
        assert _json_value_end(value + after, 0) == end
    assert _json_value_end(value + " x)", 0) is None  # more than one expression: the scan's
    plain = value.replace("None", "1")  # no names in the value, names after it: shown as written
    assert _json_value_end(plain + ", b=True, c=None)", 0) == len(plain)
    assert _json_value_end(plain.replace("1}", "Nonesuch}"), 0) is None  # a name's look-alike
    assert _json_value_end(value[:-1], 0) is None  # does not close


ARGUMENT_AFTER = st.sampled_from([")", ",)", ", b=1)", " , b = [2])", "\n)", "), g(c=1)]", ", {1: 2})", ", b=f(x))",
                                  ", 'a', b=2)", " + 1, b=2)", "]", "", ", b==2)", '"), b=1)', "'], c=(1))"])


@settings(max_examples=500, deadline=None)
@given(JSON_LIKE, ARGUMENT_AFTER, st.booleans())
@example('{"k": "x\\"), b=1"}', ", b=2)", False)  # an `=` and a `)` inside a string, before the end
@example("['a', 'b']", ")", True)
def test_a_value_read_where_its_end_is_guessed_is_the_one_found_by_its_end(value: str, after: str, raw: bool) -> None:
    """Where `read_argument` reads a value up to a guessed end, `value_end` ends the value there (up
    to whitespace) and `literal_json` reads that text to the same value and JSON text."""
    text = "f(a=" + value + after
    read = read_argument(text, 4, {})
    if read is None:
        return
    end, got, written = read
    found = value_end(text, 4, raw)
    assert found is not None and not text[end:found].strip(), (text, end, found)
    assert literal_json(text[4:found], raw) == (got, written)


def test_an_end_is_guessed_at_the_next_keyword_or_the_calls_close() -> None:
    text = 'f(a={"x": "y=1)"}, b=[1, True], c="s", d=1)'
    first = read_argument(text, 4, {})
    assert first is not None and first[0] == text.index("}, b=") + 1 and first[1] == {"x": "y=1)"}
    second = read_argument(text, text.index("[1"), {})
    assert second is not None and second[1:] == ([1, True], "[1, true]")
    assert read_argument(text, text.index('"s"'), {})[1] == "s"  # type: ignore[index]
    assert read_argument(text, text.index("1)"), {}) is None  # a number: its end is found by the scan
    tried: dict[object, object] = {}
    positional = 'f({"a": 1}, {"b": 2}, k=3)'  # the first guess, past two values, reads to no value
    assert read_argument(positional, 2, tried) is None and tried
    assert read_argument(positional, positional.index('{"b"'), tried) is None  # read once only
    assert read_argument(positional, positional.index('{"b"'), {})[1] == {"b": 2}  # type: ignore[index]


@given(st.text(), st.booleans())
def test_a_json_string_reads_to_its_text_and_json_dumps_writes_it(value: str, ascii_only: bool) -> None:
    """A string spelled as JSON (escaped as `json.dumps` escapes, or every non-ASCII character as
    `\\u`): its value, and its JSON text as `json.dumps(value, ensure_ascii=False)` writes it."""
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate: not a value
        return
    text = json.dumps(value, ensure_ascii=ascii_only)
    if ascii_only and any(ord(char) > 0xFFFF for char in value):  # a pair of escaped surrogates: two to Python
        with pytest.raises(ValueError, match="surrogate"):
            literal_json(text)
        return
    assert literal_json(text) == (value, json.dumps(value, ensure_ascii=False))


def test_a_string_with_escapes_json_dumps_does_not_write_is_written_again() -> None:
    assert literal_json('"caf\\u00e9 \\u0041"') == ("café A", '"café A"')
    assert literal_json('"\\u000a"') == ("\n", '"\\n"')
    assert literal_json('"a\\/b"')[0] == "a\\/b"  # `\/` is two characters to Python (read as it reads them)


# `_canonical`: the proof that `json_text` of jiter's reading is the text itself, without writing it.
# Texts are written as `json.dumps` writes them, but for spellings it does not write drawn in now and
# then: each is one `_canonical` must catch, or one it must not take for a flaw (inside strings).
TEXT_CHARS = [*", : [ ] { } \" \\ / 0 1 5 . - e E a b é 😀 \u2028 \x7f \x01 \n \t",
              "1.50", "-0", "1e5", "12345678901234567", "\\u", "True", ", ", ": ", "  "]
SEPARATORS = {", ": [",", " ,", " , ", ",  ", ",\n", ",\t"], ": ": [":", " :", " : ", ":  ", ":\r"]}
FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.floats(1e-4, 1e16), st.floats(-1e16, -1e-4),
                   st.builds(lambda digits, point: digits / 10 ** point, st.integers(-10 ** 6, 10 ** 6),
                             st.integers(0, 9)),
                   st.sampled_from([0.0, -0.0, 1e5, 1.5, 2.5, 10.0, 0.0001, 0.00001, 1e15, 1e16, 1e22, 0.1, 1 / 3,
                                    123456789.12345, 1234567890.123456, 8.000000000000002, 5e-324, -2.5e-3]))
# Strings of the characters that matter to the proof; most end in a letter (one ending in a space, a
# bracket or a separator is left to `json_text`, and so is all the text around it).
STRINGS = st.tuples(st.lists(st.sampled_from(TEXT_CHARS), max_size=6).map("".join),
                    st.sampled_from(["x", "y", "é", "1", "", " "])).map("".join)
KEYS = st.one_of(st.sampled_from(["a", "b", "c", "key"]), STRINGS)
PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-12, 12), st.just(0), FLOATS, FLOATS, STRINGS),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=14)


@st.composite
def dumps_like(draw: st.DrawFn, value: Any, python_names: bool = False, odd_in: int = 0) -> str:
    """`value` as `json.dumps(value, ensure_ascii=False)` writes it, each token now and then (one in
    `odd_in`, drawn for the whole text) spelled otherwise: spaces around separators and brackets,
    `-0`, floats with trailing 0s, exponents or more digits than their own, escapes it does not
    write (`\\u`, `\\/`), a key written twice, Python's names."""
    odd_in = odd_in or draw(st.sampled_from([5, 20, 60]))

    def odd() -> bool:
        return draw(st.integers(0, odd_in - 1)) == 0

    def written(inner: Any, names: bool = python_names) -> str:
        return draw(dumps_like(inner, names, odd_in))

    def separator(canonical: str) -> str:
        return draw(st.sampled_from(SEPARATORS[canonical])) if odd() else canonical

    def opener(char: str) -> str:
        return char + " " if odd() else char

    def closer(char: str) -> str:
        return draw(st.sampled_from([" ", "\n"])) + char if odd() else char

    if value is None or isinstance(value, bool):
        name = json.dumps(value)
        python = {"null": "None", "true": "True", "false": "False"}[name]
        return python if python_names and draw(st.booleans()) else name
    if isinstance(value, int):
        return "-0" if value == 0 and odd() else str(value)
    if isinstance(value, float):
        if not odd():
            return repr(value)
        return draw(st.sampled_from([repr(value) + "0", f"{value:e}", f"{value:.0e}", f"{value:E}", f"{value:.20f}",
                                     f"{value:.3f}", f"{value:.1f}", f"{value:f}".rstrip("0"), f"{value:.15g}",
                                     f"{value:.16g}", f"{value:.17g}"]))
    if isinstance(value, str):
        if not odd():
            return json.dumps(value, ensure_ascii=False)
        return draw(st.sampled_from([json.dumps(value), json.dumps(value, ensure_ascii=False).replace("/", "\\/"),
                                     json.dumps(value, ensure_ascii=False).replace("a", "\\u0061")]))
    if isinstance(value, list):
        items = [written(item) for item in value]
        return opener("[") + "".join(item if not i else separator(", ") + item for i, item in enumerate(items)) \
            + closer("]")
    keys = [written(key, False) for key in value]
    if keys and odd():
        keys.append(draw(st.sampled_from(keys)))  # a key written twice
    pairs = [key + separator(": ") + written(item) for key, item in zip(keys, [*value.values(), 0], strict=False)]
    return opener("{") + "".join(pair if not i else separator(", ") + pair for i, pair in enumerate(pairs)) \
        + closer("}")


CONTAINERS = st.one_of(st.lists(PLAIN, max_size=5), st.dictionaries(KEYS, PLAIN, max_size=5))


def _as_jiter_reads(data: bytes) -> Any:
    """jiter's reading of `data` as `_as_json` has it (nesting bounded as Python bounds it); None
    where it does not read."""
    try:
        return _unpadded(jiter.from_json(b"[" * _JITER_PAD + data + b"]" * _JITER_PAD, allow_inf_nan=False))
    except (ValueError, _Unsure):
        return None


@settings(max_examples=600, deadline=None)
@given(CONTAINERS.flatmap(dumps_like))
@example('{"a": [1, 2.5, "x, y: z"], "b": null}')
@example('{"a": -0}')
@example('[1.50]')
@example('[1e5, 1E5]')
@example('[0.00001]')
@example('[12345678901234567]')
@example('[9.529199866759897]')  # 16 digits: not the double's own (`repr` writes ...898)
@example('[0.1000000000000000055]')  # 19 digits
@example('["\\u0061"]')
@example('["a\\/b"]')
@example('{"a": 1, "a": 2}')
@example('{"a": {}, "b": [], "c": [[]]}')
@example('[1,2]')
@example('[1 , 2]')
@example('[ 1]')
@example('[1]\n')
@example('{"a":  1}')
@example('["a", "b" ]')
@example('["\\"", "\\\\", "\\\\\\"", "x\\\\"]')
@example('["a,", "b"]')  # a string ending in a separator: left to `json_text`
@example('["a ", "[", "b"]')  # ending in a space or `[`: its closer is taken for an opener
@example('[" " ]')  # and where that is not found out, the space before `]` is taken to be in a string
def test_a_text_proven_canonical_is_what_json_dumps_writes(text: str) -> None:
    proof_holds(text)


def proof_holds(text: str) -> None:
    """Wherever `_canonical` takes `text`, `json_text` of jiter's reading writes it back as it is."""
    data = text.encode()
    value = _as_jiter_reads(data)
    if isinstance(value, (dict, list)) and _canonical(data, entries(value)):
        assert json_text(value) == text


def _spellings(number: float) -> st.SearchStrategy[str]:
    """`number` as `repr` writes it and as it might be written otherwise: more or fewer digits, 0s
    at the end, an exponent, no exponent at all, its last digit one off, its int, `-0`."""
    shortest = repr(number)
    one_off = shortest[:-1] + "13"[shortest[-1] == "1"] if shortest[-1].isdigit() else shortest
    return st.sampled_from([shortest, shortest + "0", one_off, f"{number:e}", f"{number:.0e}", f"{number:.20f}",
                            f"{number:.3f}", f"{number:f}".rstrip("0"), f"{number:.15g}", f"{number:.16g}",
                            f"{number:.17g}", str(int(number)) if abs(number) < 1e30 else "1", "-0", "-0.0"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(FLOATS.flatmap(_spellings), min_size=1, max_size=3), st.sampled_from(["[{}]", '{{"a": [{}], "b": 1}}']))
@example(["9.529199866759897"], "[{}]")
@example(["0.00001", "1e5"], "[{}]")
def test_a_number_proven_canonical_is_written_as_it_stands(numbers: list[str], around: str) -> None:
    """Numbers drawn in every spelling, in a text otherwise as `json.dumps` writes it: where the
    proof takes the text, `json_text` writes each number as it stands."""
    proof_holds(around.format(", ".join(numbers)))


def as_json_outcome(read: Any, text: str) -> Any:
    try:
        value, written = read(text)
    except _Unsure:
        return "unsure"
    return typed(value), written


@settings(max_examples=500, deadline=None)
@given(st.one_of(CONTAINERS.flatmap(lambda value: dumps_like(value, python_names=True)), JSON_LIKE))
@example('{"a": True, "b": [None, 1.5, -0], "c": "None, True"}')
@example('{"a": 1, "a": 2}')
@example('[1e999]')
def test_as_json_reads_and_writes_as_writing_every_text_did(text: str) -> None:
    """With the proof tried on every text, whatever its size, `_as_json` gives the value and JSON text
    (or leaves the text) as it does without the proof, where it writes `json_text` every time."""
    if text[:1] not in ('[', '{', '"', "'"):
        return
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(python_literals, "_written_as_read", lambda data, value: False)
        written_every_time = as_json_outcome(python_literals._as_json, text)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(python_literals, "_PROVEN_FROM", 0)
        patched.setattr(python_literals, "_BYTES_PER_ENTRY", 10 ** 9)
        assert as_json_outcome(python_literals._as_json, text) == written_every_time, text


@pytest.mark.parametrize("text", [
    '{"a": [1, 2.5, -3, -0.5, -0.0, 0.0, 0.0001, 1234567.125], "b": {"c": null, "d": true, "e": false}}',
    '{"a": {}, "b": [], "c": [[], {}], "d": [{}]}',
    '["say \\"hi\\"", "C:\\\\dir\\\\", "\\\\\\"", "line\\nbreak\\ttab\\r\\b\\f", "\x7f \u2028 é 😀 /"]',
    '{"key: x": "a, b: c", "k": "[1 , 2]", "t": " x", "u": "1.50 -0 1e5 12345678901234567"}',  # look-alikes inside
    '[1234567890123456, -1234567890123456, 12345678901234.0, 1234567890123.45]',  # 16 digits, and 15 with a dot
    "[" + ", ".join(f'{{"f": "v{i}", "n": {i}, "x": {i}.5, "ok": true}}' for i in range(300)) + "]",
])
def test_what_json_dumps_writes_is_proven(text: str) -> None:
    data = text.encode()
    value = jiter.from_json(data)
    assert json_text(value) == text
    assert _canonical(data, entries(value))


@pytest.mark.parametrize("text", [
    '[-0]', '[1.50]', '[0.10]', '[1e5]', '[1E5]', '[1.5e-3]', '[0.00001]', '[1.5E+2]', '[0.1000000000000000055]',
    '["\\u0061"]', '["a\\/b"]', '{"a": 1, "a": 2}', '[{"a": 1, "b": 2, "a": 3}]',
    '[1,2]', '[1 , 2]', '[ 1]', '[1 ]', '[1,  2]', '{"a":1}', '{"a" : 1}', '{"a":  1}', '[1,\n2]', '[1,\t2]',
    '[1,\r2]', '{ "a": 1}', '{"a": 1 }', '[[] ]', '[{} , 1]',
])
def test_a_spelling_json_dumps_does_not_write_is_left_to_json_text(text: str) -> None:
    data = text.encode()
    value = jiter.from_json(data)
    assert json_text(value) != text
    assert not _canonical(data, entries(value))


@pytest.mark.parametrize("text", [
    '["a,", "b"]', '{"k:": 1}', '["a ", "b"]', '["[", "b"]', '{"{": 1}',  # a string ending so: its end is not told
    '["\\u0007"]',  # `json.dumps`'s own `\\u` escape: no `\\u` is taken
    '[12345678901234567]', '[123456789012345.0]', '[1e+16]', '[1.00001]',  # numbers left whole
    '["1.50", "2.50", "3.50", "4.50", "5.50"]',  # more look-alikes inside strings than are looked through
])
def test_what_json_dumps_writes_but_the_proof_leaves(text: str) -> None:
    """Texts `json.dumps` writes that the proof does not take (`json_text` then writes them)."""
    data = text.encode()
    value = jiter.from_json(data)
    assert json_text(value) == text
    assert not _canonical(data, entries(value))


def test_entries_are_counted_in_every_container_at_every_depth() -> None:
    assert ENTRIES_COUNTED
    assert entries(jiter.from_json(b'{"a": [1, {"b": [], "c": "d"}], "e": {}, "f": [[null]]}')) == 9
    assert entries([]) == 0


def test_a_long_text_written_as_json_dumps_writes_it_is_not_written_again() -> None:
    """`_as_json` returns the text itself where it is proven canonical and dense (a short entry per
    ten bytes or so); a text of long strings it writes (`json.dumps` costs less than the proof)."""
    dense = json.dumps([{"f": f"v{i}", "n": i, "x": i + 0.5, "ok": i % 2 == 0, "no": None} for i in range(400)])
    sparse = json.dumps(["x" * 200] * 40)

    def refuse(value: Any) -> str:
        raise AssertionError("written")

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(python_literals, "json_text", refuse)
        value, written = python_literals._as_json(dense.replace("true", "True").replace("null", "None"))
        assert written == dense and value == json.loads(dense)
        with pytest.raises(AssertionError, match="written"):
            python_literals._as_json(sparse)
        with pytest.raises(AssertionError, match="written"):
            python_literals._as_json(dense.replace("}, {", "},{", 1))
