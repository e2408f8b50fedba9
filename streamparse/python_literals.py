"""Python literals as call arguments (pythonic call lists, Llama 3.1 built-ins): where one ends, and its value.

A value is read as `ast` reads it, never evaluated: strings (any quotes, escapes decoded),
numbers, `True`/`False`/`None` and their JSON spellings `true`/`false`/`null`, lists, tuples (as
lists) and dicts with string keys. Anything else (a name, a call, an expression, `*`/`**`
unpacking, sets, bytes, a number too large for a double, a lone surrogate, a key written twice)
is not a literal: `ValueError` saying what it is.

With `raw_single_quotes` (LFM2.5, whose template writes `'` + text + `'` without escaping), a
string in single quotes is read raw: it ends at the next `'`, and its backslashes, newlines and tabs
are kept as written (an inner `'` ends it early, so the value is then not a literal). Strings in
double quotes keep their escapes.

Cost: `value_end` takes a value's text in one match where its brackets nest at most `_LEVELS` deep
(`balanced`: C speed, whole strings at a time) and steps over deeper brackets one regex jump each.
`literal` hands a list, dict or string that JSON reads to the same value to jiter (`_as_json`:
escapes but `\\/` and escaped surrogates, Python's names and single quotes respelled where that
is exact; the value's JSON text is the text itself where `json.dumps` is proven to write it so,
`_canonical`, and is written otherwise), reads the other common spellings itself in one pass
(`_Reader`: strings, their escapes decoded by the tokenizer's own codec, decimal numbers, the six
names, lists and string-keyed dicts without trailing commas, a bounded depth) and hands anything
else to `ast.parse` of the value's text, linear in it (with raw single quotes, after one pass
that rewrites each raw string as a Python literal of the same text). jiter and the reader accept
only what `ast` reads to the same value and reject nothing themselves, so values and rejections
are `ast`'s by construction (a property test draws both).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from itertools import islice
from typing import Any, NamedTuple

import jiter

from .strict_json import ENTRIES_COUNTED, encodable, entries, json_text, overflows, trailing_at

_JSON_NAMES: dict[str, Any] = {"true": True, "false": False, "null": None}
_NESTED = re.compile(r"""["'()\[\]{}]""")  # inside brackets a comma ends nothing


