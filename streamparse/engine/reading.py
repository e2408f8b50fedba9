"""What a region reader outside `parser.py` (anchored envelopes, headed messages) reads and sets on
the parser: a Protocol that `StreamParser` meets, so that those readers sit below the parser and
the arrows point one way (`parser` -> `anchors`, `messages` -> `reading`)."""

from __future__ import annotations

from typing import Protocol

from ..validation import ToolSet
from .delimiters import DelimiterSets
from .envelopes import OpenEnvelope
from .regions import Output
from .settle import Settler


class ParserState(Protocol):
    """The parser's state a region reader works on (`StreamParser` has each of these)."""

    _base: int  # where the text being read starts in the output
    _carry: str  # held back: it could still start a delimiter
    _envelope: OpenEnvelope | None
    _forced: bool  # the prompt left the output inside reasoning (`thinking_forced_open`, as the format takes it)
    _max_call_chars: int | None
    _mode: str  # the reader the next text goes to (`StreamParser.READERS`)
    _return_mode: str  # the region a wrapper or envelope was opened in
    _output: Output
    _progressive: bool
    _sets: DelimiterSets
    _settler: Settler
    _tools: ToolSet

    def _ended_reasoning(self, at: int) -> None:
        """The reasoning ended at `at` in the output (the first end counts)."""
        ...

    def _hold(self, text: str, pos: int) -> int:
        """Keep `text[pos:]` until the next chunk shows what it is; returns the end of `text`."""
        ...
