"""Finding delimiters in streamed text without rescanning what was ruled out.

Cost: each chunk is searched once with a compiled alternation (C speed); the only text searched
again is the held-back suffix, which is shorter than the longest delimiter. Envelope scanners keep
their own state (inside a JSON string or not) so that a body is walked once, whatever the chunking.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple, Protocol, Union

from .strict_json import LENIENT_DECODER, strict_value

_WINDOW = 512  # text past which `Delimiters.search` looks for each first character on its own


class Delimiters:
    """A set of literal delimiters: find the first one, or how much of a tail could still start one.
    A delimiter with a guard (a pattern) is found only where the text after it matches the guard
    (`AnchorSpec.trigger_next`)."""

    def __init__(self, strings: Iterable[str], guards: Mapping[str, str] | None = None) -> None:
        unique = sorted({s for s in strings if s}, key=lambda s: (-len(s), s))
        self.strings: tuple[str, ...] = tuple(unique)
        self.guards = {s: guard for s, guard in (guards or {}).items() if s in unique and guard}

        def pattern(members: Iterable[str]) -> re.Pattern[str]:  # longest first: at one position it wins
            return re.compile("|".join(re.escape(s) + (f"(?={self.guards[s]})" if s in self.guards else "")
                                       for s in members))

        self._pattern = pattern(unique) if unique else None
        self._prefixes = frozenset(s[:i] for s in unique for i in range(1, len(s)))
        self._longest = max((len(s) for s in unique), default=0)
        firsts = sorted({s[0] for s in unique})
        self._first = re.compile("[" + "".join(re.escape(c) for c in firsts) + "]") if firsts else None
        # Delimiters of different first characters, one pattern per first character: `re` finds a
        # pattern with a literal first character at memchr speed, and an alternation of several
        # first characters one position at a time (about twenty times slower).
        self._groups = tuple(pattern(s for s in unique if s[0] == first) for first in firsts) if len(firsts) > 1 else ()

    def __bool__(self) -> bool:
        return bool(self.strings)

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        """The leftmost delimiter in `text[pos:]` (the longest, where several start there).
        Cost: in a long text, where delimiters start with different characters, each first
        character's pattern searched in windows that grow fourfold (`_WINDOW` first), so a search
        looks at about twice the text up to what it finds, per first character; else one search."""
        if self._pattern is None:
            return None
        if not self._groups or len(text) - pos <= _WINDOW:
            return self._pattern.search(text, pos)
        size = _WINDOW
        while True:
            end = min(len(text), pos + size)
            stop = min(len(text), end + self._longest - 1)  # a delimiter starting before `end` ends by here
            found = None
            for group in self._groups:
                match = group.search(text, pos, stop)  # (a guard may take `stop` for the text's end:
                if match is not None and match.start() < end \
                        and (found is None or match.start() < found.start()):  # found once too often)
                    found = match
            if found is not None or end == len(text):
                return found
            pos, size = end, size * 4

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


# What a body kind reads in a complete top-level JSON value while its scanner skims it: given the text,
# where the value starts and where the scanner expects it to end (the next delimiter, or the end of
# the text: `grammar.strict_value`'s `limit`), what the kind's parse will want there, by offset from
# that start (`{offset: (what was read, end offset)}`), and where the value ends; None, or a
# ValueError, when it cannot be read so (the scanner then finds only the end). Its end must be the
# value's JSON end.
ValueReader = Callable[[str, int, int], "tuple[dict[int, tuple[Any, int]], int] | None"]


class Decoded(NamedTuple):
    """What a scanner's `ValueReader` read in the top-level JSON value `text[start:end]` while it
    skimmed it, for the body kind's parse to use instead of decoding that text again. Valid for
    that text only: `at` hands it over only where the body holds exactly the same characters."""

    text: str  # the text the scanner was given (not copied)
    start: int
    end: int
    values: dict[int, tuple[Any, int]]  # offset from `start` → (what was read, end offset)

    def at(self, body: str, pos: int) -> dict[int, tuple[Any, int]] | None:
        """`values`, when the value that starts at `body[pos]` is the text read (one comparison at
        C speed); None otherwise."""
        if len(body) - pos < self.end - self.start or not body.startswith(self.text[self.start:self.end], pos):
            return None
        return self.values


def read_value(read: ValueReader, text: str, pos: int, limit: int) -> Decoded | None:
    """What a body kind's `read` makes of the complete JSON value at `text[pos]` (expected to end
    before `limit`), as `Decoded`; None where it cannot read it (then only the value's end is
    found, and the parse reads it)."""
    try:
        found = read(text, pos, limit)
    except (ValueError, RecursionError):
        return None
    return None if found is None else Decoded(text, pos, found[1], found[0])


def decoded_at(decoded: Decoded | None, body: str, pos: int) -> dict[int, tuple[Any, int]] | None:
    """`decoded.at(body, pos)`, or None when nothing was decoded."""
    return None if decoded is None else decoded.at(body, pos)


class EnvelopeScanner(Protocol):
    """Finds where an envelope body ends. One instance per envelope.

    `scan(text, pos)` looks at `text[pos:]` only, never copies it, and returns absolute
    positions; the text from `safe` on is given again, with more after it, next time.
    A scanner that holds back a whole closer because a longer one could still follow it (a close
    pattern's optional ending) has `at_end(held)`: where the body ends in the held text when no more
    comes (`ScanResult` with an `end`), or None (the held text is body); the parser asks it at the end."""

    def scan(self, text: str, pos: int) -> ScanResult: ...


def hold_merged(pieces: list[str], text: str) -> None:
    """Append `text`, merging every last piece at least as long as the one before it: the lengths
    then halve from first to last, so a run of n characters is O(log n) pieces, each character is
    copied O(log n) times, and the list costs about one byte a character whatever the chunking."""
    if not text:
        return
    pieces.append(text)
    while len(pieces) > 1 and len(pieces[-1]) >= len(pieces[-2]):
        last = pieces.pop()
        pieces[-1] += last


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
_STRUCTURE = '["\\[\\]{}]'
_MEMBER_STRUCTURE = '["\\[\\]{}:,]'

# How deep a walk records structure for a progressive streamer (`record`): the brackets of top-level
# values only, or down to the members of call objects in a list (and where their values open and close).
TOP, MEMBERS = 0, 2


class Marks(Protocol):
    """Where a walk of the body found JSON structure, for the progressive streamer that rides on it."""

    def take(self, piece: str) -> list[int]:
        """The positions, in `piece` (the next body text the streamer is given), of the structure
        the walk found in it, down to the depth asked of `record(depth)`: the brackets that open a
        value at nesting depth <= `depth` and those that close it, and at depths 1 to `depth` the
        quotes that open and close strings and the `:` and `,` between members and elements.
        Brackets are balanced: every bracket recorded has its partner recorded."""
        ...


# What a progressive streamer is given to find the body's structure: the envelope's scanner (whose
# walk it reads when the scanner can record one), or marks already.
WalkSource = Union["EnvelopeScanner", Marks]


def marks_in(marks: list[int], origin: int, piece: str) -> list[int]:
    """`Marks.take` for a scanner that recorded `marks` (positions in its text) from `origin` on."""
    if not marks:  # most pieces: string text
        return marks
    end = origin + len(piece)
    return [at - origin for at in marks if at < end]


@lru_cache(maxsize=64)
def _outside_pattern(strings: tuple[str, ...], structure: str = _STRUCTURE) -> re.Pattern[str]:
    return re.compile("|".join([structure, *(re.escape(d) for d in strings)]))


@lru_cache(maxsize=256)
def json_scanner_parts(closers: tuple[str, ...], stops: tuple[str, ...]) -> tuple[
        frozenset[str], Delimiters, re.Pattern[str]]:
    """A `JsonAwareScanner`'s closers, delimiters and outside-strings pattern, built once per
    closers and stops (a scanner is made per envelope)."""
    delimiters = delimiters_of((*closers, *stops))
    return frozenset(closers), delimiters, _outside_pattern(delimiters.strings)


class JsonAwareScanner:
    """Ends at the first closer (consumed) or stop (left for the enclosing region) outside JSON strings,
    or, with `end_at_value`, where the first top-level JSON value ends (its brackets balance).

    A quote opens a string only inside brackets, so a stray `"` in the text around the JSON (a
    name, a fence) cannot hide the closer. The stops end an envelope whose closer the model forgot
    (the next call's opener, the calls block closer). Cost: a JSON value already complete in the
    text is skipped by the C decoder; otherwise one regex jump per quote, backslash or bracket.
    Only a suffix that could start a delimiter is given back to be scanned again.

    With `read` (the body kind's `ValueReader`), that skip is the kind's strict reading of the
    value, kept in `decoded` for its parse (which then does not decode the text again); where the
    reading fails (the value is JSON to Python's lenient reader, not to RFC 8259), the lenient
    decoder finds where it ends, and the parse reads it again and says what is wrong.

    In progressive mode the body's streamer rides on this walk (`record`): the scanner notes where
    the structure is and the streamer reads it from the marks instead of walking the body again.
    Down to the depth recorded the walk also stops at `:` and `,`; complete top-level values are
    still skipped when only their brackets are recorded (`TOP`). Text given to the streamer that
    the scanner held back (a delimiter's prefix, at the end of the output) has no marks: the
    output ended inside the envelope, and the call is cut off.

    `ends_before`: strings a skimmed value is expected to end before where no closer or stop is in
    view (GigaChat's next call opener): the reader's strict pass is tried up to the first one, so
    that it does not take the rest of the output (and then a second pass) for a value that ended
    long before. Only a guess: a value that holds one in a string is read whole all the same."""

    def __init__(self, closers: Iterable[str], stops: Iterable[str] = (), end_at_value: bool = False,
                 read: ValueReader | None = None, ends_before: tuple[str, ...] = ()) -> None:
        self._closers, self._delimiters, self._outside = json_scanner_parts(tuple(closers), tuple(stops))
        self._ends_before = delimiters_of(ends_before) if ends_before else None
        # Granite's `<|tool_call|>[…]`, Llama 3's bare call objects: what follows is the region's.
        self._end_at_value = end_at_value
        self._members = self._outside  # the pattern where `:` and `,` are recorded too
        self._depth = 0
        self._in_string = False
        self._escaped = False  # the previous piece ended with a backslash inside a string
        self._marks: list[int] | None = None  # recorded structure (`record`), positions in the text scanned
        self._limit = -1  # the depth recorded down to (-1: nothing)
        self._origin = 0  # where the last scan started
        # The body kind's reader of a skimmed value (else the skim finds only where the value ends),
        # and what it read in the last value skimmed, for the kind's parse (`Decoded`).
        self._read = read
        self.decoded: Decoded | None = None

    def record(self, depth: int) -> Marks:
        self._marks, self._limit = [], depth
        self._members = _outside_pattern(self._delimiters.strings, _MEMBER_STRUCTURE)
        return self

    def take(self, piece: str) -> list[int]:
        marks, self._marks = self._marks or [], []
        return marks_in(marks, self._origin, piece)

    def scan(self, text: str, pos: int) -> ScanResult:
        marks = self._marks
        if marks is not None:
            marks.clear()
            self._origin = pos
        if self._escaped:
            if pos == len(text):
                return ScanResult(pos)
            self._escaped = False
            pos += 1
        limit, outside, members = self._limit, self._outside, self._members
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
                    if self._depth <= limit:
                        marks.append(pos - 1)  # type: ignore[union-attr]
                continue
            depth = self._depth
            match = (members if 0 < depth <= limit else outside).search(text, pos)
            if match is None:
                return ScanResult(max(self._delimiters.held_from(text), pos))
            found = match.group()
            pos = match.end()
            if found == '"':
                if depth > 0:
                    self._in_string = True
                    if depth <= limit:
                        marks.append(pos - 1)  # type: ignore[union-attr]
            elif found in "[{":
                if depth == 0 and limit <= 0:  # nothing inside it is recorded: skip it whole if in view
                    end = self._skim(text, match.start())
                    if end is not None:  # at C speed
                        if marks is not None:
                            marks += (match.start(), end - 1)
                        if self._end_at_value:
                            return ScanResult(end, end)
                        pos = end
                        continue
                if depth <= limit:
                    marks.append(pos - 1)  # type: ignore[union-attr]
                self._depth = depth + 1
            elif found in "]}":
                if depth > 0:
                    if depth <= limit + 1:
                        marks.append(pos - 1)  # type: ignore[union-attr]
                    self._depth = depth - 1
                    if depth == 1 and self._end_at_value:
                        return ScanResult(pos, pos)
            elif found in ":,":  # only looked for down to the depth recorded
                marks.append(pos - 1)  # type: ignore[union-attr]
            else:
                end = match.end() if found in self._closers else match.start()
                return ScanResult(match.start(), end)

    def _skim(self, text: str, pos: int) -> int | None:
        """Where the JSON value at `text[pos]` ends, when all of it is in `text`: read by the kind's
        reader when it can (what it read is kept in `decoded`), else only its end found."""
        if self._read is not None:
            found = self._delimiters.search(text, pos)  # the value's end, when nothing but space is between
            if found is None and self._ends_before is not None:
                found = self._ends_before.search(text, pos)
            decoded = read_value(self._read, text, pos, len(text) if found is None else found.start())
            if decoded is not None:
                self.decoded = decoded
                return decoded.end
        return _complete_value(text, pos)


class PieceWalk:
    """Marks for a streamer whose envelope's scanner does not walk JSON (it ends at a special
    token, `TagScanner`): the streamer's own walk of each piece, with the same rules."""

    def __init__(self, depth: int) -> None:
        self._walk = JsonAwareScanner(())
        self._marks = self._walk.record(depth)

    def take(self, piece: str) -> list[int]:
        self._walk.scan(piece, 0)
        return self._marks.take(piece)


def marks_of(source: WalkSource, depth: int) -> Marks:
    """The marks a streamer reads, from `source`: the envelope scanner's own walk when it can record
    one (the body is then walked once); marks already (a streamer handing on what it held); else,
    for a scanner that does not walk JSON, a walk of the streamer's own."""
    record = getattr(source, "record", None)
    if record is not None:
        return record(depth)  # type: ignore[no-any-return]
    if hasattr(source, "take"):
        return source  # type: ignore[return-value]
    return PieceWalk(depth)


def _complete_value(text: str, pos: int) -> int | None:
    """Where the JSON value starting at `pos` ends, when all of it is in `text`."""
    try:
        return LENIENT_DECODER.raw_decode(text, pos)[1]  # only where it ends: the visitor reads it strictly
    except (ValueError, RecursionError):
        return None


def decode_at(body: str, pos: int, decoded: Decoded | None) -> tuple[Any, int]:
    """`grammar.strict_value(body, pos, len(body))`: the value the scanner decoded there when it read
    that very text with `whole_value`, else decoded now (the body's value usually ends it)."""
    found = decoded_at(decoded, body, pos)
    entry = None if found is None else found.get(0)
    if entry is None:
        return strict_value(body, pos, len(body))
    return entry[0], pos + entry[1]


def whole_value(text: str, pos: int, limit: int) -> tuple[dict[int, tuple[Any, int]], int]:
    """A `ValueReader`: the value at `text[pos]`, decoded strictly (`grammar.strict_value`)."""
    value, end = strict_value(text, pos, limit)
    return {0: (value, end - pos)}, end
