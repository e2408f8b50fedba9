"""DeepSeek V3.2 "DSML" (and V4's `tool_calls` block name):

    <｜DSML｜function_calls>⏎<｜DSML｜invoke name="N">⏎<｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>⏎…

`string="true"`: the value is the literal text (typed by the schema only when the schema allows no
string); `string="false"`: the value is JSON, falling back to the typing rules. Values are
byte-exact: no framing newline. Reading and streaming are `bodies/tagged_params.py`, shared with qwen3_coder.
`Dialect` is what the DSML spellings share (deepseek_v4_1 and gigachat3_5 declare theirs with it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..bodies.tagged_params import TaggedParams
from ..schema_typing import Typed, schema_types, typed, typed_json
from ..spec import EnvelopeSpec, FormatSpec, WrapperSpec
from ..types import Message, ToolCall

DSML = "｜DSML｜"
THINK = ("<think>", "</think>")


def dsml_value(text: str, flag: str | None, schema: Any) -> Typed:
    """FORMATS.md, "Typing by schema", DSML: `string="false"` is JSON; `string="true"` is a string
    whenever the schema allows one; without the attribute the text is typed as in qwen3_coder."""
    if flag == "false":
        return typed_json(text, schema)
    if flag == "true":
        types = schema_types(schema)
        if not types or "string" in types:
            return text, None
    return typed(text, schema)


def dsml_is_string(flag: str | None, schema: Any) -> bool:
    """Whether `dsml_value` gives the text itself whatever it is (then the value streams)."""
    if flag == "false":
        return False
    types = schema_types(schema)
    return (flag == "true" and "string" in types) or not types - {"string"}


@dataclass(frozen=True)
class Dialect:
    """The spellings of one DSML dialect, and what its wire leaves open.

    Every tag is `<` or `</`, then `mark`, then the tag's name: `<｜DSML｜invoke …>` (V3.2, V4),
    `<｜DSML｜ invoke …>` (V4.1, spaced), `<｜GCML｜invoke …>` (GigaChat 3.5). `blocks`: the names of
    the calls block (`block` writes the first); `grammar`: the invoke body's, in `formats/`. The
    fourth wave's dialects also set `end_tag_optional` (a call complete but for its `</…invoke>` at
    the end of the output is a call, not `truncated`: Decision 1) and `text_is_content` (text other
    than whitespace inside the block is content and the block stays open, instead of ending it:
    Decision 2)."""

    mark: str
    blocks: tuple[str, ...]
    grammar: str
    end_tag_optional: bool = False
    text_is_content: bool = False

    def opener(self, name: str) -> str:
        return f"<{self.mark}{name}"

    def closer(self, name: str) -> str:
        return f"</{self.mark}{name}>"

    def body(self) -> TaggedParams:
        """The invoke body: byte-exact values typed as `dsml_value` says; a missing `</…invoke>` is
        forgiven when the block closes after a parameter."""
        return TaggedParams(
            grammar=self.grammar,
            param_open=self.opener("parameter"),
            param_close=self.closer("parameter"),
            framing_newline=False,
            call_tag=f"{self.opener('invoke')} …>",
            call_close=self.closer("invoke"),
            wrapper_closers=tuple(self.closer(block) for block in self.blocks),
            value_of=dsml_value,
            is_string=dsml_is_string,
            head_form=' name="{name}">',
            param_form=' name="{key}" string="{type}">',
            type_words=(("string", "true"), ("json", "false")),
            end_tag_optional=self.end_tag_optional,
        )

    def envelopes(self) -> tuple[EnvelopeSpec, ...]:
        return (EnvelopeSpec(openers=(self.opener("invoke"),), body=self.body()),)

    def wrappers(self) -> tuple[WrapperSpec, ...]:
        return tuple(WrapperSpec((f"{self.opener(block)}>",), (self.closer(block),),
                                 text_is_content=self.text_is_content) for block in self.blocks)

    def reserved(self) -> tuple[str, ...]:
        return (self.closer("invoke"), self.opener("parameter"), self.closer("parameter"))

    def block(self, calls: Sequence[ToolCall]) -> str:
        """The calls block as the encoders write it: invokes and their parameters one per line."""
        invokes = "".join(
            f'{self.opener("invoke")} name="{call.name}">\n'
            + "".join(self._param(key, value) for key, value in call.arguments.items())
            + f"{self.closer('invoke')}\n"
            for call in calls
        )
        return f"{self.opener(self.blocks[0])}>\n{invokes}{self.closer(self.blocks[0])}"

    def render(self, message: Message) -> str:
        """The message as DeepSeek's encoders write it (thinking mode, reasoning tags included): the
        reasoning block, the content, and the calls block after `⏎⏎`."""
        out = f"{THINK[0]}{message.reasoning}{THINK[1]}" if message.reasoning else ""
        out += message.content
        if message.tool_calls:
            out += "\n\n" + self.block(message.tool_calls)
        return out

    def _param(self, key: str, value: Any) -> str:
        if isinstance(value, str):
            return f'{self.opener("parameter")} name="{key}" string="true">{value}{self.closer("parameter")}\n'
        written = json.dumps(value, ensure_ascii=False)
        return f'{self.opener("parameter")} name="{key}" string="false">{written}{self.closer("parameter")}\n'


V3_2 = Dialect(DSML, ("function_calls", "tool_calls"), "deepseek_v3_2")  # V3.2, V4


DEEPSEEK_V3_2 = FormatSpec(
    name="deepseek_v3_2",
    aliases=("deepseek_v4",),  # fourth wave (Decision 19): V4's template writes the `tool_calls` block
    reasoning=(THINK,),
    envelopes=V3_2.envelopes(),
    wrappers=V3_2.wrappers(),
    render=V3_2.render,
    reserved=V3_2.reserved(),
    untyped_values=True,
    detect=((DSML,),),
)

FORMATS = (DEEPSEEK_V3_2,)
