"""Learning a format's marker suffix from the output (`MarkerSuffix.learned`, HY V4).

Until the suffix is known, text that cannot be the start of a marker is read at once; a possible
marker (`<tool_calls:6124` so far) is held back until it completes or can no longer complete. Its
pattern is bounded (a suffix has at most 64 characters), so what is held, and read again with the
next chunk, is too.
"""

from __future__ import annotations

from typing import Any


class SuffixLearner:
    """Finds the output's first complete marker; `pattern` (a `regex` pattern, matched with
    `partial=True`) matches one, its group `suffix` the suffix it is spelled with."""

    def __init__(self, pattern: Any) -> None:
        self._pattern = pattern
        self.held = ""

    def read(self, text: str) -> tuple[str, str | None, str]:
        """(the text that holds no marker, to read now; the suffix the first marker fixed, or None
        when none completed; the text from that marker on, read once the suffix is fixed)."""
        if self.held:
            text = self.held + text
            self.held = ""
        found = self._pattern.search(text, partial=True)
        if found is None:
            return text, None, ""
        at = found.start()
        if found.partial:  # a marker may still complete at the end
            self.held = text[at:]
            return text[:at], None, ""
        return text[:at], found.group("suffix") or "", text[at:]

    def flush(self) -> str:
        """What was held: at the end of the output it is no marker."""
        held, self.held = self.held, ""
        return held
