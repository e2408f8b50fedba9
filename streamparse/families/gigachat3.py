"""ai-sage GigaChat 3 and 3.1: one JSON call object `{"name", "arguments"}` after a call opener.

GigaChat 3 writes the call as the next message, role `function call`
(`<|message_sep|>⏎⏎function call<|role_sep|>⏎{…}`); 3.1 writes `<|function_call|>{…}`. The envelope
ends where the JSON object ends; text after it is content, and a trailing `<|message_sep|>` (the
stop token) is framing (FORMATS.md, third wave, Decision 18); anywhere else it is text. No reasoning, no ids.
"""

from __future__ import annotations

from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec
from ..types import Message
from .hermes import call_object

MESSAGE_SEP, ROLE_SEP = "<|message_sep|>", "<|role_sep|>"
CALL_MESSAGE = f"{MESSAGE_SEP}\n\nfunction call{ROLE_SEP}\n"  # GigaChat 3
FUNCTION_CALL = "<|function_call|>"  # GigaChat 3.1

# A call object is followed by the next call's opener, the stop token or the end of the output.
BODY = JsonCall("gigachat3", closers=(), tag="a GigaChat call opener", end_at_value=True,
                ends_before=(FUNCTION_CALL, MESSAGE_SEP))


def render(message: Message) -> str:
    """The message as the GigaChat 3.1 template writes it (`tool_calls[0]` only there; every call here)."""
    return message.content + "".join(FUNCTION_CALL + call_object(call) for call in message.tool_calls)


GIGACHAT3 = FormatSpec(
    name="gigachat3",
    aliases=(),
    reasoning=(),
    envelopes=(EnvelopeSpec(openers=(CALL_MESSAGE, FUNCTION_CALL), body=BODY),),
    render=render,
    # `<|function_call|>` is one piece of the 3.1 template; GigaChat 3's opener spans ordinary text
    # (`function call`), so in token-aware mode only 3.1's calls are read.
    special=(FUNCTION_CALL,),
    detect=((ROLE_SEP, FUNCTION_CALL), (ROLE_SEP, "function call")),
    trailing_framing=(MESSAGE_SEP,),
    stops=(MESSAGE_SEP,),
)

FORMATS = (GIGACHAT3,)
