"""Tencent HY V4: Hy3's markers without `<tool_sep>`, every one spelled with the checkpoint's marker
suffix: `<tool_calls:SUF><tool_call:SUF>NAME<arg_key:SUF>K</arg_key:SUF><arg_value:SUF>V</arg_value:SUF>…`.

SUF is `:6124c78e` in HY4-preview, `:opensource` in the Hy3 release, or empty. `spec(suffix)` is the
declaration so spelled (`MarkerSuffix`); where no option, tokenizer, template or prompt names the
suffix, the output's first complete marker fixes it (FORMATS.md, fourth wave, Decision 7; the engine's
`engine/suffixes.py`). The name runs to the first `<arg_key:SUF>`, newline or `</tool_call:SUF>`
(glm45's name rule); pairs, values, typing and the last value of a repeated key are glm45's
(Decision 9). Reading and streaming are `bodies/tagged_params.py` (the `tagged_params` kind).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from ..bodies.tagged_params import TaggedParams
from ..spec import SUFFIX, EnvelopeSpec, FormatSpec, MarkerSuffix
from ..types import Message
from . import hy_v3
from .glm45 import value_text
from .hy_v3 import PROMPT_MARKERS, TEMPLATE_SWITCH, markers

# The output's markers that fix the suffix: `<NAME>` or `<NAME:SUF>`, NAME one of these or its closer.
LEARNED = rf"</?(?:think|tool_calls|tool_call|arg_key|arg_value)(?P<suffix>{SUFFIX})>"


@cache
def spec(suffix: str) -> FormatSpec:
    """The HY V4 declaration with every marker spelled with `suffix` ("" for the plain spellings)."""
    opener, closer = markers(suffix, "think", "/think")
    think = (opener, closer)
    block_opener, block_closer, call_opener, call_closer = markers(
        suffix, "tool_calls", "/tool_calls", "tool_call", "/tool_call")
    key_opener, key_closer, value_opener, value_closer = arg_tags = markers(
        suffix, "arg_key", "/arg_key", "arg_value", "/arg_value")
    body = TaggedParams(
        grammar="glm45" + suffix,
        param_open=key_opener,
        param_close=value_closer,
        framing_newline=False,
        call_tag=call_opener,
        call_close=call_closer,
        wrapper_closers=(block_closer,),
        # The name ends at a newline or the first argument tag; a key header at its <arg_value:SUF>.
        head_ends=("\n", *arg_tags),
        param_head_ends=(value_opener, key_opener, value_closer),
        newline_before_next_element=True,
        end_tag_optional=True,
        repeated_key_last_wins=True,
        head_form="{name}",
        param_form="{key}" + key_closer + "{ws}" + value_opener,
    )

    def render(message: Message) -> str:
        """The message as HY V4 writes it after a `<think:SUF>` prompt (the opener written here too),
        with no whitespace between elements (the peers' fixtures)."""
        out = f"{think[0]}{message.reasoning}{think[1]}" if message.reasoning else ""
        out += message.content
        if message.tool_calls:
            calls = "".join(
                f"{call_opener}{call.name}"
                + "".join(f"{key_opener}{key}{key_closer}{value_opener}{value_text(value)}{value_closer}"
                          for key, value in call.arguments.items())
                + call_closer
                for call in message.tool_calls)
            out += f"{block_opener}{calls}{block_closer}"
        return out

    # Hy3's declaration (reasoning, the `<tool_calls>` block whose text is content), with these calls.
    return replace(
        hy_v3.spec(suffix),
        name="hy_v4",
        envelopes=(EnvelopeSpec(openers=(call_opener,), body=body),),
        render=render,
        reserved=(*arg_tags, call_closer, block_closer),  # a value holding one cannot be written back
        # One token each in the HY4 vocabulary.
        special=(*think, block_opener, block_closer, call_opener, call_closer, *arg_tags),
        # Hy3's markup without `<tool_sep` (hy_v3's rule, with it, is tried first).
        detect=(("<tool_calls", "<tool_call", "<arg_key", "<arg_value"),) if not suffix else (),
        marker_suffix=None if suffix else MarkerSuffix(spec, "<tool_calls", PROMPT_MARKERS, TEMPLATE_SWITCH, LEARNED),
    )


HY_V4 = spec("")

FORMATS = (HY_V4,)
