"""Meta Muse Glimmer ("ATEM" over channels): headed messages, ` to=RECIPIENT<|message|>BODY`, every later one
opened by `<|start|>assistant`, each ended by `<|eom|>` (or the turn's `<|eot|>`, the stop token).

Recipient `self` is reasoning; `user`, or none (`<|message|>` alone), is content; any other opens a tool
message whose body is one `<atem:function_calls>` block of `<atem:invoke name="N">` elements, read by the
`tagged_block` kind with minimax_m2's invoke/parameter grammar under the `atem:` prefix
(`formats/muse_glimmer.peg`): the call is named by the invoke, not by the recipient. Values are raw
text typed by the tool's schema. A tool header written inside a reasoning body ends it
(`call_headers_end_reasoning`); `<|start|>` ends any body (`openers_end_bodies`). FORMATS.md, section
"muse_glimmer" and fourth-wave Decisions 5 and 6.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from ..bodies.tagged_block import TaggedBlock
from ..spec import CALL, CONTENT, FRAMING, REASONING, TEXT, FormatSpec, MessageLayout, MessageRoute, MessageSpec
from ..types import Message
from .glm45 import value_text
from .minimax_m2 import BODY as MINIMAX_M2_BODY

START, MESSAGE, EOM, EOT = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"
ASSISTANT, LEAD = "assistant", " to="
SELF, USER = "self", "user"
BLOCK_OPENER, BLOCK_CLOSER = "<atem:function_calls>", "</atem:function_calls>"
INVOKE_OPENER, INVOKE_CLOSER = "<atem:invoke name=", "</atem:invoke>"
PARAM_OPENER, PARAM_CLOSER = "<atem:parameter name=", "</atem:parameter>"

# A header, from its opener (or the lead) up to `<|message|>`: `<|start|>assistant to=NAME`, ` to=NAME`,
# `<|start|>assistant` or nothing. A recipient is letters, digits, `_`, `.` and `-`.
_HEADER = re.compile(r"(?:<\|start\|>assistant)?(?: to=(?P<recipient>[\w.\-]+))?")
_RECIPIENT = re.compile(r"[\w.\-]+")

# minimax_m2's invoke under the `atem:` prefix, inside the ATEM block; a repeated parameter keeps its
# last value (Decision 6).
INVOKE = replace(MINIMAX_M2_BODY, grammar="muse_glimmer", param_open=PARAM_OPENER, param_close=PARAM_CLOSER,
                 call_tag="<atem:invoke name=…>", call_close=INVOKE_CLOSER, wrapper_closers=(BLOCK_CLOSER,),
                 repeated_key_last_wins=True)

TOOL_MESSAGE = TaggedBlock(block=(BLOCK_OPENER, BLOCK_CLOSER), call_open=INVOKE_OPENER, call=INVOKE,
                           closers=(EOM, EOT), stops=(START,))


@lru_cache(maxsize=256)
def route(header: str, complete: bool) -> MessageRoute:
    """`self` is reasoning, `user` or no recipient content, any other recipient a tool message (its
    calls are named by their invokes). ` to=` and what is no recipient is no header but text (Decision 5:
    a header is only ` to=NAME<|message|>`); a `<|start|>` header of another form is content (its body is
    visible text). Cut off, a header is a (truncated) tool message when its recipient can no longer
    become `self` or `user`, framing otherwise."""
    found = _HEADER.fullmatch(header)
    if not complete:
        recipient = header.partition(LEAD)[2]
        if not recipient or any(word.startswith(recipient) for word in (SELF, USER)):
            return MessageRoute(FRAMING)
        if _RECIPIENT.fullmatch(recipient) is None:
            return MessageRoute(TEXT if header.startswith(LEAD) else FRAMING)
        return MessageRoute(CALL, recipient)
    if found is None:
        return MessageRoute(TEXT if header.startswith(LEAD) else CONTENT)
    recipient = found.group("recipient")
    if recipient == SELF:
        return MessageRoute(REASONING)
    if recipient is None or recipient == USER:
        return MessageRoute(CONTENT)
    return MessageRoute(CALL, recipient)


def call_body(name: str) -> TaggedBlock:
    """A tool message's body kind: the same for every recipient (the invoke names the call)."""
    return TOOL_MESSAGE


def render(message: Message) -> str:
    """The turn as the Muse Glimmer template writes it after the prompt's `<|start|>assistant`: the
    reasoning message, then one tool message per call (the template renders no content on a turn with
    calls: it is written here as a `to=user` message before them, so that it reads back), or the answer."""
    messages = []
    if message.reasoning:
        messages.append(f"{LEAD}{SELF}{MESSAGE}{message.reasoning}")
    if message.content or not (message.tool_calls or message.reasoning):
        messages.append(f"{LEAD}{USER}{MESSAGE}{message.content}")
    for call in message.tool_calls:
        parameters = "".join(f'{PARAM_OPENER}"{key}">{value_text(value)}{PARAM_CLOSER}\n'
                             for key, value in call.arguments.items())
        messages.append(f'{LEAD}{call.name}{MESSAGE}{BLOCK_OPENER}\n{INVOKE_OPENER}"{call.name}">\n'
                        f"{parameters}{INVOKE_CLOSER}\n{BLOCK_CLOSER}")
    return f"{EOM}{START}{ASSISTANT}".join(messages)


MUSE_GLIMMER = FormatSpec(
    name="muse_glimmer",
    aliases=(),
    reasoning=(),
    envelopes=(),
    render=render,
    messages=MessageSpec(
        openers=(START,),
        header_end=MESSAGE,
        terminators=(EOM, EOT),
        route=route,
        call=call_body,
        lead=LEAD,  # the first message's header goes on after the prompt's `<|start|>assistant`
        openers_end_bodies=True,
        header_end_at_start=True,
        lead_opens_headers=True,
        call_headers_end_reasoning=True,
        layout=MessageLayout(
            reasoning=f"{START}{ASSISTANT}{LEAD}{SELF}{MESSAGE}",
            content=f"{START}{ASSISTANT}{LEAD}{USER}{MESSAGE}",
            call=f"{START}{ASSISTANT}{LEAD}{{name}}{MESSAGE}",
            prompt_wrote=f"{START}{ASSISTANT}",
            end=EOM,
            answer_stop=EOT,
            call_stop=EOT,
            many_calls=True,
        ),
    ),
    # ATEM tags and recipients are ordinary text; content that held them would read back otherwise.
    reserved=(LEAD, BLOCK_OPENER, INVOKE_OPENER, INVOKE_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # Single tokens of the Muse Glimmer vocabulary; ` to=NAME` and every ATEM tag are plain text.
    special=(START, MESSAGE, EOM, EOT),
    # No prompt of the format ends inside reasoning (fourth-wave Decision 21).
    ignores_forced_open=True,
    detect=((BLOCK_OPENER, EOM),),
    stops=("<|eot|>",),
)

FORMATS = (MUSE_GLIMMER,)
