"""Shared helpers: fold deltas back into a message, the formats under test, and the fake upstream
fixture of the server tests."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import regex  # type: ignore[import-untyped]
from hypothesis import settings

import streamparse
from streamparse.families import FAMILIES
from streamparse.grammar import strict_loads
from streamparse.registry import get_format

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("long", max_examples=2000, deadline=None)
# The recorded fuzz run: about 100,000 examples over tests/test_fuzz.py (17 tests, 6,000 each).
settings.register_profile("fuzz", max_examples=6000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside a checkout, or ../../shared beside a worktree under /work/wt
SHARED = next((p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir()),
              ROOT.parent / "shared")
CASES = SHARED / "templates" / "cases.json"
FIXTURES = ROOT / "fixtures"
FORMAT_NAMES = [spec.name for spec in FAMILIES]


def ids(ordinal: int) -> str:
    """A deterministic id factory, so that messages compare equal across parses."""
    return f"call_{ordinal}"


@dataclass
class Folded:
    """What a client assembles from deltas."""

    content: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, object]] = field(default_factory=dict)

    def add(self, delta: streamparse.Delta) -> None:
        self.content += delta.content
        self.reasoning += delta.reasoning
        for piece in delta.tool_calls:
            slot = self.calls.setdefault(piece.index, {"id": None, "name": None, "arguments": "", "status": None})
            if piece.id is not None and slot["id"] is None:
                slot["id"] = piece.id
            if piece.name is not None and slot["name"] is None:
                slot["name"] = piece.name
            slot["arguments"] = str(slot["arguments"]) + piece.arguments
            if piece.status is not None:
                slot["status"] = piece.status

    def accepted(self) -> list[tuple[object, object, object]]:
        return [(s["id"], s["name"], s["arguments"]) for _, s in sorted(self.calls.items()) if s["status"] is None]


def fold(deltas: list[streamparse.Delta]) -> Folded:
    folded = Folded()
    for delta in deltas:
        folded.add(delta)
    return folded


def run_stream(chunks: list[str] | list[bytes], **kwargs: object) -> tuple[Folded, streamparse.Message]:
    parser = streamparse.StreamParser(**kwargs)  # type: ignore[arg-type]
    deltas: list[streamparse.Delta] = []
    for chunk in chunks:
        deltas += parser.feed(chunk)
    deltas += parser.close()
    return fold(deltas), parser.message


def assert_stream_matches(folded: Folded, message: streamparse.Message) -> None:
    """Promise 1: the deltas add up to the message."""
    assert folded.content == message.content
    assert folded.reasoning == message.reasoning
    assert folded.accepted() == [(c.id, c.name, c.arguments_json) for c in message.tool_calls]


def _nonspace(text: str) -> Counter[str]:
    return Counter(c for c in text if not c.isspace())


def _reasoning_leads(text: str, fmt: str) -> Counter[str]:
    """The characters of the framing a format reads after its reasoning openers (`reasoning_lead`)."""
    spec = get_format(fmt)
    found: Counter[str] = Counter()
    if spec.reasoning_lead:
        lead = regex.compile(spec.reasoning_lead)
        for opener, _ in spec.reasoning:
            at = text.find(opener)
            while at >= 0:
                match = lead.match(text, at + len(opener))
                found += _nonspace(match.group() if match is not None else "")
                at = text.find(opener, at + 1)
    return found


def assert_nothing_lost(text: str, message: streamparse.Message, fmt: str,
                        tokens: list[streamparse.Token] | None = None) -> None:
    """Characters missing from the output can only be those of delimiters in the input (and, for
    headed messages, of headers; `tokens`: the input as tokens, in token-aware mode)."""
    out = message.content + message.reasoning
    out += "".join(c.raw for c in message.tool_calls) + "".join(r.raw for r in message.rejected)
    missing = _nonspace(text) - _nonspace(out)
    allowed: Counter[str] = Counter()
    for delimiter in get_format(fmt).delimiters:
        for char, count in _nonspace(delimiter).items():
            allowed[char] += count * text.count(delimiter)
    for header in _headers(text, fmt, tokens):
        allowed += _nonspace(header)
    allowed += _reasoning_leads(text, fmt)
    assert not missing - allowed, f"lost {missing - allowed} of {text!r}"


def _headers(text: str, fmt: str, tokens: list[streamparse.Token] | None) -> list[str]:
    """Headed messages (gpt_oss, functionary_v3_2): a header's text is framing (its channel and role words are not
    content): every stretch from a header opener (or the lead at the start) to the next header end or
    terminator. In token-aware mode only special tokens open and end them."""
    messages = get_format(fmt).messages
    if messages is None:
        return []
    ends = {messages.header_end, *messages.marker_headers, *messages.terminators} - {""}
    if tokens is None:
        tokens = [streamparse.Token(piece, special=True) if piece in ends or piece in messages.openers
                  else streamparse.Token(piece)
                  for piece in re.split(f"({'|'.join(map(re.escape, [*ends, *messages.openers]))})", text)]
    out: list[str] = []
    # The output starts in a header whose opener ended the prompt (`opened_by_prompt`), or in the lead.
    in_header = messages.opened_by_prompt or (bool(messages.lead) and text.startswith(messages.lead))
    for token in tokens:
        piece = token.text if isinstance(token.text, str) else bytes(token.text).decode("utf-8", "replace")
        if token.special and piece in ends:
            in_header = False
        elif token.special and piece in messages.openers:
            in_header = True
        if in_header:
            out.append(piece)
    if messages.lead_opens_headers or messages.call_headers_end_reasoning:  # the lead opens headers anywhere
        stops = "|".join(map(re.escape, [*ends, *messages.openers]))
        out += re.findall(f"{re.escape(messages.lead)}\\S*?(?={stops}|$)", text)
    return out


def assert_every_mode_agrees(data: object, text: str, fmt: str, tools: object) -> streamparse.Message:
    """Both emit modes, under a drawn splitting, give parse(text); accepted calls' JSON reads back."""
    from streamparse.testing import splittings

    parsed = streamparse.parse(text, fmt, tools=tools, id_factory=ids)  # type: ignore[arg-type]
    for emit in ("validated", "progressive"):
        chunks = data.draw(splittings(text))  # type: ignore[attr-defined]
        folded, streamed = run_stream(chunks, format=fmt, tools=tools, emit_calls=emit, id_factory=ids)
        assert streamed == parsed
        assert_stream_matches(folded, parsed)
    for accepted in parsed.tool_calls:  # strict RFC 8259 JSON that reads back to the arguments
        assert strict_loads(accepted.arguments_json) == accepted.arguments
    return parsed


