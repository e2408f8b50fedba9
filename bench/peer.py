"""The standalone peer, side by side: transformers' `ResponseParser` and `parse_response`.

transformers is optional (the `bench` extra; it needs no torch). Its parser is driven by a
"response template", a small JSON spec per format; ours are in `bench/templates/<format>.json`,
written after the fallbacks transformers itself ships for Qwen (see
`transformers/cli/serving/utils.py`). Templates are compiled once and reused, as a server would.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamparse
from streamparse.registry import get_format

from .measure import DEFAULT_REPS, PARSE_REPS, Reps, StreamTiming, best_of

TEMPLATES = Path(__file__).resolve().parent / "templates"
INSTALL_HINT = "pip install 'streamparse[bench]' (or: pip install transformers; no torch needed)"

# Formats that transformers' response-template language cannot read, and why. These (and only these)
# have no template: the side-by-side table names them with the reason instead of comparing.
INEXPRESSIBLE: dict[str, str] = {
    "apertus": (
        "a call is a one-key object {NAME: ARGUMENTS}; a template's transform only looks up fixed keys "
        "('{content.key}', or an element's keys with transform_each), no content parser turns a key into "
        "a value, and one region per call would need a close delimiter that also occurs inside arguments "
        "(the '}, {\"k\": {' between two one-key objects is valid JSON inside any argument)"
    ),
    "olmo3": (
        "calls are Python calls one per line with no list brackets; the only Python content parser "
        "(python-call-list) reads one '[...]' list, and one region per line would need a close pattern "
        "that also matches the newlines inside a call's string arguments"
    ),
    "minimax_m3": (
        "parameters nest (elements holding elements, 'item' arrays, repeated keys as lists); the only "
        "tag content parser (xml-inline) reads flat key/value tags, so a container's value would be its "
        "inner markup as text"
    ),
    "gemma4": (
        "the arguments are an object literal (bare keys, strings between <|\"|> tokens, None), not JSON: no "
        "content parser reads it (json needs JSON, python-call-list reads calls, xml-inline and kv-lines "
        "are flat), and a regex cannot find the matching '}' of nested objects"
    ),
    "function_gemma": (
        "the arguments are an object literal (bare keys, strings between <escape> tokens, None), not JSON: "
        "no content parser reads it, as for gemma4"
    ),
    "generic": (
        "the whole output is one JSON object whose key chooses what it is (a call list, one call, or the "
        "answer): a field cannot choose its shape by a key, and the object's closing '}' also occurs "
        "inside arguments"
    ),
    "kimi_k3": (
        "each argument's type attribute says how its body is read (string: the text; number, object, ...: "
        "JSON), and xml-inline applies one value_parser to every tag; the json element holding the whole "
        "arguments object is a second body shape a call field cannot choose between"
    ),
}


@dataclass(frozen=True)
class Peer:
    """The loaded peer: its version and its two entry points."""

    version: str
    response_parser: Any  # transformers.utils.chat_parsing.ResponseParser
    parse_response: Any  # transformers.utils.chat_parsing.parse_response
    load_template: Any  # transformers.utils.chat_parsing.response_templates.load_response_template


def load_peer() -> Peer | None:
    """transformers' chat parsing, or None when transformers (or its chat_parsing) is missing."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" banner
    try:
        import transformers
        from transformers.utils.chat_parsing import ResponseParser, parse_response
        from transformers.utils.chat_parsing.response_templates import load_response_template
    except ImportError:
        return None
    return Peer(transformers.__version__, ResponseParser, parse_response, load_response_template)


def comparable_formats() -> list[str]:
    """Every registered format (by its canonical name, aliases folded) that has a response template."""
    names = sorted({get_format(name).name for name in streamparse.formats()})
    return [name for name in names if name not in INEXPRESSIBLE and template_path(name).exists()]


def template_path(format: str) -> Path:
    return TEMPLATES / f"{format}.json"


def load_template(peer: Peer, format: str) -> Any | None:
    """The compiled response template for `format`, or None for a format in `INEXPRESSIBLE` or
    without one in bench/templates (`--formats` may name any format: it is then measured alone)."""
    path = template_path(format)
    if format in INEXPRESSIBLE or not path.exists():
        return None
    return peer.load_template(json.loads(path.read_text(encoding="utf-8")))


def stream_once(peer: Peer, template: Any, chunks: list[str]) -> dict[str, Any]:
    parser = peer.response_parser(template, prefix="")
    feed = parser.feed
    for chunk in chunks:
        feed(chunk)
    message, _ = parser.finalize()
    return dict(message)


def time_stream(peer: Peer, template: Any, chunks: list[str], reps: Reps = DEFAULT_REPS) -> StreamTiming:
    seconds = best_of(lambda: stream_once(peer, template, chunks), reps)
    return StreamTiming(seconds, len(chunks))


def time_parse(peer: Peer, template: Any, text: str, reps: Reps = PARSE_REPS) -> float:
    return best_of(lambda: peer.parse_response(text, template, prefix=""), reps)


def agreement(peer: Peer, template: Any, text: str, format: str) -> str:
    """Whether the peer reads `text` as we do: "same", or which parts differ (or its error)."""
    ours = streamparse.parse(text, format)
    try:
        theirs = peer.parse_response(text, template, prefix="")
    except Exception as error:  # the peer raises on output it cannot read
        return f"peer raised {type(error).__name__}"
    calls = []
    for call in theirs.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        calls.append((function.get("name"), function.get("arguments")))
    problems = []
    if (theirs.get("content") or "") != ours.content:
        problems.append("content")
    if (theirs.get("reasoning_content") or "") != ours.reasoning:
        problems.append("reasoning")
    if calls != [(c.name, c.arguments) for c in ours.tool_calls]:
        problems.append("calls")
    return "same" if not problems else "differs: " + ", ".join(problems)
