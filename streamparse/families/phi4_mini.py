"""Microsoft Phi-4-mini-instruct and Fireworks Firefunction v2: the plain word `functools` directly
followed by a JSON list of `{"name", "arguments"}`, which ends where the list ends.

`functools[` opens the list only at the start of the output or after whitespace; `functools`
anywhere else is content; `functools[]` is no call (it stays content); text after the list is content (FORMATS.md,
third wave, Decision 19). No reasoning; ids are generated, except that a model-written `"id"` in a list
element is kept (the alias `firefunction_v2`: fourth wave, Decision 19).
"""

from __future__ import annotations

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .hermes import call_list

OPENER = "functools["

# A model-written `"id"` in a list element is kept (Firefunction v2, fourth wave Decisions 19 and 20;
# Phi-4-mini writes none).
BODY = JsonCall("call_list", closers=(), tag="functools", end_at_value=True, call_list=True,
                empty_list_is_no_call=True, id_keys=("id",))


def render(message: Message) -> str:
    """The message as the model card (and Firefunction v2's template) writes it: ` functools[…]`."""
    if not message.tool_calls:
        return message.content
    return f"{message.content} functools{call_list(message)}"


PHI4_MINI = FormatSpec(
    name="phi4_mini",
    aliases=("firefunction_v2",),  # fourth wave (Decision 19)
    reasoning=(),
    # The `[` is the start of the list the body reads.
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=BODY, no_call_is_content=True, after_space=True, body_lead=1),),
    render=render,
    # The Phi-4-mini template names no call marker: the format is named explicitly (Decision 24).
)

FORMATS = (PHI4_MINI,)
