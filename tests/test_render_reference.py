"""`ChatTemplate.render` against transformers' own renderer, on every real template in ../shared/templates.

A seeded generator writes conversations of the shapes the OpenAI SDK sends in an agent loop: a system
message (sometimes a later one too), user text or content part lists, assistant turns with content,
`content: null` and one or two tool calls (arguments as JSON text, ids of both the OpenAI and the Mistral
kind), tool results, reasoning on earlier turns under all three names, tools of various schemas, and the
template kwargs the template reads. The reference is transformers' `render_jinja_template` given the
request as transformers' own server prepares it for a text model (arguments parsed into objects, text
parts joined) after `apply_chat_template`'s normalisation (keys whose value is null dropped). Wherever
the reference renders, ours must be identical, except where ours applies a documented workaround (tools
in a system message, system text in the user turn) or refuses with a `CapabilityError`; those are
counted and printed (`pytest -s` shows the table). Needs the `render-test` extra (transformers).
"""

from __future__ import annotations

import copy
import json
import random
import sys
from typing import Any

import pytest
from conftest import SHARED

from streamparse.serve.template import CapabilityError, ChatTemplate, TemplateRenderError

chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")

TEMPLATES = SHARED / "templates"
CONVERSATIONS = 200
SEED = 21

pytestmark = pytest.mark.skipif(not (TEMPLATES / "render_cases.py").is_file(),
                                reason="../shared/templates is not beside the checkout")


def _templates() -> list[dict[str, Any]]:
    sys.path.insert(0, str(TEMPLATES))
    try:
        import render_cases
        import render_cases_more
        import render_cases_wave3
    finally:
        sys.path.remove(str(TEMPLATES))
    return [t for m in (render_cases, render_cases_more, render_cases_wave3) for t in m.TEMPLATES]


_SCHEMAS: list[dict[str, Any]] = [
    {"type": "string", "description": "a city"},
    {"type": "integer"},
    {"type": "string", "enum": ["celsius", "fahrenheit"]},
    {"type": "array", "items": {"type": "string"}},
    {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "boolean"}}},
    {"type": ["string", "null"]},
]


def _tool(rng: random.Random, index: int) -> dict[str, Any]:
    names = rng.sample(["city", "unit", "days", "tags", "point", "note"], rng.randint(0, 3))
    props = {name: copy.deepcopy(rng.choice(_SCHEMAS)) for name in names}
    return {"type": "function", "function": {
        "name": f"tool_{index}", "description": f"Tool number {index}.",
        "parameters": {"type": "object", "properties": props, "required": names[:1]}}}


def _text(rng: random.Random, label: str) -> str:
    return rng.choice([f"{label} text", f"{label} with \"quotes\" and {{braces}}", f"{label}\nline two", "é ünï"])


def _content(rng: random.Random, label: str) -> Any:
    if rng.random() < 0.2:
        return [{"type": "text", "text": _text(rng, label)}, {"type": "text", "text": " more"}]
    return _text(rng, label)


def _call_id(rng: random.Random, turn: int, index: int) -> str:
    return f"call_{turn}{index}abcdef" if rng.random() < 0.5 else f"a{turn}{index}bcdefg"[:9].ljust(9, "x")


