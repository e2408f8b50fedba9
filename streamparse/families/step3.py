"""StepFun Step 3: `<｜tool_calls_begin｜>` around `<｜tool_call_begin｜>function<｜tool_sep｜>` calls whose
body is a `<steptml:invoke name="N">` with `<steptml:parameter name="K">V</steptml:parameter>` elements.

Markers use U+FF5C `｜` and ASCII `_`. Values are byte-exact text typed by the tool's schema. No
template is stored: the wire is SGLang's `step3_detector.py` and vLLM's tests (third wave, Decision
11: `function<｜tool_sep｜>` is optional, the invoke's own name and a newline before it are framing,
any other text there rejects the call; a bare invoke is a call). No ids.
"""

from __future__ import annotations

from ..bodies.tagged_params import TaggedParams
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message
from .glm45 import value_text

THINK = ("<think>", "</think>")
BLOCK_OPENER, BLOCK_CLOSER = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
CALL_OPENER, CALL_CLOSER, SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"
INVOKE_OPENER, INVOKE_CLOSER = "<steptml:invoke name=", "</steptml:invoke>"
PARAM_OPENER, PARAM_CLOSER = "<steptml:parameter name=", "</steptml:parameter>"

_SHARED = {"param_open": PARAM_OPENER, "param_close": PARAM_CLOSER, "framing_newline": False,
           "newline_before_next_element": True, "end_tag_optional": True}
BODY = TaggedParams(grammar="step3", call_tag=CALL_OPENER, call_close=CALL_CLOSER, wrapper_closers=(BLOCK_CLOSER,),
                    head_ends=('">', "'>"), head_closer="<steptml:invoke …>",
                    head_form=f'function{SEP}{INVOKE_OPENER}"{{name}}">', tail_form=INVOKE_CLOSER,
                    param_form='"{key}">', **_SHARED)  # type: ignore[arg-type]
BARE = TaggedParams(grammar="step3_invoke", call_tag="<steptml:invoke …>", call_close=INVOKE_CLOSER,
                    wrapper_closers=(BLOCK_CLOSER,), head_form='"{name}">', param_form='"{key}">',
                    **_SHARED)  # type: ignore[arg-type]


def render(message: Message) -> str:
    """The message as SGLang's Step 3 detector reads it."""
    out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
    out += message.content
    if message.tool_calls:
        calls = "".join(
            f'{CALL_OPENER}function{SEP}{INVOKE_OPENER}"{call.name}">'
            + "".join(f'{PARAM_OPENER}"{key}">{value_text(value)}{PARAM_CLOSER}'
                      for key, value in call.arguments.items())
            + f"{INVOKE_CLOSER}{CALL_CLOSER}"
            for call in message.tool_calls)
        out += f"{BLOCK_OPENER}{calls}{BLOCK_CLOSER}"
    return out


STEP3 = FormatSpec(
    name="step3",
    aliases=(),
    reasoning=(THINK,),
    envelopes=(EnvelopeSpec(openers=(CALL_OPENER,), body=BODY), EnvelopeSpec(openers=(INVOKE_OPENER,), body=BARE)),
    # Whitespace in the block is framing, other text content (third wave, Decision 2).
    # A `<｜tool_sep｜>` between calls (one vLLM fixture) is framing.
    wrappers=(WrapperSpec((BLOCK_OPENER,), (BLOCK_CLOSER,), empty_is_framing=True, text_is_content=True,
                          framing=(SEP,)),),
    render=render,
    reserved=(SEP, CALL_CLOSER, INVOKE_CLOSER, PARAM_OPENER, PARAM_CLOSER),
    untyped_values=True,
    # The `｜` markers are single pieces; `<steptml:…>` tags are read as text (SGLang matches them so).
    special=(BLOCK_OPENER, BLOCK_CLOSER, CALL_OPENER, CALL_CLOSER, SEP),
)

FORMATS = (STEP3,)
