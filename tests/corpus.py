"""Rows for the batch tests: every format's fixtures, and the real-template cases when `../shared` is there.

A row is one output with the options it is parsed with; `groups` gathers rows that share options,
since one `parse_many` call or one batch takes one set of options."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conftest import FIXTURES, FORMAT_NAMES, SHARED

import streamparse

CASE_FILES = ("cases.json", "cases_new_families.json", "cases_more.json", "cases_wave3.json", "cases_wave4.json")
CASE_FORMATS = {"deepseek_v3_2_dsml": "deepseek_v3_2", "mistral_nemo": "mistral", "mistral_call_id": "mistral",
                "mistral_args": "mistral"}  # any other case format is a streamparse name as it stands


@dataclass(frozen=True)
class Row:
    label: str
    format: str
    text: str
    tools: Any
    thinking_forced_open: bool = False
    prompt: str | None = None  # the end of the rendered prompt, for prompt_column


def fixture_rows() -> list[Row]:
    rows = []
    for fmt in FORMAT_NAMES:
        folder = FIXTURES / fmt
        tools = json.loads((folder / "tools.json").read_text(encoding="utf-8"))
        for path in sorted(folder.glob("*.txt")):
            rows.append(Row(f"{fmt}/{path.name}", fmt, path.read_text(encoding="utf-8"), tools))
            # The same output cut short inside its last call: a truncated call, the malformed row every
            # corpus has (at two thirds when it has no call).
            text = path.read_text(encoding="utf-8")
            rows.append(Row(f"{fmt}/{path.name}[cut]", fmt, text[: _cut_inside_last_call(text, fmt)], tools))
    return rows


def _cut_inside_last_call(text: str, fmt: str) -> int:
    calls = streamparse.parse(text, fmt).tool_calls
    if not calls:
        return len(text) * 2 // 3
    raw = calls[-1].raw
    start = text.rfind(raw)
    return start + len(raw) // 2 if start >= 0 else len(text) * 2 // 3


def case_rows() -> list[Row]:
    """The rendered cases of the formats streamparse has; none when `../shared` is absent."""
    known = set(streamparse.formats())
    rows = []
    for name in CASE_FILES:
        path = SHARED / "templates" / name
        if not path.exists():
            continue
        for case in json.loads(path.read_text(encoding="utf-8")):
            fmt = CASE_FORMATS.get(case["format"], case["format"])
            if fmt in known:
                rows.append(Row(f'{case["template"]}:{case["case"]}', fmt, case["output"], case.get("tools"),
                                bool(case.get("thinking_forced_open")), case.get("prompt_tail")))
    return rows


def groups(rows: Iterable[Row]) -> dict[tuple[str, str, bool], list[Row]]:
    """Rows by (format, tools, forced open): each group can be one call with one set of options."""
    grouped: dict[tuple[str, str, bool], list[Row]] = {}
    for row in rows:
        key = (row.format, json.dumps(row.tools, sort_keys=True), row.thinking_forced_open)
        grouped.setdefault(key, []).append(row)
    return grouped