def conversation(rng: random.Random, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.6:
        messages.append({"role": "system", "content": _text(rng, "system")})
    for turn in range(rng.randint(1, 3)):
        if turn and rng.random() < 0.1:
            messages.append({"role": "system", "content": _text(rng, "later system")})
        messages.append({"role": "user", "content": _content(rng, f"user {turn}")})
        if tools and rng.random() < 0.6:
            count = 2 if rng.random() < 0.3 else 1
            calls = [{"id": _call_id(rng, turn, i), "type": "function", "function": {
                "name": rng.choice(tools)["function"]["name"], "arguments": json.dumps({"city": "Paris", "n": i})}}
                for i in range(count)]
            assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
            if rng.random() < 0.3:
                assistant[rng.choice(["reasoning_content", "reasoning", "thinking"])] = "thought before the call"
            messages.append(assistant)
            messages += [{"role": "tool", "tool_call_id": call["id"], "content": _text(rng, "result")}
                         for call in calls]
            if rng.random() < 0.3:
                break  # the model answers the tool result next
        answer: dict[str, Any] = {"role": "assistant", "content": _text(rng, f"answer {turn}")}
        if rng.random() < 0.4:
            answer[rng.choice(["reasoning_content", "reasoning", "thinking"])] = f"thought {turn}"
        messages.append(answer)
    if messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": _text(rng, "last user")})
    return messages


def _kwargs(rng: random.Random, reads: frozenset[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if "enable_thinking" in reads and rng.random() < 0.5:
        kwargs["enable_thinking"] = rng.random() < 0.5
    if "reasoning_effort" in reads and rng.random() < 0.5:
        kwargs["reasoning_effort"] = rng.choice(["low", "high"])
    return kwargs


def as_transformers_server_prepares(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request as transformers' server gives it to a text model, then as `apply_chat_template`
    normalises it: arguments parsed into objects, text parts joined, null values dropped."""
    prepared = []
    for message in copy.deepcopy(messages):
        if isinstance(message.get("content"), list):
            message["content"] = "".join(part["text"] for part in message["content"])
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        prepared.append({key: value for key, value in message.items() if value is not None})
    return prepared


def reference(source: str, tokens: dict[str, str], messages: list[dict[str, Any]],
              tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]) -> str | None:
    try:
        rendered, _ = chat_template_utils.render_jinja_template(
            conversations=[as_transformers_server_prepares(messages)], tools=tools, chat_template=source,
            add_generation_prompt=True, **{**tokens, **kwargs})
    except Exception:  # the reference does not render this conversation (raise_exception, a crash, recursion)
        return None
    return str(rendered[0])


def _workaround(template: ChatTemplate, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bool:
    caps = template.capabilities
    return bool(tools and not caps.tools) or (not caps.system_role and any(m["role"] == "system" for m in messages))


def test_renders_equal_transformers_wherever_it_renders() -> None:
    rng = random.Random(SEED)
    rows = []
    for spec in _templates():
        source = (TEMPLATES / spec["file"]).read_text(encoding="utf-8")
        template = ChatTemplate(source, spec["tokens"], spec["file"])
        counts = {"identical": 0, "workaround": 0, "refused": 0, "reference_fails": 0, "we_fail": 0}
        for _ in range(CONVERSATIONS):
            tools = [_tool(rng, i) for i in range(rng.randint(0, 3))] or None
            messages = conversation(rng, tools or [])
            kwargs = _kwargs(rng, template.capabilities.kwargs)
            expected = reference(source, spec["tokens"], messages, tools, kwargs)
            try:
                ours: str | None = template.render(messages, tools, True, **kwargs)
            except CapabilityError:
                counts["refused"] += 1
                continue
            except TemplateRenderError:
                ours = None
            if expected is None:
                counts["reference_fails" if ours is not None else "we_fail"] += 1
            elif _workaround(template, messages, tools):
                counts["workaround"] += 1
            else:
                assert ours == expected, (spec["file"], messages, tools, kwargs)
                counts["identical"] += 1
        rows.append((spec["file"], counts))
    print(f"\n{'template':44} identical workaround refused ref-fails both-fail")
    for name, c in rows:
        print(f"{name:44} {c['identical']:9} {c['workaround']:10} {c['refused']:7} {c['reference_fails']:9} "
              f"{c['we_fail']:9}")
    total = sum(c["identical"] for _, c in rows)
    print(f"identical: {total} of {CONVERSATIONS * len(rows)}")
    assert len(rows) == 61
    assert all(c["identical"] for _, c in rows)  # every template renders some agent-loop conversations