def _string_patterns(quote: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A whole string in `quote`s, and in triple `quote`s, as `string_end` reads them: a backslash
    escapes the next character; a triple-quoted string ends at the first triple quote."""
    q = re.escape(quote)
    plain = re.compile(rf"{q}[^{q}\\]*+(?:\\[\s\S][^{q}\\]*+)*+{q}")
    triple = re.compile(rf"{q}{{3}}[^{q}\\]*+(?:(?:\\[\s\S]|{q}(?!{q}{q}))[^{q}\\]*+)*+{q}{{3}}")
    return plain, triple


# One regex match finds a string's end (C speed, however many escapes it holds).
STRINGS = {quote: _string_patterns(quote) for quote in "\"'"}
RAW_SINGLE_QUOTED = re.compile("'[^']*+'")


def string_end(text: str, pos: int, raw_single_quotes: bool = False) -> int | None:
    """Where the Python string whose quote is at `text[pos]` ends (after its closing quote), or
    None when the text ends first. Triple quotes are read as such; backslashes escape (except in a
    raw single-quoted string, which ends at the next `'`)."""
    quote = text[pos]
    if raw_single_quotes and quote == "'":
        match = RAW_SINGLE_QUOTED.match(text, pos)
    else:
        plain, triple = STRINGS[quote]
        match = (triple if text.startswith(quote * 3, pos) else plain).match(text, pos)
    return match.end() if match is not None else None


_STRUCTURE = r"""\"'()\[\]{}"""  # a character class's members: the quotes and the brackets
_LEVELS = 8  # bracket levels one match takes; deeper ones cost a walker's step per level past these


def balanced(strings: str, stops: str = "", levels: int = _LEVELS) -> re.Pattern[str]:
    """Whole strings (`strings`, a pattern), brackets that close within `levels` levels, and any other
    character but `stops` (outside brackets), as one match at C speed; the first character it does
    not take (an opener of deeper brackets, a closer, a stop, a quote whose string does not close) is
    the caller's to step over. Each alternative starts with characters no other one does and matches
    in one way, so there is one way to match any text, and every repetition is possessive (`*+`,
    `++`: the engine keeps no backtracking state, the same match at less cost): brackets that do not
    close are given up after one look at what they hold, and a character is looked at by at most
    `levels` + 1 matches."""

    def run(stop: str) -> str:
        return rf"[^{_STRUCTURE}{stop}]++"

    inside = rf"(?:{run('')}|{strings})*+"
    for _ in range(levels - 1):
        inside = rf"(?:{run('')}|{strings}|[\[({{]{inside}[\])}}])*+"
    return re.compile(rf"(?:{run(re.escape(stops))}|{strings}|[\[({{]{inside}[\])}}])*+")


def _whole_strings(raw_single_quotes: bool) -> str:
    """A pattern of one string as `string_end` reads it (triple-quoted where three quotes open it)."""
    quotes = [('"', False), ("'", raw_single_quotes)]
    return "|".join(RAW_SINGLE_QUOTED.pattern if raw else
                    f"{STRINGS[quote][1].pattern}|(?!{quote * 3}){STRINGS[quote][0].pattern}"
                    for quote, raw in quotes)


# What `value_end` takes in one match: at the top the value's text up to a `,` or a closer; inside
# brackets, everything up to the closer.
_VALUE_TEXT = {raw: (balanced(_whole_strings(raw), ","), balanced(_whole_strings(raw)))
               for raw in (False, True)}


def json_value_end(text: str, pos: int) -> int | None:
    """`value_end` of a list, dict or string that JSON reads (Python's names spelled as JSON's) to
    its end; None for any other value (`value_end` then finds its end). Such a value holds no
    triple quote outside its strings, and its strings are one each to Python."""
    return _json_value_end(text, pos) if text[pos:pos + 1] in _JSON_OPENERS else None


def value_end(text: str, pos: int, raw_single_quotes: bool = False, looked_through: bool = False) -> int | None:
    """Where the expression starting at `text[pos]` ends: at the first `,` or closing bracket
    outside strings and brackets, or the end of the text. None when it is empty or unbalanced.
    A list, dict or string that JSON reads is looked through by jiter (`_json_value_end`; not again
    where the caller did, `looked_through`); any other text, and that one where jiter does not say,
    is scanned (`_scanned_value_end`)."""
    if not looked_through and text[pos:pos + 1] in _JSON_OPENERS:
        end = _json_value_end(text, pos)
        if end is not None:
            return end
    return _scanned_value_end(text, pos, raw_single_quotes)


_JSON_OPENERS = ("[", "{", '"')
_FIRST_LOOK = 1024  # characters jiter is first shown; each next look shows `_LOOK_GROWTH` times as many
_LOOK_GROWTH = 16
_RESPELLED_GROWTH = 4  # where names are respelled the text shown past the value costs more: it grows slower


def _json_value_end(text: str, pos: int) -> int | None:
    """`value_end` of a value that JSON reads (Python's names spelled as JSON's) and that a `,` or a
    closer follows, or the end of the text: None where that is not so. Such a value is one
    expression with the same strings and brackets to Python (a JSON string holds no triple quote
    and reads to the same end), so it ends where jiter says what follows it starts. Once jiter
    refuses text that holds one of Python's names, the names are respelled everywhere, strings
    too: they are as long as JSON's and hold no quote or bracket.
    Cost: jiter looks at the value at native speed; where the text shown ends first it is shown
    `_LOOK_GROWTH` times as much, so a value is read about 1.07 times and at most its length times
    `_LOOK_GROWTH` plus `_FIRST_LOOK` characters are copied (where names are respelled, growing
    `_RESPELLED_GROWTH` times: read about 1.33 times, and copied at most its length times that)."""
    size = _FIRST_LOOK
    respelled = False
    while True:
        shown = text[pos:pos + size]
        whole = pos + size >= len(text)
        if respelled:
            shown = shown.replace("True", "true").replace("False", "false").replace("None", "null")
        try:
            jiter.from_json(shown.encode(), cache_mode="none")
        except ValueError as error:  # a raw lone surrogate too (UnicodeEncodeError)
            after = trailing_at(error, shown, 0, len(shown))
            if after is not None:
                return pos + after if shown[after] in ",)]}" else None
            if not str(error).startswith("EOF while parsing"):
                if respelled or ("True" not in shown and "False" not in shown and "None" not in shown):
                    return None
                respelled = True  # the same text again, its names spelled as JSON's
                continue
            if whole:
                return None
        else:
            if whole:
                return len(text)
        size *= _RESPELLED_GROWTH if respelled else _LOOK_GROWTH


# What a keyword argument's value written as JSON ends before: an `=` after `, NAME` (the next
# keyword) or the call's `)` (after a trailing `,` too), a closer of the value before either.
_BEFORE_KEYWORD = re.compile(r"""[\]}"'][ \t\r\n]*,[ \t\r\n]*[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*\Z""")
_BEFORE_CLOSE = re.compile(r"""[\]}"'][ \t\r\n]*(?:,[ \t\r\n]*)?\Z""")
_KEYWORD_LOOK = 96  # characters before an `=` looked through for its keyword and the value's closer
_GUESSES = 4  # `=`s and `)`s looked at for where a value ends, before its end is found by reading


def read_argument(text: str, pos: int, tried: dict[Any, Any]) -> tuple[int, Any, str] | None:
    """A call argument written as JSON at `text[pos]` (`literal_json` takes it: jiter, where JSON
    and Python agree), read where it ends: its end, value and `json_text`. The end is guessed at the
    first `=` of a next keyword or `)` of the call that a value's closer stands before (one of the
    first `_GUESSES`), and the text up to it read; None where no guess reads (the caller then finds
    the end, `value_end`, and reads the value). A JSON value read whole is one expression to Python
    with the same strings and brackets, so it ends there too.
    Cost: the value read once, with no pass to find its end first, after a find of the next `=`
    and `)` (C speed; where each is is kept in `tried`, the parse's cache, for every start up to it,
    so the text between is searched once) and a bounded look before them. A guess past the value's
    end (a positional argument follows it) is read once: `tried` keeps it, so a value before it
    does not read it again."""
    if text[pos:pos + 1] not in ("[", "{", '"', "'"):
        return None
    start = pos + 1
    for _ in range(_GUESSES):
        equals, close = _next(text, "=", start, tried), _next(text, ")", start, tried)
        at = min(equals, close)
        if at == len(text):
            return None
        start = at + 1
        look = max(pos, at - _KEYWORD_LOOK)
        before = (_BEFORE_CLOSE if at == close else _BEFORE_KEYWORD).search(text, look, at)
        if before is None:
            continue
        end = before.start() + 1
        key = ("read_argument", end)
        if key in tried:
            return None
        try:
            value, written = _as_json(text[pos:end])
        except _Unsure:
            tried[key] = True
            return None
        return end, value, written
    return None


def _next(text: str, char: str, start: int, found: dict[Any, Any]) -> int:
    """Where the next `char` at or after `start` is (`len(text)`: none), kept in `found` for every
    start up to it, so that the text between is searched once."""
    known = found.get(char)
    if known is not None and known[0] <= start <= known[1]:
        return int(known[1])
    at = text.find(char, start)
    at = len(text) if at < 0 else at
    found[char] = (start, at)
    return at


def _scanned_value_end(text: str, pos: int, raw_single_quotes: bool) -> int | None:
    """`value_end` by regular expressions. Cost: at the top and one level in, one match takes all
    the text whose brackets close within `_LEVELS` levels (`balanced`); deeper, one regex jump per
    quote or bracket. Brackets a match gave up are then stepped through before the next match, so
    a character is looked at a bounded number of times."""
    top, inside = _VALUE_TEXT[raw_single_quotes]
    depth = 0
    i = pos
    while True:
        if depth < 2:
            i = (inside if depth else top).match(text, i).end()  # type: ignore[union-attr]
        else:
            found = _NESTED.search(text, i)
            i = len(text) if found is None else found.start()
        if i == len(text):
            break
        char = text[i]
        if char in "\"'":
            after = string_end(text, i, raw_single_quotes)
            if after is None:
                return None
            i = after
            continue
        if char in "([{":
            depth += 1
        elif depth == 0:  # `,` or a closer
            break
        else:
            depth -= 1
        i += 1
    return i if depth == 0 and text[pos:i].strip() else None


class _Unsure(Exception):
    """The fast reader leaves this text to `ast`."""


_FAST_NAMES: dict[str, Any] = {"True": True, "False": False, "None": None, **_JSON_NAMES}
_GAP = re.compile(r"[ \t\r\n]*")  # inside brackets, where `ast` lets a line break pass
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = {'"': re.compile(r'"([^"\\\r\n\x00]*)"'), "'": re.compile(r"'([^'\\\r\n\x00]*)'")}
_RAW_PLAIN = re.compile("'([^'\x00]*)'")
_ENDS = frozenset(",:]})")  # what may follow a value: never a letter, a quote, an operator
_MAX_DEPTH = 40  # deeper than this goes to `ast`, which sets the bounds


# In a string with backslashes, what the reader leaves to `ast`, looked for once each `\\` is taken
# out (every backslash left then starts an escape, followed by what follows it in the string): an
# escape Python warns of (`\d`) or that is not ASCII text (`\N{...}`), an octal one past `\377`, a
# line break or NUL written raw.
_NOT_DECODED = re.compile(r"[\r\n\x00]|\\(?!['\"abfnrtv]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}"
                          r"|[0-3][0-7]{0,2}|[4-7](?![0-7]{2}))")


def _decoded(body: str) -> str:
    """The text of a string literal whose quotes held `body`, with its escapes decoded as Python's
    tokenizer does: its other characters as escapes of themselves, then the `unicode_escape` codec
    (the decoder the tokenizer calls); `_Unsure` for what `_NOT_DECODED` finds or the codec refuses."""
    if _NOT_DECODED.search(body.replace("\\\\", "")) is not None:
        raise _Unsure
    try:
        return body.encode("ascii", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:  # `\x4`, `\U00110000`
        raise _Unsure from None


class _Reader:
    """One left-to-right pass over the common spellings of a literal; `_Unsure` for anything else."""

    def __init__(self, text: str, raw_single_quotes: bool) -> None:
        self.text = text
        self.single = _RAW_PLAIN if raw_single_quotes else _PLAIN["'"]

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        if pos >= len(text):
            raise _Unsure
        char = text[pos]
        if char in "[{":
            if depth >= _MAX_DEPTH:
                raise _Unsure
            return (self.list if char == "[" else self.dict)(pos + 1, depth + 1)
        if char in "\"'":
            if text.startswith(char * 3, pos):  # a triple-quoted string is `ast`'s
                raise _Unsure
            match = (self.single if char == "'" else _PLAIN['"']).match(text, pos)
            if match is not None:
                value = match.group(1)
            elif self.single is _PLAIN["'"] or char == '"':  # a string with escapes (not a raw one)
                match = STRINGS[char][0].match(text, pos)
                if match is None:
                    raise _Unsure
                value = _decoded(match.group()[1:-1])
            else:
                raise _Unsure
            if not encodable(value):
                raise _Unsure
            return value, self.after(match.end())
        match = _NUMBER.match(text, pos)
        if match is not None:
            end = self.after(match.end())
            number = match.group()
            if match.group(1) is None and match.group(2) is None:
                if len(number) > 1000:  # the int limits of this Python are `ast`'s to apply
                    raise _Unsure
                return int(number), end
            value = float(number)
            if not math.isfinite(value):
                raise _Unsure
            return value, end
        match = _WORD.match(text, pos)
        if match is not None and match.group() in _FAST_NAMES:
            return _FAST_NAMES[match.group()], self.after(match.end())
        raise _Unsure

    def after(self, pos: int) -> int:
        """`pos` when what follows a value ends it (spaces skipped); `_Unsure` otherwise."""
        pos = _GAP.match(self.text, pos).end()  # type: ignore[union-attr]
        if pos < len(self.text) and self.text[pos] not in _ENDS:
            raise _Unsure
        return pos

    def list(self, pos: int, depth: int) -> tuple[list[Any], int]:
        text = self.text
        items: list[Any] = []
        pos = _GAP.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("]", pos):
            return items, self.after(pos + 1)
        while True:
            item, pos = self.value(pos, depth)
            items.append(item)
            if text.startswith("]", pos):
                return items, self.after(pos + 1)
            if not text.startswith(",", pos):
                raise _Unsure
            pos = _GAP.match(text, pos + 1).end()  # type: ignore[union-attr]

    def dict(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        text = self.text
        out: dict[str, Any] = {}
        pos = _GAP.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            return out, self.after(pos + 1)
        while True:
            if pos >= len(text) or text[pos] not in "\"'":
                raise _Unsure
            key, pos = self.value(pos, depth)
            if not text.startswith(":", pos) or key in out:
                raise _Unsure
            out[key], pos = self.value(_GAP.match(text, pos + 1).end(), depth)  # type: ignore[union-attr]
            if text.startswith("}", pos):
                return out, self.after(pos + 1)
            if not text.startswith(",", pos):
                raise _Unsure
            pos = _GAP.match(text, pos + 1).end()  # type: ignore[union-attr]


# Where JSON and Python read text that both take to different values (looked for in its UTF-8): the
# escape `\/` (`/` to JSON), an escaped surrogate (JSON pairs two; to Python each is alone, and
# refused), and a run of digits long enough for this Python's int limits, found in the text's digits
# mapped to `0` at C speed (a number that overflows a double is `inf` to jiter: `overflows` finds it).
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_DIGITS = bytes(ord("0") if byte in b"0123456789" else ord(" ") for byte in range(256))
_LONG_DIGITS = b"0" * 300
_DOUBLE_QUOTED = STRINGS['"'][0].pattern  # in text JSON takes, every string
# Python's names for JSON's, outside strings.
_PYTHON_NAMES = re.compile(_DOUBLE_QUOTED + "|True|False|None")
_AS_JSON = {"True": "true", "False": "false", "None": "null"}
_JSON_STRING = re.compile(_DOUBLE_QUOTED)
_PYTHON_DEPTH = 200  # brackets open at once that Python's parser takes (its tokenizer's MAXLEVEL)


def _deepest_jiter_list() -> int:
    """How deep jiter nests lists (its recursion limit, which is not part of its API: probed)."""
    low, high = 0, 4096
    while low < high:
        middle = (low + high + 1) // 2
        try:
            jiter.from_json(b"[" * middle + b"]" * middle)
            low = middle
        except ValueError:
            high = middle - 1
    return low


# Lists wrapped around a value so that jiter refuses one nested deeper than Python takes.
_JITER_PAD = max(0, _deepest_jiter_list() - _PYTHON_DEPTH)


def _json_name(match: re.Match[str]) -> str:
    return _AS_JSON.get(match.group(), match.group())


def _as_json_names(text: str) -> str:
    """`text` with Python's names outside strings spelled as JSON's, where it is JSON to jiter then:
    the names are as long as JSON's and no quote or backslash changes, so JSON reads the strings
    this reading saw. In its UTF-8 bytes each name is first written as one mark byte (`_MARKS`; a
    text that holds one itself takes the regular expression), the marks are told outside strings or
    not (`_marked_in_a_string`), and each mark is then written as JSON's name. Cost: a few passes at
    C speed (bytes, where a one-character replace is a `memchr`), where the regular expression
    costs a call a string."""
    if "True" not in text and "False" not in text and "None" not in text:
        return text
    if "\x01" not in text and "\x02" not in text and "\x03" not in text:
        marked = text.encode("utf-8", "surrogatepass").replace(b"True", b"\x01").replace(b"False", b"\x02") \
            .replace(b"None", b"\x03")
        if not _marked_in_a_string(marked):
            spelled = marked.replace(b"\x01", b"true").replace(b"\x02", b"false").replace(b"\x03", b"null")
            return spelled.decode("utf-8", "surrogatepass")
    return _PYTHON_NAMES.sub(_json_name, text)


def _marked_in_a_string(marked: bytes) -> bool:
    """Whether a mark (`_MARKS`) of `marked` may stand inside a JSON string (or its quotes do not
    pair). With its escaped backslashes and quotes taken out, each `"` opens or closes a string (no
    name holds either, so none is cut or lost). Only the quotes and marks are kept (every mark as
    one): a mark stands outside strings where an even number of quotes is before it, so every mark
    does where each run of quotes between two marks (and after the last) is even."""
    if b"\\" in marked:
        marked = marked.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes = marked.translate(_ONE_MARK, _NOT_QUOTES_OR_MARKS)
    return any(length & 1 for length in set(map(len, quotes.split(b"\x01"))))


_MARKS = b"\x01\x02\x03"  # True, False, None while they are told outside strings or not
_NOT_QUOTES_OR_MARKS = bytes(byte for byte in range(256) if byte not in b'"' + _MARKS)
_ONE_MARK = bytes.maketrans(_MARKS, b"\x01" * len(_MARKS))


# `_canonical` reads the text's bytes as lanes: each byte's classes, one bit each, become one byte
# (`_CLASSES`) of a big integer (`int.from_bytes`, byte i in bits 8i..8i+7), so that one integer
# operation looks at every byte at once. Shifted up 7 bits, each lane holds the previous byte's
# classes one bit down: `lanes & lanes << 7` marks, at bit 2k of a byte, that it has the class of
# bit 2k and the byte before it the class of bit 2k+1. Those are the pairs (the classes below, two
# by two): `"` after `[`, `{` or a space (a string that opens as `json.dumps` opens one), a space
# after `,` or `:`, `e` or `E` after a digit or `.` (an exponent), `]` or `}` after `[`, `{` or `,`
# (an empty container).
_QUOTE, _BEFORE_STRING, _SPACE, _SEPARATOR, _EXPONENT, _DIGIT, _CLOSER, _ENTRY = (1 << bit for bit in range(8))
_CLASS_OF = {b'"': _QUOTE, b"[{": _BEFORE_STRING | _ENTRY, b" ": _BEFORE_STRING | _SPACE, b":": _SEPARATOR,
             b",": _SEPARATOR | _ENTRY, b"eE": _EXPONENT, b"0123456789.": _DIGIT, b"]}": _CLOSER}
_CLASSES = bytes(sum(bits for chars, bits in _CLASS_OF.items() if byte in chars) for byte in range(256))
_LONG_NUMBER = bytes([_DIGIT]) * 17  # digits and `.`s in a row: more than a float of 15 digits holds
# A `\u` or `\/` escape (`json.dumps` writes neither), or an escaped `\` before `u` or `/` where `\\`
# is not taken out: one search that stops at backslashes only (two for the two pairs of bytes look
# at every byte twice, and cost more unless one byte in five or so is a backslash).
_UNWRITTEN_ESCAPE = re.compile(rb"\\[u/]")
# Numbers `json.dumps` does not write so: a fraction of two digits or more that ends in 0 (`1.50`),
# or that starts with four 0s (`0.00001` is `1e-05` to `repr`; `1.00001` is left too), and `-0`
# (the int 0, written `0`; a digit never follows it in JSON, as in the date `2024-01-05`).
_FRACTION = re.compile(rb"\.(?:0000|[0-9]++(?<=[0-9]0))")
_NEGATIVE_ZERO = re.compile(rb"-0(?![.0-9])")
_HITS_LOOKED_AT = 4  # such spellings inside strings looked through before `json_text` is left to decide


class _Lanes(NamedTuple):
    """A bit of every lane of `length` bytes: the constants `_canonical` masks with (a mask longer
    than the text masks it as well)."""

    length: int
    quote: int
    space: int
    exponent: int
    closer: int
    entry: int


def _lanes_of(length: int) -> _Lanes:
    ones = int.from_bytes(b"\x01" * length, "little")
    return _Lanes(length, ones, ones * _SPACE, ones * _EXPONENT, ones * _CLOSER, ones * _ENTRY)


_longest_masks = [_lanes_of(0)]  # the longest made so far, the one kept


def _masks_for(length: int) -> _Lanes:
    """Masks of more lanes than `length` (one past the text's last byte): the longest made so far,
    or new ones of the next power of two (up to twice as many)."""
    masks = _longest_masks[0]
    if masks.length <= length:
        masks = _longest_masks[0] = _lanes_of(1 << length.bit_length())
    return masks


def _canonical(data: bytes, entries: int) -> bool:
    """Whether `json_text` of the value jiter read from `data` (whose containers hold `entries`
    entries at every depth, `strict_json.entries`) is `data` itself; False where that is not proven here.

    Proof, given that jiter read all of `data` to that value:
    - Strings: with `\\\\` and `\\"` taken out, every remaining backslash starts an escape; without
      `\\u` and `\\/`, each escape is one `json.dumps(ensure_ascii=False)` writes for its character
      (`\\" \\\\ \\b \\f \\n \\r \\t`), and every other character of a string is written as itself:
      it escapes only those and control characters, which a JSON string cannot hold raw (jiter
      refuses them), and it leaves DEL and U+2028 as they are. Each `"` left is a string's quote.
    - Where the strings are: a quote after `[`, `{` or a space is taken to open one, any other to
      close one, and `strings` = closers - openers (as numbers, each quote 1 in its lane) is FF in
      the lanes from an opener to its closer where they alternate. They do exactly where each lane
      of `strings` is 00 or FF: such a number is the sum of 256**end - 256**start over its runs of
      FF, and a number is a sum of distinct powers of 256, each added or taken away, in one way
      only; so the openers are the runs' starts and the closers their ends, in turn. As
      `json.dumps` opens every string after `[`, `{` or `, ` / `: `, a text it wrote is not left
      for this unless a string of it ends in `[`, `{` or a space.
    - Outside the strings: no tab or line break (raw, they are only whitespace there), a space
      after each `,` and `:` and no other (flagged at the byte after a `,` or `:`, so a string
      ending in one is left), as `json.dumps` separates. No exponent; no run of 17 digits and `.`s
      (a float of 15 digits at most, an int below 10**16); no `-0`; no fraction ending in 0 but
      `.0`, nor starting with four 0s. Such a float is read to the double nearest its digits, as
      Python reads it (a decimal of 15 digits or fewer comes back from its double, DBL_DIG), and
      `repr` writes it as it stands: its shortest digits are those, and it writes 1e-4 <= |x| <
      1e16 without an exponent. An int is written as read (JSON writes no leading 0). So every
      number is written as it stands, and none overflows.
    - Entries: what remains is their number: a key written twice leaves one in jiter's dict. `[`,
      `{` and `,` outside strings, less the empty `[]` and `{}`, count the entries written, which
      `entries` must be.
    Cost: a translate, `int.from_bytes` and some twenty integer operations on an integer of the
    text's length (C speed, each about a tenth of what `json.dumps` spends on an entry per entry
    of ten bytes), a scan for each of `.`, `-0` (where a `-` is) and 17 digits; a spelling found
    inside a string costs a shift of the whole integer (a few at most)."""
    bare = data
    if b"\\" in bare:
        bare = bare.replace(b"\\\\", b"").replace(b'\\"', b"")
        if _UNWRITTEN_ESCAPE.search(bare) is not None:
            return False
    if b"\t" in bare or b"\n" in bare or b"\r" in bare:
        return False
    classes = bare.translate(_CLASSES)
    lanes = int.from_bytes(classes, "little")
    masks = _masks_for(len(bare))
    before = lanes << 7
    pairs = lanes & before
    quotes = lanes & masks.quote
    opening = pairs & masks.quote
    strings = (quotes ^ opening) - opening
    inside = (strings & masks.quote) * 0xFF
    if strings != inside:
        return False
    # Lanes where a space does not follow a `,`/`:` or a `,`/`:` is not followed by a space, and exponents.
    bad = (((lanes | before) ^ pairs) & masks.space) | (pairs & masks.exponent)
    if bad & inside != bad:
        return False
    if b"." in bare and not _all_inside(inside, (found.start() for found in _FRACTION.finditer(bare))):
        return False
    if b"-" in bare and not _all_inside(inside, (found.start() for found in _NEGATIVE_ZERO.finditer(bare))):
        return False
    if not _all_inside(inside, _places(classes, _LONG_NUMBER)):
        return False
    written = lanes & masks.entry
    written ^= written & inside
    empty = pairs & masks.closer
    empty ^= empty & inside
    return written.bit_count() - empty.bit_count() == entries


def _all_inside(inside: int, hits: Iterable[int]) -> bool:
    """Whether each byte position of `hits` is inside a string (its lane of `inside` is FF); False
    where there are more than `_HITS_LOOKED_AT` (each look shifts the whole of `inside`)."""
    looked = list(islice(hits, _HITS_LOOKED_AT + 1))
    return len(looked) <= _HITS_LOOKED_AT and all(inside >> (8 * at) & 1 for at in looked)


def _places(data: bytes, part: bytes) -> Iterable[int]:
    """Where `part` starts in `data`, each place in turn."""
    at = data.find(part)
    while at >= 0:
        yield at
        at = data.find(part, at + 1)


# Where `_canonical` is tried: texts from `_PROVEN_FROM` bytes (a shorter one costs little to write)
# up to `_PROVEN_UP_TO` (the masks kept are five integers of up to twice its length), with an entry
# in every `_BYTES_PER_ENTRY` bytes or more (`json.dumps` costs by the entry, `_canonical` by the
# byte: at 16 bytes an entry they cost about the same, at 10 the proof about half).
_PROVEN_FROM, _PROVEN_UP_TO, _BYTES_PER_ENTRY = 1024, 1 << 18, 16


def _written_as_read(data: bytes, value: Any) -> bool:
    """Whether `json_text(value)` is `data` itself, proven (`_canonical`) where that costs less than
    writing it."""
    if not ENTRIES_COUNTED or not _PROVEN_FROM <= len(data) <= _PROVEN_UP_TO:
        return False
    count = entries(value)
    return len(data) <= _BYTES_PER_ENTRY * count and _canonical(data, count)


def _as_json(text: str) -> tuple[Any, str]:
    """The value of `text` (stripped) read as JSON by jiter, where JSON and Python agree on it, and
    the value's `json_text`; `_Unsure` otherwise. With Python's names spelled as JSON's, and single
    quotes as double ones where the text has no `"` and no backslash (each `'` then opens or closes
    a string without escapes, raw or not), jiter takes only what Python reads to the same value:
    JSON's strings, escapes (but those `_ESCAPED_SURROGATE` says), numbers and whitespace are
    Python's too, a key written twice is an error to both, nesting is bounded as deep as Python's
    (`_JITER_PAD`), and a number too large for a double, `inf` to jiter, is found by `overflows`.

    First without those checks: where `json_text` writes the value back as this very text (what
    `json.dumps` writes, the common case), no key is written twice (the value would have lost
    it), no number overflowed (`json_text` refuses `inf`), no `\\/` or escaped surrogate is in it
    (`json_text` writes neither) and every number reads as Python reads it (its `repr` is its text).
    That it does is proven without writing it where that costs less (`_written_as_read`)."""
    if "'" in text and '"' not in text and "\\" not in text:
        text = text.replace("'", '"')
    if text[0] != '"':  # a string alone has no names outside it
        text = _as_json_names(text)
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        raise _Unsure from None
    padded = b"[" * _JITER_PAD + data + b"]" * _JITER_PAD
    try:
        value = _unpadded(jiter.from_json(padded, allow_inf_nan=False))
        if text[0] == '"' and _UNWRITTEN_ESCAPE.search(data) is None:
            return value, text  # a string: without those escapes, written as `json_text` writes it
        if _written_as_read(data, value):
            return value, text
        written = json_text(value)
    except ValueError:  # not JSON (a tuple, a set, `1_000`, ...), or an error to both: read below
        raise _Unsure from None
    if written == text:
        return value, written
    if b"\\/" in data or (b"\\u" in data and _ESCAPED_SURROGATE.search(data)) \
            or _LONG_DIGITS in data.translate(_DIGITS):
        raise _Unsure
    try:
        value = _unpadded(jiter.from_json(padded, catch_duplicate_keys=True, allow_inf_nan=False))
    except ValueError:  # a key written twice
        raise _Unsure from None
    if overflows(value, text, 0, len(text)):
        raise _Unsure
    return value, written


def _unpadded(value: Any) -> Any:
    """The value inside the lists `_JITER_PAD` wrapped around it; `_Unsure` where the text held more
    than one (`[1], [2]`: a tuple to Python, two items of the innermost list to jiter)."""
    for _ in range(_JITER_PAD):
        if len(value) != 1:
            raise _Unsure
        value = value[0]
    return value


def _fast(text: str, raw_single_quotes: bool) -> tuple[Any, str | None]:
    """The value when jiter (`_as_json`) or `_Reader` reads all of `text` (stripped), and its
    `json_text` where jiter read it; `_Unsure` otherwise. Lists, dicts and strings spelled as JSON,
    what models write most, are read by jiter at native speed."""
    text = text.strip()
    if text[:1] in ("[", "{", '"', "'"):
        try:
            return _as_json(text)
        except _Unsure:
            pass
    value, end = _Reader(text, raw_single_quotes).value(0, 0)
    if end != len(text):
        raise _Unsure
    return value, None


def literal(text: str, raw_single_quotes: bool = False) -> Any:
    """The value of a Python (or JSON-spelled) literal; `ValueError` when it is not one."""
    return literal_json(text, raw_single_quotes)[0]


def literal_json(text: str, raw_single_quotes: bool = False) -> tuple[Any, str | None]:
    """`literal`, and the value's `json_text` where finding the value wrote it (None: not yet)."""
    try:
        return _fast(text, raw_single_quotes)
    except _Unsure:
        pass
    return _ast_literal(text, raw_single_quotes), None


def _ast_literal(text: str, raw_single_quotes: bool = False) -> Any:
    """`literal` by `ast`: what the fast reader leaves, every rejection included."""
    if raw_single_quotes:
        text = _escaped(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError) as error:
        raise ValueError(f"not a Python literal: {getattr(error, 'msg', error)}") from None
    return _value(tree.body)


def _escaped(text: str) -> str:
    """`text` with every raw single-quoted string rewritten as a Python literal of the same text
    (double-quoted strings are left as written); `ValueError` for a string that does not close."""
    return _RAW_STRINGS.sub(_as_literal, text)


# A double-quoted string (triple first), a raw single-quoted one, or a quote that does not close.
_RAW_STRINGS = re.compile("|".join([STRINGS['"'][1].pattern, '(?!""")' + STRINGS['"'][0].pattern,
                                    RAW_SINGLE_QUOTED.pattern, "[\"']"]))


def _as_literal(match: re.Match[str]) -> str:
    string = match.group()
    if len(string) == 1:
        raise ValueError("not a Python literal: a string that does not close")
    if string[0] == '"':
        return string
    inner = string[1:-1]
    return string if inner.isprintable() and "\\" not in inner else repr(inner)


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, str):
            if not encodable(value):
                raise ValueError("a lone surrogate (not a Unicode character) in a string")
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError("a number too large for a double")
            return value
        raise ValueError(f"a {type(value).__name__} is not a JSON value")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
        number = _value(node.operand)
        return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:
                raise ValueError("** unpacking is not a literal")
            key = _value(key_node)
            if not isinstance(key, str):
                raise ValueError(f"a dict key must be a string, got {type(key).__name__}")
            if key in out:
                raise ValueError(f"duplicate key {key[:60]!r}")
            out[key] = _value(value_node)
        return out
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    raise ValueError(f"not a literal: {type(node).__name__.lower()} {ast.unparse(node)[:40]!r}")
