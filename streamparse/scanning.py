"""Finding delimiters in streamed text without rescanning what was ruled out.

Cost: each chunk is searched once with a compiled alternation (C speed); the only text searched
again is the held-back suffix, which is shorter than the longest delimiter. Envelope scanners keep
their own state (inside a JSON string or not) so that a body is walked once, whatever the chunking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple, Protocol

from .grammar import LENIENT_DECODER


class Delimiters:
    """A set of literal delimiters: find the first one, or how much of a tail could still start one."""

    def __init__(self, strings: Iterable[str]) -> None:
        unique = sorted({s for s in strings if s}, key=lambda s: (-len(s), s))
        self.strings: tuple[str, ...] = tuple(unique)
        # Longest first, so that at one position the longest delimiter wins.
        self._pattern = re.compile("|".join(re.escape(s) for s in unique)) if unique else None
        self._prefixes = frozenset(s[:i] for s in unique for i in range(1, len(s)))
        self._longest = max((len(s) for s in unique), default=0)
        firsts = sorted({s[0] for s in unique})
        self._first = re.compile("[" + "".join(re.escape(c) for c in firsts) + "]") if firsts else None

    def __bool__(self) -> bool:
        return bool(self.strings)

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        """The leftmost delimiter in `text[pos:]` (the longest, where several start there)."""
        return self._pattern.search(text, pos) if self._pattern is not None else None

    def held_from(self, text: str) -> int:
        """Where the longest suffix of `text` that is a proper prefix of a delimiter starts.

        `len(text)` when no suffix could start a delimiter. Looks at the last `longest - 1`
        characters only."""
        if self._first is None:
            return len(text)
        pos = max(0, len(text) - self._longest + 1)
        match = self._first.search(text, pos)
        while match is not None:
            start = match.start()
            if text[start:] in self._prefixes:
                return start
            match = self._first.search(text, start + 1)
        return len(text)

    def is_prefix(self, text: str, pos: int = 0) -> bool:
        """Whether `text[pos:]` is a proper prefix of a delimiter (it could still become one)."""
        return len(text) - pos < self._longest and text[pos:] in self._prefixes

    def starting(self, text: str, pos: int = 0) -> str | None:
        """The delimiter `text[pos:]` starts with, if any (the longest)."""
        for delimiter in self.strings:
            if text.startswith(delimiter, pos):
                return delimiter
        return None


class ScanResult(NamedTuple):
    """Where an envelope body ends, as absolute positions in the text the scanner was given.

    `end is None`: the envelope goes on; `text[pos:safe]` is body and `text[safe:]` must be given
    again with the next chunk (it could start the closer). Otherwise the body ends at `safe` and
    the closer occupies `text[safe:end]` (empty when the envelope ends without a closer)."""

    safe: int
    end: int | None = None


class EnvelopeScanner(Protocol):
    """Finds where an envelope body ends. One instance per envelope.

    `scan(text, pos)` looks at `text[pos:]` only, never copies it, and returns absolute
    positions; the text from `safe` on is given again, with more after it, next time."""

    def scan(self, text: str, pos: int) -> ScanResult: ...


@lru_cache(maxsize=256)
def delimiters_of(strings: tuple[str, ...]) -> Delimiters:
    """A `Delimiters`, built once per set of strings (scanners are made per envelope)."""
    return Delimiters(strings)


class TagScanner:
    """Ends at the first `closer` (consumed) or `stop` (left for the enclosing region)."""

    def __init__(self, closers: Iterable[str], stops: Iterable[str] = ()) -> None:
        self._closers = frozenset(closers)
        self._delimiters = delimiters_of((*self._closers, *stops))

    def scan(self, text: str, pos: int) -> ScanResult:
        match = self._delimiters.search(text, pos)
        if match is None:
            return ScanResult(max(pos, self._delimiters.held_from(text)))
        end = match.end() if match.group() in self._closers else match.start()
        return ScanResult(match.start(), end)


_IN_STRING = re.compile(r'["\\]')


@lru_cache(maxsize=64)
def _outside_pattern(strings: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join([r'["\[\]{}]', *(re.escape(d) for d in strings)]))


class JsonAwareScanner:
    """Ends at the first closer (consumed) or stop (left for the enclosing region) outside JSON strings,
    or, with `end_at_value`, where the first top-level JSON value ends.

    A quote opens a string only inside brackets, so a stray `"` in the text around the JSON (a
    name, a fence) cannot hide the closer. The stops end an envelope whose closer the model forgot
    (the next call's opener, the calls block closer). Cost: a JSON value already complete in the
    text is skipped by the C decoder; otherwise one regex jump per quote, backslash or bracket.
    Only a suffix that could start a delimiter is given back to be scanned again."""

    def __init__(self, closers: Iterable[str], stops: Iterable[str] = (), end_at_value: bool = False) -> None:
        self._closers = frozenset(closers)
        self._delimiters = delimiters_of((*self._closers, *stops))
        self._outside = _outside_pattern(self._delimiters.strings)
        # The envelope also ends where its first top-level JSON value ends (no closer needed:
        # Granite's `<|tool_call|>[…]`, Llama 3's bare call objects); what follows is the region's.
        self._end_at_value = end_at_value
        self._depth = 0
        self._in_string = False
        self._escaped = False  # the previous piece ended with a backslash inside a string

    def scan(self, text: str, pos: int) -> ScanResult:
        if self._escaped:
            if pos == len(text):
                return ScanResult(pos)
            self._escaped = False
            pos += 1
        while True:
            if self._in_string:
                match = _IN_STRING.search(text, pos)
                if match is None:
                    return ScanResult(len(text))
                if match.group() == "\\":
                    if match.end() == len(text):
                        self._escaped = True
                        return ScanResult(len(text))
                    pos = match.end() + 1
                else:
                    self._in_string = False
                    pos = match.end()
                continue
            match = self._outside.search(text, pos)
            if match is None:
                return ScanResult(max(self._delimiters.held_from(text), pos))
            found = match.group()
            pos = match.end()
            if found == '"':
                self._in_string = self._depth > 0
            elif found in "[{":
                if self._depth == 0:
                    end = _complete_value(text, match.start())
                    if end is not None:  # the whole value is in view: skip it at C speed
                        if self._end_at_value:
                            return ScanResult(end, end)
                        pos = end
                        continue
                self._depth += 1
            elif found in "]}":
                if self._end_at_value and self._depth == 1:
                    return ScanResult(pos, pos)
                self._depth = max(0, self._depth - 1)
            else:
                end = match.end() if found in self._closers else match.start()
                return ScanResult(match.start(), end)


def _complete_value(text: str, pos: int) -> int | None:
    """Where the JSON value starting at `pos` ends, when all of it is in `text`."""
    try:
        return LENIENT_DECODER.raw_decode(text, pos)[1]  # only where it ends: the visitor reads it strictly
    except (ValueError, RecursionError):
        return None
