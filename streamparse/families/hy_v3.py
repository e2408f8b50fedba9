"""Tencent Hunyuan Hy3 ("HY V3"): `<tool_calls>` around `<tool_call>NAME<tool_sep>` calls with GLM's
`<arg_key>K</arg_key><arg_value>V</arg_value>` pairs.

The name ends at `<tool_sep>` (FORMATS.md, third wave, Decision 8); keys, values, typing by the
tool's schema and the last value of a repeated key are glm45's. The prompt ends `<think></think>`
(`no_think`) or `<think>` (`low`/`high`: forced open). Reading and streaming are
`bodies/tagged_params.py` (the `tagged_params` kind).

A checkpoint may spell every marker with a suffix (the Hy3 release's `<tool_call:opensource>`,
Hy3-preview's `HYTK` switch): `spec(suffix)` is the declaration so spelled (`MarkerSuffix`). Hy3
takes the suffix from the `marker_suffix` option, the tokenizer, the chat template or the prompt,
never from its output (fourth wave, Decision 8): without one, the plain spellings only.
"""

from __future__ import annotations

from functools import cache

from ..bodies.tagged_params import TaggedParams
from ..spec import SUFFIX, EnvelopeSpec, FormatSpec, MarkerSuffix, WrapperSpec
from ..types import Message
from .glm45 import value_text

# The prompt tokens that carry the suffix: `<think:SUF>`, `</think:SUF>`, `<｜hy_Assistant:SUF｜>`.
PROMPT_MARKERS = rf"(?:</?think|<｜hy_[A-Za-z_]+)(?P<suffix>{SUFFIX})｜?>"
# Hy3-preview b53bd705's switch: `{%- set HYTK = 'opensource' %}` spells `<tool_calls:opensource>`.
TEMPLATE_SWITCH = r"\{%-?\s*set\s+HYTK\s*=\s*['\"](?P<suffix>[^\s<>｜:\"'{}]{1,64})['\"]\s*-?%\}"


def markers(suffix: str, *names: str) -> tuple[str, ...]:
    """`<NAME{SUF}>` for each name (`/think` gives the closer)."""
    return tuple(f"<{name}{suffix}>" for name in names)


@cache
def spec(suffix: str) -> FormatSpec:
    """The Hy3 declaration with every marker spelled with `suffix` ("" for the plain spellings)."""
    opener, closer = markers(suffix, "think", "/think")
    think = (opener, closer)
    block_opener, block_closer, call_opener, call_closer, sep = markers(
        suffix, "tool_calls", "/tool_calls", "tool_call", "/tool_call", "tool_sep")
    key_opener, key_closer, value_opener, value_closer = arg_tags = markers(
        suffix, "arg_key", "/arg_key", "arg_value", "/arg_value")
    body = TaggedParams(
        grammar="hy_v3" + suffix,
        param_open=key_opener,
        param_close=value_closer,
        framing_newline=False,
        call_tag=call_opener,
        call_close=call_closer,
        wrapper_closers=(block_closer,),
        head_ends=(sep, *arg_tags),  # the name ends at <tool_sep>; an argument tag before it rejects the call
        param_head_ends=(value_opener, key_opener, value_closer),
        newline_before_next_element=True,
        end_tag_optional=True,
        repeated_key_last_wins=True,
        head_closer=sep,
        head_form="{name}" + sep,
        param_form="{key}" + key_closer + "{ws}" + value_opener,
    )

    def render(message: Message) -> str:
        """The message as the Hy3 template writes it after a `<think>` prompt (the opener written here too)."""
        out = f"{think[0]}{message.reasoning}{think[1]}" if message.reasoning else ""
        out += message.content
        if message.tool_calls:
            calls = "".join(
                f"{call_opener}{call.name}{sep}\n"
                + "".join(f"{key_opener}{key}{key_closer}\n{value_opener}{value_text(value)}{value_closer}\n"
                          for key, value in call.arguments.items())
                + f"{call_closer}\n"
                for call in message.tool_calls)
            out += f"{block_opener}\n{calls}{block_closer}"
        return out

    return FormatSpec(
        name="hy_v3",
        aliases=(),
        reasoning=(think,),
        envelopes=(EnvelopeSpec(openers=(call_opener,), body=body),),
        # Whitespace in the block is framing, other text content (third wave, Decision 2).
        wrappers=(WrapperSpec((block_opener,), (block_closer,), empty_is_framing=True, text_is_content=True),),
        render=render,
        reserved=(*arg_tags, sep, call_closer, block_closer),  # a value holding one cannot be written back
        untyped_values=True,
        # Vocabulary tokens (SGLang resolves them by id).
        special=(*think, block_opener, block_closer, call_opener, call_closer, sep, *arg_tags),
        # More specific than glm45's rule, whose markers the Hy3 template also holds (Decision 24), and
        # than hy_v4's (`<tool_sep` is what tells them apart; a suffixed template spells it `<tool_sep:`).
        detect=(("<tool_sep", "<tool_calls", "<arg_key", "<tool_call", "<arg_value"),) if not suffix else (),
        marker_suffix=None if suffix else MarkerSuffix(spec, "<tool_calls", PROMPT_MARKERS, TEMPLATE_SWITCH),
    )


HY_V3 = spec("")

FORMATS = (HY_V3,)
