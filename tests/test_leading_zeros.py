"""Numbers written with leading zeros (FORMATS.md, fourth wave, Decision 23): in every format whose
parameter text the tool's schema types, `018956` typed integer is 18956, `-007` is -7, and `01.5`
typed number is 1.5; a string-typed value keeps its zeros; JSON bodies are unchanged (a leading zero
inside JSON is still `invalid_json`)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import agreeing, named_calls

import streamparse
from streamparse.schema_typing import typed, without_leading_zeros

SHIP = [{"type": "function", "function": {"name": "ship", "parameters": {"type": "object", "properties": {
    "zip": {"type": "integer"}, "count": {"type": "integer"}, "weight": {"type": "number"},
    "code": {"type": "string"}, "either": {"type": ["integer", "string"]}, "where": {"type": "object"}}}}}]
VALUES = {"zip": "018956", "count": "-007", "weight": "01.5", "code": "03106", "either": "0042"}
EXPECTED = {"zip": 18956, "count": -7, "weight": 1.5, "code": "03106", "either": "0042"}
NS = "]<]minimax[>["
DSML, SPACED = "｜DSML｜", "｜DSML｜ "

# Each schema-typed kind, the values as its templates write untyped text.
WIRES = {
    "qwen3_coder": "<tool_call>\n<function=ship>\n" + "".join(
        f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in VALUES.items()) + "</function>\n</tool_call>",
    "glm45": "<tool_call>ship\n" + "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in VALUES.items()) + "</tool_call>",
    "minimax_m2": '<minimax:tool_call>\n<invoke name="ship">\n' + "".join(
        f'<parameter name="{k}">{v}</parameter>\n' for k, v in VALUES.items()) + "</invoke>\n</minimax:tool_call>",
    "minimax_m3": f'{NS}<tool_call>\n{NS}<invoke name="ship">' + "".join(
        f"{NS}<{k}>{v}{NS}</{k}>" for k, v in VALUES.items()) + f"{NS}</invoke>\n{NS}</tool_call>",
    # DSML: no typing attribute, so the schema types the text.
    "deepseek_v3_2": f'<{DSML}function_calls>\n<{DSML}invoke name="ship">\n' + "".join(
        f'<{DSML}parameter name="{k}">{v}</{DSML}parameter>\n' for k, v in VALUES.items())
        + f"</{DSML}invoke>\n</{DSML}function_calls>",
    "deepseek_v4_1": f'<{SPACED}calls>\n<{SPACED}invoke name="ship">\n' + "".join(
        f'<{SPACED}parameter name="{k}">{v}</{SPACED}parameter>\n' for k, v in VALUES.items())
        + f"</{SPACED}invoke>\n</{SPACED}calls>",
}


@pytest.mark.parametrize("fmt", sorted(WIRES))
def test_integer_and_number_text_with_leading_zeros_reads_as_the_number(fmt: str) -> None:
    msg = agreeing(WIRES[fmt], fmt, sizes=(1, 4), tools=SHIP)
    assert named_calls(msg) == [("ship", EXPECTED)] and msg.rejected == []
    got = msg.tool_calls[0].arguments
    assert type(got["zip"]) is int and type(got["weight"]) is float


@pytest.mark.parametrize(("fmt", "string"), [("deepseek_v3_2", "true"), ("deepseek_v3_2", "false")])
def test_dsml_typing_attributes_fall_back_to_the_same_reading(fmt: str, string: str) -> None:
    # string="true" is typed by a schema that allows no string; string="false" text that is not JSON
    # falls back to the typing rules.
    text = f'<{DSML}invoke name="ship">\n<{DSML}parameter name="zip" string="{string}">018956</{DSML}parameter>\n' \
           f"</{DSML}invoke>"
    assert named_calls(streamparse.parse(text, fmt, tools=SHIP)) == [("ship", {"zip": 18956})]


@pytest.mark.parametrize(("text", "schema", "expected"), [
    ("018956", {"type": "integer"}, 18956),
    ("-007", {"type": "integer"}, -7),
    ("00", {"type": "integer"}, 0),
    ("007.0", {"type": "integer"}, 7),  # integral, as `5.0` is
    ("01.5", {"type": "number"}, 1.5),
    ("-00.25", {"type": "number"}, -0.25),
    ("01e3", {"type": "integer"}, 1000),
    ("01.5", {"type": "integer"}, "01.5"),  # not integral: the text, for validation to refuse
    ("03106", {"type": "string"}, "03106"),  # a string keeps its zeros
    ("0042", {"type": ["integer", "string"]}, "0042"),  # ... whenever the schema allows one
    ("0042", {"type": ["integer", "null"]}, 42),
    ("0x1f", {"type": "integer"}, "0x1f"),  # only decimal digits
    ("+007", {"type": "integer"}, "+007"),  # JSON numbers have no plus sign
    ("{\"zip\": 018956}", {"type": "object"}, "{\"zip\": 018956}"),  # inside JSON: unchanged
])
def test_the_shared_typing(text: str, schema: Any, expected: Any) -> None:
    value, _ = typed(text, schema)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("text", "expected"), [
    ("018956", "18956"), ("-007", "-7"), ("01.5", "1.5"), ("00", "0"), ("-00", "-0"), ("0", "0"),
    ("0.5", "0.5"), ("10", "10"), ("", ""), ("-", "-"), ("0" * 50_000 + "7", "7"),
])
def test_without_leading_zeros(text: str, expected: str) -> None:
    assert without_leading_zeros(text) == expected


def test_a_json_object_parameter_with_a_leading_zero_stays_text_and_is_refused() -> None:
    text = "<tool_call>\n<function=ship>\n<parameter=where>\n{\"zip\": 018956}\n</parameter>\n</function>\n</tool_call>"
    msg = streamparse.parse(text, "qwen3_coder", tools=SHIP)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["schema_violation"]


@pytest.mark.parametrize(("fmt", "text"), [
    ("hermes", '<tool_call>\n{"name": "ship", "arguments": {"zip": 018956}}\n</tool_call>'),
    ("mistral", '[TOOL_CALLS]ship[ARGS]{"zip": 018956}'),
    ("deepseek_v3_1", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>ship<｜tool▁sep｜>{"zip": 018956}'
                      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
])
def test_json_bodies_are_unchanged_a_leading_zero_is_invalid_json(fmt: str, text: str) -> None:
    msg = streamparse.parse(text, fmt, tools=SHIP)
    assert msg.tool_calls == [] and [r.status for r in msg.rejected] == ["invalid_json"]
