"""DeepSeek V4.1 "spaced DSML": deepseek_v3_2's tags with one ASCII space after `<｜DSML｜` and
`</｜DSML｜`, the calls block named `calls` (FORMATS.md, "deepseek_v4_1"; no template stored: the wire
is vLLM's `deepseek_v41` and SGLang's `deepseekv41`):

    reasoning</think>content⏎⏎<｜DSML｜ calls>⏎<｜DSML｜ invoke name="N">⏎
    <｜DSML｜ parameter name="K" string="true">V</｜DSML｜ parameter>⏎</｜DSML｜ invoke>⏎</｜DSML｜ calls>

Typing is deepseek_v3_2's (`dsml_value`). Thinking prompts end `<think>` (forced open); a calls block
(or a bare invoke) inside the still-open reasoning ends it (fourth wave, Decision 4). The closers
`</｜DSML｜ invoke>` and `</｜DSML｜ calls>` may be missing at the end of a complete call (Decision 1).
The unspaced V3.2/V4 tags, and any other spacing, are text (Decision 3).
"""

from __future__ import annotations

from ..spec import FormatSpec
from .deepseek_dsml import THINK, Dialect

V4_1 = Dialect("｜DSML｜ ", ("calls",), "deepseek_v4_1", end_tag_optional=True, text_is_content=True)


DEEPSEEK_V4_1 = FormatSpec(
    name="deepseek_v4_1",
    aliases=(),
    reasoning=(THINK,),
    envelopes=V4_1.envelopes(),
    wrappers=V4_1.wrappers(),
    # Reasoning is written with its opener (`<think>R</think>`), so it reads back without the prompt's.
    render=V4_1.render,
    reserved=V4_1.reserved(),
    untyped_values=True,
    # Single tokens; the calls block's tags are single tokens only in some checkpoints, so they are
    # read as text (which a token's text also is).
    special=THINK,
    calls_end_reasoning=True,
    # The spaced mark; deepseek_v3_2's rule (`｜DSML｜`) is shorter, so this one is tried first.
    detect=((f"<{V4_1.mark}",),),
)

FORMATS = (DEEPSEEK_V4_1,)
