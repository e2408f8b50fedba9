"""Input: UTF-8 bytes decoded incrementally, and token-aware input.

A character split across byte chunks is decoded once its last byte arrives; invalid bytes become
U+FFFD. In token-aware mode, text that spells a special token with ordinary tokens is shown to
envelope scanners blanked out (the same length, so positions hold) and never opens anything.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable


class Utf8Input:
    """An incremental UTF-8 decoder that knows whether it may hold part of a character."""

    __slots__ = ("_decoder", "pending")

    def __init__(self) -> None:
        self._decoder: codecs.IncrementalDecoder | None = None  # made at the first bytes (most input is str)
        self.pending = False  # bytes were fed and the decoder may hold part of a character

    def decode(self, data: bytes) -> str:
        self.pending = True
        if self._decoder is None:
            self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return self._decoder.decode(data)

    def flush(self) -> str:
        """What the decoder still holds (a cut-off character becomes U+FFFD)."""
        if not self.pending or self._decoder is None:
            return ""
        self.pending = False
        return self._decoder.decode(b"", final=True)


class LookAlikes:
    """Blanks out ordinary-text spellings of special tokens, for envelope scanners."""

    __slots__ = ("_pattern",)

    def __init__(self, specials: Iterable[str]) -> None:
        ordered = sorted(set(specials), key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def blank(self, text: str) -> str:
        if self._pattern is None or self._pattern.search(text) is None:
            return text
        return self._pattern.sub(lambda m: "\0" * len(m.group()), text)
