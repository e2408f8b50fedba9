"""OpenAI-compatible adapters over recorded raw-completion streams (llama.cpp, vLLM, OpenAI SDK)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import FIXTURES, ids

import streamparse
from streamparse.openai import chat_chunks, chat_completion, chat_message

STREAMS = FIXTURES / "streams"
TEXT = (STREAMS / "output.txt").read_text()


def recorded(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (STREAMS / f"{name}.jsonl").read_text().splitlines()]


def sdk_objects(rows: list[dict[str, Any]]) -> list[Any]:
    """The same chunks as OpenAI SDK objects (attribute access, not dicts)."""
    return [SimpleNamespace(choices=[SimpleNamespace(**c) for c in row["choices"]]) for row in rows]


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What an OpenAI client library builds from chat chunks."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        if not chunk["choices"]:
            continue
        choice = chunk["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning_content") or ""
        for call in delta.get("tool_calls", []):
            slot = calls.setdefault(call["index"], {"id": call.get("id"), "name": "", "arguments": ""})
            slot["name"] += call["function"].get("name") or ""
            slot["arguments"] += call["function"]["arguments"]
        finish = choice["finish_reason"] or finish
    return {"content": content, "reasoning": reasoning, "calls": [calls[i] for i in sorted(calls)], "finish": finish}


EXPECTED = {
    "content": "Let me check.",
    "reasoning": "The user asks for Paris weather.",
    "calls": [{"id": "call_0", "name": "get_weather", "arguments": '{"location": "Paris, France", "unit": "celsius"}'}],
    "finish": "tool_calls",
}


@pytest.mark.parametrize("name", ["llamacpp_v1_completions", "llamacpp_native_completion", "vllm_v1_completions"])
@pytest.mark.parametrize("emit", ["validated", "progressive"])
def test_recorded_streams_become_openai_chat_chunks(name: str, emit: str) -> None:
    chunks = list(chat_chunks(recorded(name), "qwen3", model="qwen3", emit_calls=emit, id_factory=ids))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    if name != "llamacpp_native_completion":  # usage on llama.cpp's last chunk, or vLLM's own chunk: sent last
        usage = chunks.pop()
        assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == 40
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    assert len({c["id"] for c in chunks}) == 1 and all(c["model"] == "qwen3" for c in chunks)
    assert assemble(chunks) == EXPECTED


def test_openai_sdk_objects_and_an_async_stream() -> None:
    rows = sdk_objects(recorded("vllm_v1_completions"))
    assert assemble(list(chat_chunks(rows, "qwen3", id_factory=ids))) == EXPECTED

    async def source():  # type: ignore[no-untyped-def]
        for row in rows:
            yield row

    async def collect() -> list[dict[str, Any]]:
        return [c async for c in chat_chunks(source(), "qwen3", id_factory=ids)]

    assert assemble(asyncio.run(collect())) == EXPECTED


def test_plain_strings_and_the_upstream_finish_reason_without_calls() -> None:
    chunks = list(chat_chunks(["Hel", "lo"], "hermes"))
    assert assemble(chunks)["content"] == "Hello"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    rows = [{"choices": [{"text": "cut", "finish_reason": "length"}]}]
    assert list(chat_chunks(rows, "hermes"))[-1]["choices"][0]["finish_reason"] == "length"


def test_prompt_decides_forced_open_reasoning() -> None:
    chunks = list(chat_chunks(["I think\n</think>\n\nAnswer"], "qwen3", prompt="<|im_start|>assistant\n<think>\n"))
    assert assemble(chunks)["reasoning"] == "I think"


def test_chat_message_for_a_finished_completion() -> None:
    message = chat_message(TEXT, "qwen3", id_factory=ids)
    assert message == streamparse.parse(TEXT, "qwen3", id_factory=ids).to_openai()
    completion = {"choices": [{"text": TEXT, "finish_reason": "stop"}]}
    assert chat_message(completion, "qwen3", id_factory=ids) == message


def test_misuse_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="chat_message"):
        chat_chunks("a finished text", "hermes")
    with pytest.raises(TypeError, match="cannot read text"):
        list(chat_chunks([42], "hermes"))


def test_n_greater_than_one_keeps_the_choices_apart() -> None:
    rows = [{"choices": [{"index": 0, "text": "Hello"}, {"index": 1, "text": "Bonjour"}]},
            {"choices": [{"index": 1, "text": " monde"}]},
            {"choices": [{"index": 0, "text": " world", "finish_reason": "stop"}]},
            {"choices": [{"index": 1, "text": "", "finish_reason": "length"}]}]
    chunks = list(chat_chunks(rows, "hermes"))
    by_index: dict[int, list[dict[str, Any]]] = {}
    for chunk in chunks:
        (choice,) = chunk["choices"]
        by_index.setdefault(choice["index"], []).append({**chunk, "choices": [{**choice, "index": 0}]})
    assert assemble(by_index[0])["content"] == "Hello world" and assemble(by_index[0])["finish"] == "stop"
    assert assemble(by_index[1])["content"] == "Bonjour monde" and assemble(by_index[1])["finish"] == "length"
    # choice 0 finished before choice 1 did: its finish chunk is not held until the end
    finishes = [c["choices"][0]["index"] for c in chunks if c["choices"][0]["finish_reason"]]
    assert finishes == [0, 1]


def test_logprobs_ride_with_their_choice_in_the_chat_shape() -> None:
    rows = [{"choices": [{"index": 0, "text": "Hi", "logprobs": {"tokens": ["Hi"], "token_logprobs": [-0.5],
                                                                 "top_logprobs": [{"Hi": -0.5, "Hey": -1.0}]}}]},
            {"choices": [{"index": 0, "text": "!", "finish_reason": "stop",
                          "logprobs": {"tokens": ["!"], "token_logprobs": [-0.1], "top_logprobs": None}}]}]
    chunks = list(chat_chunks(rows, "hermes"))
    tokens = [t for c in chunks for t in ((c["choices"][0].get("logprobs") or {}).get("content") or [])]
    assert [(t["token"], t["logprob"]) for t in tokens] == [("Hi", -0.5), ("!", -0.1)]
    assert tokens[0]["top_logprobs"][1] == {"token": "Hey", "logprob": -1.0, "bytes": [72, 101, 121]}
    completion = chat_completion({"choices": [{"index": 0, "text": "Hi", "logprobs": rows[0]["choices"][0]["logprobs"],
                                               "finish_reason": "stop"}], "usage": {"total_tokens": 3}}, "hermes")
    assert completion["choices"][0]["logprobs"]["content"][0]["token"] == "Hi"
    assert completion["usage"] == {"total_tokens": 3} and completion["object"] == "chat.completion"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "both"])
def test_reasoning_field(field: str) -> None:
    keys = {"both": {"reasoning_content", "reasoning"}}.get(field, {field})
    chunks = list(chat_chunks(["<think>Hm</think>Yes"], "qwen3", reasoning_field=field))  # type: ignore[call-overload]
    reasoning_chunks = [c["choices"][0]["delta"] for c in chunks if "Hm" in str(c)]
    assert reasoning_chunks == [dict.fromkeys(keys, "Hm")]
    message = chat_message("<think>Hm</think>Yes", "qwen3", reasoning_field=field)  # type: ignore[arg-type]
    assert {k for k in message if k.startswith("reasoning")} == keys
    with pytest.raises(ValueError, match="reasoning_field"):
        chat_message("x", "qwen3", reasoning_field="thoughts")  # type: ignore[arg-type]


def test_rejected_call_to_openai() -> None:
    tools = [{"name": "f", "parameters": {"type": "object"}}]
    (rejected,) = streamparse.parse('<tool_call>{"name": "g", "arguments": {}}</tool_call>', "hermes", tools).rejected
    assert rejected.to_openai() == {"status": "unknown_tool", "errors": rejected.errors, "raw": rejected.raw,
                                    "name": "g"}
    json.dumps(rejected.to_openai())
