"""Cohere Command A (03-2025, Reasoning) and Cohere2 MoE: Command R7B's plan and action list, with
the answer inside `<|START_TEXT|>…<|END_TEXT|>` (Cohere2 MoE) or `<|START_RESPONSE|>…<|END_RESPONSE|>`.

All four answer markers are framing wherever they appear outside an envelope (FORMATS.md, third
wave, Decision 10); citations `<co>…</co: …>` are text (Decision 9). The Cohere2 MoE prompt ends
`<|START_THINKING|>`: callers pass `thinking_forced_open=True`.
"""

from __future__ import annotations

from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .command_r7b import BODY, CLOSER, OPENER, RESPONSE, THINK, action

TEXT = ("<|START_TEXT|>", "<|END_TEXT|>")


def render(message: Message) -> str:
    """The message as the Cohere2 MoE template writes it: the plan, the answer in `<|START_TEXT|>`,
    then the action list (content goes before calls here, as in every format)."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    if message.content:
        out += f"{TEXT[0]}{message.content}{TEXT[1]}"
    return out + action(message)


COHERE_COMMAND = FormatSpec(
    name="cohere_command",
    aliases=("command_a", "cohere2_moe"),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=BODY),),
    render=render,
    # Single tokens of the Cohere vocabularies, as in Command R7B's.
    special=(*THINK, OPENER, CLOSER, *RESPONSE, *TEXT),
    # More markers than command_r7b's rule, which the Cohere2 MoE template also satisfies (Decision 24).
    detect=((TEXT[0], OPENER),),
    framing=(*RESPONSE, *TEXT),
)

FORMATS = (COHERE_COMMAND,)
