"""`scanning.Delimiters.search` finds what one alternation of its delimiters finds, however long the
text and whichever first characters they have; a guarded delimiter only where its guard matches."""

from __future__ import annotations

import re

import regex  # type: ignore[import-untyped]
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamparse.families.llama3 import PYTHONIC_LEAD, PYTHONIC_NEXT
from streamparse.scanning import _WINDOW, Delimiters

SETS = st.sampled_from([("<a>", "[", "<ab>"), ("[T]", "[", "<|x|>", "{"), ("ab", "b", "ba"), ("<t>",)])
PIECES = st.sampled_from(["<", "a", "b", "[", "]", "T", "{", "|", "x", ">", " ", "0", "q" * 300, "<a>", "<ab>", "[T]",
                         "<|x|>", "ba", "q" * 100])


def alternation(strings: tuple[str, ...], guards: dict[str, str]) -> re.Pattern[str]:
    unique = sorted(set(strings), key=lambda s: (-len(s), s))
    return re.compile("|".join(re.escape(s) + (f"(?={guards[s]})" if s in guards else "") for s in unique))


@settings(max_examples=300, deadline=None)
@given(SETS, st.integers(0, 3 * _WINDOW), st.lists(PIECES, max_size=60), st.integers(0, 3000), st.booleans())
@example(("<a>", "["), 0, ["q" * 300] * 3 + ["<a>"], 0, False)  # past the first window
def test_search_finds_what_one_alternation_finds(strings: tuple[str, ...], filler: int, pieces: list[str],
                                                 start: int, guarded: bool) -> None:
    guards = {"[": r"[ ]{0,3}(?:[A-Za-z]|\Z)"} if guarded and "[" in strings else {}
    text = "q" * filler + "".join(pieces)  # mostly longer than a window: searched a first character at a time
    pos = min(start, len(text))
    found = Delimiters(strings, guards).search(text, pos)
    expected = alternation(strings, guards).search(text, pos)
    assert (found and (found.start(), found.group())) == (expected and (expected.start(), expected.group()))


def test_a_long_text_is_searched_past_its_windows() -> None:
    delimiters = Delimiters(["<x>", "["])
    for size in (_WINDOW - 1, _WINDOW, 5 * _WINDOW, 40 * _WINDOW + 7):
        text = "y" * size + "<x>"
        match = delimiters.search(text)
        assert match is not None and match.start() == size
        assert delimiters.search("y" * size) is None


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(" \t\na_Z9.([]"), max_size=12))
def test_the_pythonic_trigger_guard_passes_every_possible_lead(after: str) -> None:
    """Wherever the lead still matches after a `[` (whole, or as a prefix of what the text may become),
    the guard does: a `[` it turns away could never start a call list."""
    lead = regex.compile(PYTHONIC_LEAD).match("[" + after, partial=True)
    if lead is not None:
        assert re.match(PYTHONIC_NEXT, after) is not None