def agreeing(text: str, fmt: str, sizes: tuple[int, ...] = (1,), **options: object) -> streamparse.Message:
    """`parse(text)`, checked against streaming it in both emit modes in chunks of each size (the
    deltas add up to it, and so does the message); the parsed message is returned."""
    options.setdefault("id_factory", ids)
    parsed = streamparse.parse(text, fmt, **options)  # type: ignore[arg-type]
    for emit in ("validated", "progressive"):
        for size in sizes:
            chunks = [text[i:i + size] for i in range(0, len(text), size)]
            folded, streamed = run_stream(chunks, format=fmt, emit_calls=emit, **options)
            assert streamed == parsed, (emit, size)
            assert_stream_matches(folded, parsed)
    return parsed


def named_calls(message: streamparse.Message) -> list[tuple[str, dict[str, object]]]:
    """The accepted calls as (name, arguments)."""
    return [(c.name, c.arguments) for c in message.tool_calls]


def shared_cases(fmt: str) -> list[dict[str, object]]:
    """The real-template cases of one format (streamparse's name) from every cases file; none
    when `../shared` is not beside the checkout."""
    found: list[dict[str, object]] = []
    for name in ("cases.json", "cases_new_families.json", "cases_more.json", "cases_wave3.json", "cases_wave4.json"):
        path = SHARED / "templates" / name
        if path.exists():
            found += [case for case in json.loads(path.read_text()) if case["format"] == fmt]
    return found


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    """The fake completions server of tests/upstream.py, one per test module (imported here, not at the
    top: it needs the server extra, which tests of the parser alone do not)."""
    from upstream import Upstream

    server = Upstream().start()
    yield server
    server.stop()
