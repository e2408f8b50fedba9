"""Which formats can be read token-aware without losing calls (`FormatSpec.calls_start_at_special_tokens`),
the rule `streamparse serve` and the vLLM plugin both follow before asking for generated ids: token-aware
reading starts a call only at a special token, so a format whose calls may start with text is read as
text. Checked on every real-template case and fixture, each output cut into tokens where the format's
declared special delimiters are (each one special token, the rest ordinary)."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from conftest import FORMAT_NAMES
from corpus import Row, case_rows, fixture_rows

import streamparse
from streamparse import Token
from streamparse.registry import get_format


def _tokens(text: str, specials: tuple[str, ...]) -> list[Token]:
    ordered = sorted(set(specials), key=len, reverse=True)
    pattern = "(" + "|".join(re.escape(s) for s in ordered) + ")"
    return [Token(part, part in ordered) for part in re.split(pattern, text) if part]


def _reads(row: Row, token_aware: bool) -> tuple[object, ...]:
    spec = get_format(row.format)
    given = _tokens(row.text, spec.special) if token_aware else row.text
    message = streamparse.parse(given, row.format, tools=row.tools, thinking_forced_open=row.thinking_forced_open,
                                special_tokens="require" if token_aware else "ignore")
    return (message.content, message.reasoning, [(c.name, c.arguments) for c in message.tool_calls])


ROWS: dict[str, list[Row]] = defaultdict(list)
for _row in [*case_rows(), *fixture_rows()]:
    if get_format(_row.format).special:
        ROWS[_row.format].append(_row)


@pytest.mark.parametrize("fmt", sorted(f for f in ROWS if get_format(f).calls_start_at_special_tokens))
def test_a_format_read_token_aware_reads_its_real_outputs_as_text_does(fmt: str) -> None:
    differ = [row.label for row in ROWS[fmt] if _reads(row, True) != _reads(row, False)]
    assert not differ


@pytest.mark.parametrize("fmt", ["functionary_v3_1", "gigachat3", "gigachat3_5"])
def test_formats_whose_calls_start_with_text_are_read_as_text(fmt: str) -> None:
    """Read token-aware, these lose real calls (functionary's `<function=`, GigaChat's text headers and
    GCML markers are text): so they are read as text."""
    assert not get_format(fmt).calls_start_at_special_tokens
    assert any(_reads(row, True) != _reads(row, False) for row in ROWS[fmt])


def test_most_formats_with_special_delimiters_are_read_token_aware() -> None:
    with_special = [f for f in FORMAT_NAMES if get_format(f).special]
    aware = [f for f in with_special if get_format(f).calls_start_at_special_tokens]
    assert "hermes" in aware and "deepseek_v3_1" in aware and "kimi_k2" in aware and "gpt_oss" in aware
    assert len(aware) >= len(with_special) - 8
