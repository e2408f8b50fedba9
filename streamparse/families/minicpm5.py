"""OpenBMB MiniCPM5 (MiniCPM 4 XML): `<function name="N"><param name="K">V</param>…</function>` calls,
no wrapper, one after another (the template joins them by a newline after the content).

minimax_m2's invoke/parameter grammar with the tag names `function`/`param`; a value is its raw text,
or a CDATA section `<![CDATA[`…`]]>` whose inner text is the value, byte-exact (`TaggedParams.raw_bracket`:
it may hold `</param>` and `</function>`). The template writes a string in CDATA when it holds `<`, `&` or a
newline, and non-strings with Jinja's string conversion (`45`, `True`, `None`, Python reprs): the tool's
schema types them (JSON first, then Python literals). Reasoning `<think>⏎…⏎</think>⏎⏎`; with
`enable_thinking=true` the prompt ends `<think>⏎` (forced open). FORMATS.md, fourth-wave Decision 14.
"""

from __future__ import annotations

from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, reasoning_block
from ..types import Message

THINK = ("<think>", "</think>")
FUNCTION_OPENER, FUNCTION_CLOSER = "<function name=", "</function>"
PARAM_OPENER, PARAM_CLOSER = "<param name=", "</param>"
CDATA = ("<![CDATA[", "]]>")

BODY = TaggedParams(
    grammar="minicpm5",
    param_open=PARAM_OPENER,
    param_close=PARAM_CLOSER,
    framing_newline=False,
    call_tag="<function name=…>",
    call_close=FUNCTION_CLOSER,
    wrapper_closers=(),
    newline_before_next_element=True,
    end_tag_optional=True,
    repeated_key_last_wins=True,
    python_values=True,  # the template prints non-strings with Jinja's string conversion (Python's str())
    head_form='"{name}">',
    param_form='"{key}">',
    raw_bracket=CDATA,
)


def _text(value: Any) -> str:
    """A value as the template writes it: a string raw, in CDATA when it holds `<`, `&` or a newline;
    anything else as Python's `str()` prints it."""
    if not isinstance(value, str):
        return str(value)
    return f"{CDATA[0]}{value}{CDATA[1]}" if any(char in value for char in "<&\n") else value


def render(message: Message) -> str:
    """The message as the MiniCPM5 template writes it after `<|im_start|>assistant⏎` (without
    `<tool_sep>` placeholders in the content: the calls follow it, one per line)."""
    calls = [f'{FUNCTION_OPENER}"{call.name}">'
             + "".join(f'{PARAM_OPENER}"{key}">{_text(value)}{PARAM_CLOSER}' for key, value in call.arguments.items())
             + FUNCTION_CLOSER for call in message.tool_calls]
    return reasoning_block(message, THINK) + "\n".join([message.content, *calls] if message.content else calls)


MINICPM5 = FormatSpec(
    name="minicpm5",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(FUNCTION_OPENER,), body=BODY),),
    render=render,
    # A string value holding `]]>` cannot be written back (CDATA has no escaping); the tags below
    # could not be written raw.
    reserved=(FUNCTION_CLOSER, PARAM_OPENER, PARAM_CLOSER, CDATA[1]),
    untyped_values=True,
    # No delimiter is known to be a single token (FORMATS.md names none): all are read as text.
    # A markup rule: it wins over the ChatML `<|im_start|>` turn rule that names hermes (Decision 22).
    detect=((FUNCTION_OPENER, PARAM_OPENER),),
)

FORMATS = (MINICPM5,)
