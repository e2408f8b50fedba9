"""OpenAI gpt-oss ("harmony"): headed messages. `analysis` is reasoning; `final` and `commentary`
without a recipient are content; a message to `functions.NAME` (or any recipient but `assistant`) is a
call whose body is its JSON arguments (`bodies/json_arguments.py`).

The engine's message readers (`engine/messages.py`) hold each header and ask `route` what its body is;
`route` reads the header with `formats/gpt_oss.peg`. FORMATS.md, "Harmony messages", has the rules.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from parsimonious.exceptions import ParseError
from parsimonious.nodes import Node, NodeVisitor

from ..bodies.json_arguments import JsonArguments
from ..grammar import load_grammar
from ..spec import CALL, CONTENT, FRAMING, REASONING, FormatSpec, MessageLayout, MessageRoute, MessageSpec
from ..types import Message

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
END, CALL_END, RETURN = "<|end|>", "<|call|>", "<|return|>"
TERMINATORS = (END, CALL_END, RETURN)
FUNCTIONS = "functions."

# ----------------------------------------------------------------- reading a header


class _HeaderVisitor(NodeVisitor):  # type: ignore[misc]
    """`header` → (channel, recipient): the first of each the header names, or None."""

    def visit_header(self, node: Node, children: list[Any]) -> tuple[str | None, str | None]:
        found: dict[str, str] = {}
        stack: list[Any] = [children]
        while stack:
            item = stack.pop()
            if isinstance(item, tuple):
                found[item[0]] = item[1]  # popped last to first: the first one written wins
            elif isinstance(item, list):
                stack.extend(item)
        return found.get("channel"), found.get("recipient")

    def visit_channel(self, node: Node, children: list[Any]) -> tuple[str, str]:
        return "channel", node.text

    def visit_recipient(self, node: Node, children: list[Any]) -> tuple[str, str]:
        return "recipient", children[2].text

    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        return children or node


_VISITOR = _HeaderVisitor()


@lru_cache(maxsize=256)
def route(header: str, complete: bool) -> MessageRoute:
    """What a message's body is, from its header (FORMATS.md "Harmony messages", decisions 4-6).

    Kept for the last 256 headers: an output repeats a few headers (`<|start|>assistant<|channel|>analysis`,
    one per tool), and reading one with the grammar costs far more than the body's delimiter search.

    A recipient other than `assistant` makes a call whatever the channel, named by the recipient less
    `functions.`; otherwise `analysis` is reasoning and every other channel, or none, is content. A
    header cut off is framing, or a (truncated) call when it names a `functions.` recipient."""
    try:  # the well-formed start of the header decides (a cut-off header has no more)
        channel, recipient = _VISITOR.visit(load_grammar("gpt_oss").match(header))
    except ParseError:
        channel = recipient = None
    if recipient is not None and recipient != "assistant":
        if complete or recipient.startswith(FUNCTIONS):
            return MessageRoute(CALL, recipient.removeprefix(FUNCTIONS))
        return MessageRoute(FRAMING)
    if not complete:
        return MessageRoute(FRAMING)
    return MessageRoute(REASONING if channel == "analysis" else CONTENT)


@lru_cache(maxsize=256)
def call_body(name: str) -> JsonArguments:
    """The body kind of a call message to `name` (kept: a few tools are called again and again)."""
    return JsonArguments(name, closers=TERMINATORS, tag="the call message", unknown_tool_first=True)


# ----------------------------------------------------------------- writing a message back

def render(message: Message) -> str:
    """The turn as the gpt-oss template writes it, from its first `<|start|>assistant` (the generation
    prompt) to its stop token: analysis, then the final answer, or a commentary preamble and one
    `<|call|>`-terminated message per call (the template renders only the first call of a turn)."""
    out = ""
    if message.reasoning:
        out += f"{START}assistant{CHANNEL}analysis{MESSAGE}{message.reasoning}{END}"
    if message.content:
        if message.tool_calls:
            out += f"{START}assistant{CHANNEL}commentary{MESSAGE}{message.content}{END}"
        else:
            out += f"{START}assistant{CHANNEL}final{MESSAGE}{message.content}{RETURN}"
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        out += f"{START}assistant to={FUNCTIONS}{call.name}{CHANNEL}commentary json{MESSAGE}{arguments}{CALL_END}"
    return out


# ----------------------------------------------------------------- the format

GPT_OSS = FormatSpec(
    name="gpt_oss",
    aliases=("harmony",),
    # The analysis message at its simplest (as the oracle cases name it); `messages` reads every form.
    reasoning=((f"{CHANNEL}analysis{MESSAGE}", END),),
    envelopes=(),
    render=render,
    messages=MessageSpec(
        openers=(START, CHANNEL),
        header_end=MESSAGE,
        terminators=TERMINATORS,
        route=route,
        call=call_body,
        lead=" to=",  # the first message's role header goes on after the prompt's `<|start|>assistant`
        # The template's headers: analysis, then the final answer, or a commentary preamble and a call
        # in the role-header form (` to=functions.NAME` before the channel, ` json` content type).
        layout=MessageLayout(
            reasoning=f"{START}assistant{CHANNEL}analysis{MESSAGE}",
            content=f"{START}assistant{CHANNEL}final{MESSAGE}",
            preamble=f"{START}assistant{CHANNEL}commentary{MESSAGE}",
            call=f"{START}assistant to={FUNCTIONS}{{name}}{CHANNEL}commentary json{MESSAGE}",
            prompt_wrote=f"{START}assistant",
            end=END,
            answer_stop=RETURN,
            call_stop=CALL_END,
        ),
    ),
    # Single tokens of the o200k_harmony vocabulary; channel names, ` json` and ` to=…` are ordinary text.
    special=(START, CHANNEL, MESSAGE, END, CONSTRAIN, CALL_END, RETURN),
    detect=((CHANNEL, CALL_END),),
    stops=("<|call|>",),
)

FORMATS = (GPT_OSS,)
