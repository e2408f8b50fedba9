"""Hermes 2 Pro / 3, Qwen 2.5, QwQ, Qwen3: `<think>` reasoning and `<tool_call>{json}</tool_call>`."""

from __future__ import annotations

import json
from typing import Any

from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node, NodeVisitor

from ..calls import call_from_members, json_problem, object_members
from ..grammar import ValueNode, load_grammar
from ..scanning import JsonAwareScanner
from ..spec import CallResult, Envelope, EnvelopeSpec, FormatSpec, Rejection, reasoning_block
from ..streaming import JsonObjectCallStreamer
from ..types import INVALID_JSON, TRUNCATED, Message
from ..validation import ToolSet

THINK = ("<think>", "</think>")
OPENER, CLOSER = "<tool_call>", "</tool_call>"
_JSON_SPACE = " \t\n\r"


class _CallVisitor(NodeVisitor):  # type: ignore[misc]
    """Collects the members of the call object as `(key, value, raw value text)`."""

    def visit_member(self, node: Node, children: list[Any]) -> tuple[str, Any, str]:
        key, _, _, _, value = node.children
        assert isinstance(key, ValueNode) and isinstance(value, ValueNode)
        return key.value, value.value, value.text

    def visit_members(self, node: Node, children: list[Any]) -> list[tuple[str, Any, str]]:
        first, more = children
        return [first, *more]

    def visit_more_members(self, node: Node, children: list[Any]) -> list[tuple[str, Any, str]]:
        return [member for (_, _, _, member) in children]

    def visit_call_object(self, node: Node, children: list[Any]) -> list[tuple[str, Any, str]]:
        members = children[2]
        return members[0] if isinstance(members, list) and members else []

    def visit_call(self, node: Node, children: list[Any]) -> Any:
        return children[0]

    def visit_doubled_call(self, node: Node, children: list[Any]) -> Any:
        return children[2]

    def visit_body(self, node: Node, children: list[Any]) -> Any:
        return children[1]

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _CallVisitor()


def parse_envelope(envelope: Envelope, tools: ToolSet) -> list[CallResult]:
    body = envelope.body
    if not body.strip():
        if not envelope.complete:
            return [Rejection(TRUNCATED, ["the output ended right after <tool_call>"])]
        return [Rejection(INVALID_JSON, ["empty <tool_call> envelope"])]
    # Fast path for the common case, one plain object; the grammar reads everything else.
    start = len(body) - len(body.lstrip(_JSON_SPACE))
    found = object_members(body, start)
    if found is not None and not body[found[1]:].strip(_JSON_SPACE + "}"):
        return [call_from_members(found[0])]
    try:
        tree = load_grammar("hermes").parse(body)
    except ParseError as error:
        if not envelope.complete:
            return [Rejection(TRUNCATED, ["the output ended inside <tool_call> before the call was complete"])]
        return [Rejection(INVALID_JSON, [f"not one JSON call object: {_describe(error, body)}"])]
    return [call_from_members(_VISITOR.visit(tree))]


def _describe(error: ParseError, body: str) -> str:
    pos = error.pos
    return json_problem(body, pos) or f"unexpected text at character {pos}: {body[pos:pos + 20]!r}"


def render(message: Message) -> str:
    """The message as a Hermes/Qwen model writes it."""
    out = reasoning_block(message) + message.content
    for call in message.tool_calls:
        payload = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        out += ("\n" if out else "") + f"{OPENER}\n{payload}\n{CLOSER}"
    return out


HERMES = FormatSpec(
    name="hermes",
    aliases=("qwen2_5", "qwen3", "hermes2_pro"),
    reasoning=(THINK,),
    envelopes=(
        EnvelopeSpec(
            openers=(OPENER,),
            scanner=lambda: JsonAwareScanner((CLOSER,)),
            streamer=JsonObjectCallStreamer,
        ),
    ),
    parse_envelope=parse_envelope,
    render=render,
    # Added tokens in Qwen 2.5 / QwQ / Qwen3 and Hermes 2 Pro / 3 vocabularies.
    special=(*THINK, OPENER, CLOSER),
)

FORMATS = (HERMES,)
