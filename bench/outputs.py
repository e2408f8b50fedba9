"""The model outputs the benchmark feeds: one realistic message per format and size, and worst cases.

Every output is built as a `streamparse.Message` and written with `streamparse.render`, so each
registered format is covered without format-specific code here. The message is reasoning, content,
and three calls with nested arguments, one of them carrying a code string (about 20 KB on the wire at
the 52K size). Its composition is the same at every size (about 35% code string, 20% reasoning, 10%
content, 35% other arguments and markup), so the growth from one size to the next measures length
alone; formats without reasoning (or whose output is calls or content, never both: no content) put
those characters in the other parts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamparse
from streamparse.spec import FormatSpec
from streamparse.types import Message, ToolCall

SIZES = (14_000, 52_000, 203_000)
QUICK_SIZES = (14_000, 52_000)
WORST_SIZES = (262_144, 1_048_576)  # 256K and 1M characters: exactly 4x apart
QUICK_WORST_SIZES = (65_536, 262_144)
ONE_CHAR_CHUNKS = (25_000, 100_000)
QUICK_ONE_CHAR_CHUNKS = (6_250, 25_000)

# The tail of the big string argument: where an "unclosed envelope" output is cut off.
SENTINEL = "# END-OF-PAYLOAD"


def _reasoning(count: int) -> str:
    paragraphs = [
        f"Step {i}: the user wants the records of region r{i % 7} whose amount is >= {100 + i} and whose "
        f"tags include \"urgent\" or 'late'. I should call search_records with a nested filter, then write "
        f"the module and run its tests. Careful: a < b here, x[{i}] may be empty, and C:\\tmp\\{i} is a path."
        for i in range(count)
    ]
    return "\n\n".join(paragraphs)


def _content(count: int) -> str:
    sections = [
        f"## Plan {i}\n\n- query `records` where `amount > {100 + i}` and `status != \"closed\"`;\n"
        f"- write `src/gen/module_{i}.py` (see <details> below, and item [{i}]);\n- run `pytest -k test_{i}`."
        for i in range(count)
    ]
    return "\n\n".join(sections)


def code_string(count: int) -> str:
    """Python source of `count` functions: quotes, backslashes, tabs, tags and braces throughout."""
    blocks = [
        f"def handler_{i}(request, *, retries={i % 5}):\n"
        f"    \"\"\"Handle request #{i}: \"quoted\", 'single', and a path C:\\\\tmp\\\\{i}.\"\"\"\n"
        f"    if request.get(\"items\") and len(request[\"items\"]) > {i}:\n"
        f"        return {{\"ok\": True, \"count\": len(request[\"items\"]), \"tag\": \"<b>{i}</b>\"}}\n"
        f"    for attempt in range(retries):\n"
        f"        print(f\"attempt {{attempt}}/{i}\\t-> {{request!r}}\")\n"
        f"    return None\n"
        for i in range(count)
    ]
    return "\n".join(blocks)


def _typed(value: Any, untyped: bool) -> Any:
    """XML formats carry text only: a nested value travels as its JSON text."""
    if not untyped or isinstance(value, str):
        return value
    return json.dumps(value)


def _calls(scale: float, untyped: bool, code: str) -> list[ToolCall]:
    n = max(1, round(15 * scale))
    search = {
        "query": {
            "text": "overdue invoices in the northern region",
            "filters": [
                {"field": f"f{i}", "op": ["eq", "gte", "in"][i % 3],
                 "value": [i, f"v{i}", {"min": i, "max": i * 2.5, "open": i % 2 == 0}]}
                for i in range(max(1, round(20 * scale)))
            ],
            "sort": [{"by": "amount", "desc": True}, {"by": "date", "desc": False}],
        },
        "page": {"size": 50, "cursor": None},
    }
    write = {
        "path": "src/gen/module.py",
        "content": code,
        "options": {"create_dirs": True, "encoding": "utf-8", "mode": 420},
    }
    tests = {
        "targets": [f"tests/test_module_{i}.py::test_case_{i}" for i in range(n)],
        "env": {f"VAR_{i}": f"value {i} with \"quotes\"" for i in range(n)},
        "config": {"retries": 2, "markers": ["slow", "network"], "timeout": 30.5},
    }
    out = []
    named: tuple[tuple[str, dict[str, Any]], ...] = (("search_records", search), ("write_file", write),
                                                     ("run_tests", tests))
    for position, (name, args) in enumerate(named):
        typed = {key: _typed(value, untyped) for key, value in args.items()}
        out.append(ToolCall(f"call{position}", name, typed, ""))
    return out


def _message(spec: FormatSpec, scale: float) -> Message:
    code = code_string(max(1, round(10 * scale))) + "\n" + SENTINEL
    return Message(  # (a format whose output is calls or content, never both: calls only)
        content="" if spec.content_or_calls else _content(max(1, round(6 * scale))),
        reasoning=_reasoning(max(1, round(8 * scale))) if spec.reasoning else "",
        tool_calls=_calls(scale, spec.untyped_values, code),
    )


@dataclass(frozen=True)
class Output:
    """One benchmark output: the message, its wire text, and whether `parse` reads it back."""

    format: str
    message: Message
    text: str
    round_trip: str  # "ok", or what differs


def round_trip(spec: FormatSpec, message: Message, text: str) -> str:
    """"ok" when `parse(text)` gives `message` back (ids aside), else what differs."""
    parsed = streamparse.parse(text, spec.name)
    problems = []
    if parsed.content != message.content:
        problems.append("content")
    if parsed.reasoning != message.reasoning:
        problems.append("reasoning")
    if [(c.name, c.arguments) for c in parsed.tool_calls] != [(c.name, c.arguments) for c in message.tool_calls]:
        problems.append("calls")
    if parsed.rejected:
        problems.append(f"{len(parsed.rejected)} rejected")
    return "ok" if not problems else "differs: " + ", ".join(problems)


def _fit(spec: FormatSpec, target: int, build: Callable[[FormatSpec, float], Message]) -> tuple[Message, str]:
    """The message whose rendering is closest to `target` characters (bisection on the scale)."""
    low, high = 0.05, 1.0
    while len(streamparse.render(build(spec, high), spec.name)) < target:
        high *= 2
    best: tuple[int, Message, str] | None = None
    for _ in range(30):
        middle = (low + high) / 2
        message = build(spec, middle)
        text = streamparse.render(message, spec.name)
        if best is None or abs(len(text) - target) < best[0]:
            best = (abs(len(text) - target), message, text)
        if len(text) < target:
            low = middle
        else:
            high = middle
        if best[0] <= target // 200:
            break
    assert best is not None
    return best[1], best[2]


def benchmark_output(spec: FormatSpec, target: int) -> Output:
    """The standard output of about `target` characters for this format."""
    message, text = _fit(spec, target, _message)
    return Output(spec.name, message, text, round_trip(spec, message, text))


# ----------------------------------------------------------------------------- chunkings

def fixed_chunks(text: str, size: int) -> list[str]:
    return [text[i: i + size] for i in range(0, len(text), size)]


def random_chunks(text: str, low: int = 1, high: int = 40, seed: int = 0) -> list[str]:
    """Chunks of random length in [low, high], the same for every run (seeded)."""
    rng = random.Random(seed)
    out = []
    pos = 0
    while pos < len(text):
        step = rng.randint(low, high)
        out.append(text[pos: pos + step])
        pos += step
    return out


CHUNKINGS: dict[str, Callable[[str], list[str]]] = {
    "4": lambda text: fixed_chunks(text, 4),
    "1-40": random_chunks,
}


# ----------------------------------------------------------------------------- worst cases

def _longest_call_opener(spec: FormatSpec) -> str:
    openers = list(spec.call_openers)
    # Anchored calls (`FormatSpec.anchors`): a lead begun at their trigger character.
    openers += [a.trigger + "call_name(" for a in spec.anchors if a.trigger]
    if not openers:  # a call anchored only at the start (generic's envelope): how it begins
        openers.append(spec.render(Message(tool_calls=[ToolCall("call0", "call_name", {}, "")])))
    return max(openers, key=len)


def near_miss(spec: FormatSpec) -> str:
    """The longest call opener less its last two characters (`<tool_cal` for Hermes)."""
    opener = _longest_call_opener(spec)
    return opener[:-2] if len(opener) > 3 else opener[:-1]


def _repeat_to(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _one_call(spec: FormatSpec, size: int) -> tuple[Message, str]:
    """Content and one `write_file` call whose code string makes the output about `size` long."""

    def build(spec: FormatSpec, scale: float) -> Message:
        code = code_string(max(1, round(10 * scale))) + "\n" + SENTINEL
        call = ToolCall("call0", "write_file", {"path": "src/big.py", "content": code}, "")
        return Message(content="Writing the file now.", tool_calls=[call])

    return _fit(spec, size, build)


def _content_start(spec: FormatSpec) -> str:
    """What a format writes before content: nothing, or the header of a content message where the
    prompt opened the first one (Functionary v3.2's `all⏎`): the render of an empty message."""
    return spec.render(Message())


def worst_near_miss(spec: FormatSpec, size: int) -> str:
    unit = near_miss(spec)
    if any(opener in unit * 2 for opener in spec.call_openers):  # a short opener (`>>>`) forms again
        unit += " "
    return _content_start(spec) + "Looking at the markup: " + _repeat_to(unit, size)


def worst_unclosed_envelope(spec: FormatSpec, size: int) -> str:
    """A call whose string argument (and envelope) is cut off by the end of output."""
    _, text = _one_call(spec, size)
    return text[: text.index(SENTINEL) + len(SENTINEL)]


def worst_string_argument(spec: FormatSpec, size: int) -> str:
    return _one_call(spec, size)[1]


def worst_whitespace(spec: FormatSpec, size: int) -> str:
    return _content_start(spec) + "Before the gap." + _repeat_to(" \n\t  \n", size) + "After the gap."


# Fed in 4-character chunks, at `WORST_SIZES`; the 1-character-chunk case is built in the runner.
WORST_CASES: dict[str, Callable[[FormatSpec, int], str]] = {
    "near-miss opener in content": worst_near_miss,
    "envelope never closes": worst_unclosed_envelope,
    "one huge string argument": worst_string_argument,
    "whitespace run in content": worst_whitespace,
}
# The case where the emit mode matters most (a long call streams): it also runs in progressive mode.
WORST_CASES_IN_CALLS = ("one huge string argument",)
