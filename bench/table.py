"""A plain text table: left-aligned words, right-aligned numbers, one header line."""

from __future__ import annotations

import math
from collections.abc import Sequence

Cell = str | int | float | None


def cell(value: Cell, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return value


def size_label(characters: int) -> str:
    """14,065 -> "14K"; 1,048,576 -> "1M"."""
    if characters >= 1_000_000:
        return f"{characters / 1_048_576:.0f}M"
    return f"{round(characters / 1000)}K" if characters >= 1000 else str(characters)


def render(headers: Sequence[str], rows: Sequence[Sequence[Cell]], digits: int = 2) -> str:
    texts = [[cell(value, digits) for value in row] for row in rows]
    numeric = [
        all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) if rows else False
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(row[i]) for row in texts]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True))]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(row) for row in texts]
    return "\n".join(out)
