"""MiniMax M3 (`minimax_m3`): nested parameter tags typed along the schema path (Decision 7), by
example. No template is stored: the wire is SGLang's `minimax_m3.py` and vLLM's tests'
(`fixtures/minimax_m3/create_order.txt` follows FORMATS.md's example).

Every example is checked in both emit modes and under 1- and 5-character chunks (`read`).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, agreeing, named_calls

import streamparse
from streamparse import Message, ToolCall, parse

FMT = "minimax_m3"
NS = "]<]minimax[>["
TOOLS = json.loads((FIXTURES / FMT / "tools.json").read_text())
BLOCK, BLOCK_END = f"{NS}<tool_call>\n", f"\n{NS}</tool_call>"


def el(key: str, inner: str) -> str:
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def invoke(name: str, inner: str = "") -> str:
    return f'{NS}<invoke name="{name}">{inner}{NS}</invoke>'


def read(text: str, **options: object) -> Message:
    return agreeing(text, FMT, sizes=(1, 5), **options)


def statuses(message: Message) -> list[str]:
    return [r.status for r in message.rejected]


def test_the_spec_example_typed_by_the_schema_and_untyped_without_one() -> None:
    text = (FIXTURES / FMT / "create_order.txt").read_text()
    msg = read(text, tools=TOOLS)
    assert msg.content == "I'll place the order."
    assert named_calls(msg) == [("create_order", {
        "user_id": 42, "shipping": {"city": "Singapore", "zip": " 018956 "},
        "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-7", "qty": 10}], "gift": False})]
    untyped = read(text)
    assert untyped.tool_calls[0].arguments["user_id"] == "42"
    assert untyped.tool_calls[0].arguments["items"] == [{"sku": "book-001", "qty": "2"}, {"sku": "pen-7", "qty": "10"}]


def test_a_repeated_key_collects_a_list_typed_by_the_items_schema() -> None:
    inner = el("user_id", "1") + el("counts", "3") + el("counts", " 4 ") + el("tags", "a") + el("tags", "b")
    msg = read(BLOCK + invoke("create_order", inner) + BLOCK_END, tools=TOOLS)
    assert msg.tool_calls[0].arguments == {"user_id": 1, "counts": [3, 4], "tags": ["a", "b"]}


def test_whitespace_between_ns_and_the_tag_is_framing_and_several_invokes_share_a_block() -> None:
    text = (f"{NS}\n<tool_call>\n{NS} <invoke name=\"get_time\">{NS}\n<timezone>UTC{NS}\n</timezone>{NS}</invoke>\n"
            + invoke("get_time", el("timezone", "Asia/Tokyo")) + f"\n{NS} </tool_call>")
    msg = read(text, tools=TOOLS)
    assert named_calls(msg) == [("get_time", {"timezone": "UTC"}), ("get_time", {"timezone": "Asia/Tokyo"})]


def test_unknown_container_is_an_object_unless_its_first_child_is_item() -> None:
    inner = el("list", el("item", "x") + el("item", "y")) + el("obj", el("a", "1")) + el("empty", "")
    msg = read(BLOCK + invoke("f", inner) + BLOCK_END)
    assert msg.tool_calls[0].arguments == {"list": ["x", "y"], "obj": {"a": "1"}, "empty": ""}


@pytest.mark.parametrize("inner", [
    el("a", "1").replace(f"{NS}</a>", f"{NS}</b>"),       # mismatched closing tag
    f"{NS}<a>1" + el("b", "2"),                            # missing closing tag
    el("a", "text" + el("b", "2")),                        # text beside elements
    "stray text" + el("a", "1"),
])
def test_malformed_trees_are_invalid_json_and_the_next_call_stands(inner: str) -> None:
    msg = read(BLOCK + invoke("f", inner) + invoke("g") + BLOCK_END)
    assert statuses(msg)[0] == "invalid_json" and msg.rejected[0].name == "f"


def test_typed_leaves_that_do_not_fit_are_schema_violations() -> None:
    msg = read(BLOCK + invoke("create_order", el("user_id", "")) + BLOCK_END, tools=TOOLS)
    assert statuses(msg) == ["schema_violation"]
    msg = read(BLOCK + invoke("nope") + BLOCK_END, tools=TOOLS)
    assert statuses(msg) == ["unknown_tool"]


@pytest.mark.parametrize("tail", ["", "\n", BLOCK_END])
def test_the_block_closer_is_optional_at_the_end(tail: str) -> None:
    msg = read(BLOCK + invoke("g", el("k", "v")) + tail)
    assert named_calls(msg) == [("g", {"k": "v"})] and msg.rejected == []


@pytest.mark.parametrize("cut", [f'{NS}<invoke name="f">', f'{NS}<invoke name="f">{NS}<k>va', f"{NS}<inv"])
def test_a_call_cut_off_is_truncated_and_earlier_calls_stand(cut: str) -> None:
    msg = read(BLOCK + invoke("g") + cut)
    assert named_calls(msg) == [("g", {})] and statuses(msg) == ["truncated"]


def test_reasoning_and_render_reads_back() -> None:
    message = Message(content="Ordering.", reasoning="r", tool_calls=[ToolCall("a", "create_order", {
        "user_id": 7, "items": [{"sku": "s", "qty": 1}], "shipping": {"city": " Paris "}}, "")])
    parsed = parse(streamparse.render(message, FMT), FMT, tools=TOOLS)
    assert (parsed.reasoning, parsed.content) == ("r", "Ordering.")
    assert named_calls(parsed) == [("create_order", {"user_id": 7, "items": [{"sku": "s", "qty": 1}],
                                                     "shipping": {"city": " Paris "}})]
    assert streamparse.detect_format(f"{{{{ '{NS}<tool_call>' }}}}{NS}<invoke name=") == FMT


def test_progressive_mode_names_a_call_at_its_invoke_tag_and_sends_its_arguments_at_its_end() -> None:
    parser = streamparse.StreamParser(FMT, emit_calls="progressive")
    assert [d for d in parser.feed(BLOCK + f'{NS}<invoke name="g"') if d.tool_calls] == []
    started = [d.tool_calls[0] for d in parser.feed(">" + f"{NS}<k>v") if d.tool_calls]
    assert [(c.name, c.arguments) for c in started] == [("g", "")]
    assert [d for d in parser.feed(f"{NS}</k>") if d.tool_calls] == []  # a repeated key could still follow
    ended = [d.tool_calls[0] for d in parser.feed(f"{NS}</invoke>") if d.tool_calls]
    assert [c.arguments for c in ended] == ['{"k": "v"}']
