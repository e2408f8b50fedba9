"""AllenAI OLMo 3 Instruct / Think: `<function_calls>` holding Python calls, one per line, no list
brackets (the `pythonic` kind's `lines` layout); `<think>…</think>` at the start. No stored template:
the wire is vLLM's `olmo3` parser tests' (FORMATS.md, olmo3; Decision 16).
"""

from __future__ import annotations

from ..bodies.pythonic import PythonicCalls
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .llama3 import python_call

THINK = ("<think>", "</think>")
CALLS, CALLS_END = "<function_calls>", "</function_calls>"


def render(message: Message) -> str:
    """Reasoning, content, then the calls one per line in `<function_calls>`."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        out += CALLS + "\n".join(map(python_call, message.tool_calls)) + CALLS_END
    return out


OLMO3 = FormatSpec(
    name="olmo3",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALLS,), body=PythonicCalls(
        tag="the call lines", listed=False, lines=True, closers=(CALLS_END,))),),
    render=render,
    # No tokenizer was checked: no marker is declared a special token (name the format explicitly).
    detect=((CALLS, CALLS_END, "<think>"),),
)

FORMATS = (OLMO3,)
