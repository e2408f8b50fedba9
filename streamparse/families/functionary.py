"""MeetKai Functionary medium v3.1 and v3.2 (Llama 3.1 turns around their own call syntax).

v3.1 writes `<function=NAME>{…}</function>` per call (the `header_json` kind, `formats/functionary_v3_1.peg`)
and `<|python_tag|>` + code for its `python` tool (llama3_json's `python` anchor, shared).
v3.2 writes headed messages `RECIPIENT⏎BODY`, every later one opened by `>>>`; the prompt ends with
the first `>>>` (`MessageSpec.opened_by_prompt`), and a message runs to the next `>>>`
(`openers_end_bodies`): recipient `all` is content, any other a call whose body is its JSON arguments
(the `json_arguments` kind, ended at a `>>>` outside JSON strings). FORMATS.md, Decision 20.
"""

from __future__ import annotations

import json
from functools import lru_cache

from ..bodies.header_json import HeaderJson
from ..bodies.json_arguments import JsonArguments
from ..spec import CALL, CONTENT, FRAMING, EnvelopeSpec, FormatSpec, MessageLayout, MessageRoute, MessageSpec
from ..types import Message
from .llama3 import PYTHON_CODE, PYTHON_TAG, TURN_ENDS

FUNCTION, FUNCTION_END = "<function=", "</function>"
EOM = "<|eom_id|>"
RECIPIENT, ALL = ">>>", "all"


def _arguments(call_arguments: object) -> str:
    return json.dumps(call_arguments, ensure_ascii=False)


# ----------------------------------------------------------------- v3.1

def render_v3_1(message: Message) -> str:
    """Content, then the calls as the v3.1 template writes them (`python` as `<|python_tag|>` + code)."""
    out = message.content
    for call in message.tool_calls:
        code = call.arguments.get("code") if call.name == "python" and list(call.arguments) == ["code"] else None
        if isinstance(code, str) and code.strip() == code and code:
            out += PYTHON_TAG + code
        else:
            out += f"{FUNCTION}{call.name}>{_arguments(call.arguments)}{FUNCTION_END}"
    return out


FUNCTIONARY_V3_1 = FormatSpec(
    name="functionary_v3_1",
    aliases=(),
    reasoning=(),
    envelopes=(EnvelopeSpec(openers=(FUNCTION,), body=HeaderJson(
        "functionary_v3_1", (">",), "<function=NAME>", closers=(FUNCTION_END,), stops=(FUNCTION, PYTHON_TAG),
        layout=("{name}>{arguments}",))),),
    render=render_v3_1,
    # Llama 3.1's special tokens; `<function=` and `</function>` are ordinary text.
    special=(PYTHON_TAG, *TURN_ENDS),
    framing=TURN_ENDS,
    anchors=(PYTHON_CODE,),
    detect=((FUNCTION, EOM),),
    stops=("<|eom_id|>",),  # Llama 3.1: ends a turn that called a tool (the tokenizer's EOS is <|eot_id|>)
)


# ----------------------------------------------------------------- v3.2

@lru_cache(maxsize=256)
def route(header: str, complete: bool) -> MessageRoute:
    """`all` is content; any other recipient is a call named so. A header cut off (no newline) is a
    truncated call, unless it is empty or could still have become `all` (framing)."""
    recipient = header.removeprefix(RECIPIENT).strip()
    if recipient == ALL or (not complete and ALL.startswith(recipient)):
        return MessageRoute(CONTENT if complete else FRAMING)
    return MessageRoute(CALL, recipient)


@lru_cache(maxsize=256)
def call_body(name: str) -> JsonArguments:
    """The body kind of a call message to `name` (kept: a few tools are called again and again)."""
    return JsonArguments(name, closers=(), stops=(RECIPIENT,), tag="the call message")


def render_v3_2(message: Message) -> str:
    """The turn as the v3.2 template writes it after the prompt's `>>>`: `all⏎content`, then one
    `NAME⏎{…}` message per call."""
    messages = [f"{ALL}\n{message.content}"] if message.content or not message.tool_calls else []
    messages += [f"{call.name}\n{_arguments(call.arguments)}" for call in message.tool_calls]
    return RECIPIENT.join(messages)


FUNCTIONARY_V3_2 = FormatSpec(
    name="functionary_v3_2",
    aliases=(),
    reasoning=(),
    envelopes=(),
    render=render_v3_2,
    messages=MessageSpec(openers=(RECIPIENT,), header_end="\n", terminators=(), route=route, call=call_body,
                         opened_by_prompt=True, openers_end_bodies=True,
                         layout=MessageLayout(content=f"{RECIPIENT}{ALL}\n", preamble=f"{RECIPIENT}{ALL}\n",
                                              call=f"{RECIPIENT}{{name}}\n", prompt_wrote=RECIPIENT,
                                              many_calls=True)),
    # `>>>` and the recipients are ordinary text. Content that ends in `>` before the next `>>>` reads
    # as a recipient that starts with `>` (the first `>>>` wins): the wire cannot tell them apart, so
    # generated test messages leave `>` out.
    reserved=(">",),
    detect=((">>>all",),),
)

FORMATS = (FUNCTIONARY_V3_1, FUNCTIONARY_V3_2)
