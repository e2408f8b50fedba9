"""Mistral Nemo, Small 3.x, Devstral, Magistral, Ministral 3: `[THINK]` reasoning and `[TOOL_CALLS]`.

Three wire versions follow the same `[TOOL_CALLS]` token; what follows it decides, per call:

    [TOOL_CALLS][{"name": …, "arguments": {…}, "id": …}, …]   Nemo (pre-v11): one JSON list, several calls
    [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}                      Small 3.2
    [TOOL_CALLS]NAME[ARGS]{…}                                 v11+: Devstral, Magistral, Ministral 3

No token closes the envelope: it ends where its top-level JSON value ends, and text after it is
content. When the value is not valid JSON, the rejected call's text runs to the next
`[TOOL_CALLS]` or the end (FORMATS.md, Decisions): the body is a `first_character` kind whose
scanner checks the JSON as it goes (`value_lead`, `json_reader.JsonValueScanner`); `[` or `{`
first is a Nemo list (`json_call`), anything else one named call (`header_json`).
"""

from __future__ import annotations

import json

from ..bodies.first_character import FirstCharacter
from ..bodies.header_json import HeaderJson
from ..bodies.json_call import JsonCall
from ..spec import EnvelopeSpec, FormatSpec, random_id
from ..types import Message, ToolCall

OPENER, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
THINK = ("[THINK]", "[/THINK]")  # Magistral 2507+, Ministral 3 reasoning
THINK_TAGS = ("<think>", "</think>")  # Magistral 2506

NAMED = HeaderJson("mistral", (ARGS,), f"NAME{ARGS}{{…}}", (), ends_at_object=True, arguments_marker=ARGS,
                   layout=(f"{{name}}{ARGS}{{arguments}}", f"{{name}}{CALL_ID}{{id}}{ARGS}{{arguments}}"))
BODY = FirstCharacter(
    choices=(
        (r"\[(?:ARGS|CALL_ID)\]", NAMED),  # a marker without a name first: rejected as a named call
        # Nemo: a list of call objects (a bare call object is a list of one); the id follows the arguments.
        (r"[\[{]", JsonCall("mistral", (), OPENER, id_keys=("id",), call_list=True)),
        (r"[\s\S]", NAMED),  # one named call; a body that is not one is rejected by the header's grammar
    ),
    closers=(), stops=(OPENER,), tag=OPENER, value_lead=("mistral", "value_lead"),
)

# ----------------------------------------------------------------------------- rendering


def _arguments(call: ToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


def _lead(message: Message) -> str:
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    return out + message.content


def render(message: Message) -> str:
    """The message as a v11+ model writes it: `[THINK]…[/THINK]content[TOOL_CALLS]NAME[ARGS]{…}…`."""
    return _lead(message) + "".join(f"{OPENER}{call.name}{ARGS}{_arguments(call)}" for call in message.tool_calls)


def render_call_id(message: Message) -> str:
    """The message as Mistral Small 3.2 writes it: `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}` per call."""
    return _lead(message) + "".join(f"{OPENER}{call.name}{CALL_ID}{call.id}{ARGS}{_arguments(call)}"
                                    for call in message.tool_calls)


def render_nemo(message: Message) -> str:
    """The message as Mistral Nemo writes it: one `[TOOL_CALLS][{"name", "arguments", "id"}, …]` list."""
    if not message.tool_calls:
        return _lead(message)
    calls = [{"name": call.name, "arguments": call.arguments, "id": call.id} for call in message.tool_calls]
    return _lead(message) + OPENER + json.dumps(calls, ensure_ascii=False)


MISTRAL = FormatSpec(
    name="mistral",
    aliases=("magistral", "devstral"),
    reasoning=(THINK, THINK_TAGS),
    envelopes=(EnvelopeSpec(openers=(OPENER,), body=BODY),),
    render=render,
    # Mistral's chat templates accept only ids of nine alphanumerics.
    id_factory=random_id("", 9),
    # Control tokens of the tekken vocabularies (Magistral 2506's <think> is plain text).
    # [ARGS] and [CALL_ID] are tokens too, but inner markers are read as text (SECURITY.md).
    special=(*THINK, OPENER),
    detect=((OPENER,),),
    detect_turns=("[INST]",),
)

FORMATS = (MISTRAL,)
