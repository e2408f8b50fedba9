"""The public API: entry points, inputs, ids, result shapes, and errors for misuse."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import ids

import streamparse
from streamparse import Delta, StreamParser, parse
from streamparse.engine import regions, settle
from streamparse.spec import openai_id

CALL = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'


def test_formats_lists_names_and_aliases() -> None:
    names = streamparse.formats()
    assert {"hermes", "qwen2_5", "qwen3", "hermes2_pro"} <= set(names)


def test_an_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown format 'gpt9'.*hermes"):
        StreamParser("gpt9")


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"emit_calls": "sometimes"}, ValueError, "emit_calls must be one of"),
    ({"tool_calls_in_reasoning": "maybe"}, ValueError, "tool_calls_in_reasoning"),
    ({"tools": {"name": "f"}}, TypeError, "tools must be a list"),
    ({"tools": [{"parameters": {}}]}, ValueError, "tool #0: a tool needs a non-empty string 'name'"),
    ({"tools": [{"name": "f", "parameters": {"type": "nonsense"}}]}, ValueError,
     "tool 'f': 'parameters' is not a valid JSON Schema"),
    ({"tools": [{"name": "f"}, {"name": "f"}]}, ValueError, "defined twice"),
])
def test_misuse_raises_a_clear_error(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        StreamParser(**kwargs)  # type: ignore[arg-type]


def test_feeding_after_close_and_reading_message_early_are_errors() -> None:
    parser = StreamParser()
    with pytest.raises(ValueError, match="after close"):
        _ = parser.message
    parser.close()
    with pytest.raises(ValueError, match="feed\\(\\) after close"):
        parser.feed("x")
    with pytest.raises(TypeError, match=r"feed\(\) takes str, bytes, a streamparse.Token"):
        StreamParser().feed(3)  # type: ignore[arg-type]


def test_stream_and_parse_agree_and_stream_rejects_a_plain_string() -> None:
    deltas = list(streamparse.stream(["Hel", "lo", CALL[:9], CALL[9:]], id_factory=ids))
    assert "".join(d.content for d in deltas) == "Hello"
    assert parse("Hello" + CALL, id_factory=ids).tool_calls[0].id == "call_0"
    with pytest.raises(TypeError, match="iterable of chunks"):
        list(streamparse.stream("Hello"))


def test_astream_yields_the_same_deltas() -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        for piece in ["<think>r</think>", "Hi", CALL]:
            yield piece

    async def collect() -> list[Delta]:
        return [d async for d in streamparse.astream(chunks(), id_factory=ids)]

    deltas = asyncio.run(collect())
    assert deltas == list(streamparse.stream(["<think>r</think>", "Hi", CALL], id_factory=ids))


def test_bytes_are_decoded_incrementally_and_bad_bytes_become_replacement_characters() -> None:
    text = "Zoë 🚀"
    raw = text.encode()
    parser = StreamParser()
    out = [d for i in range(len(raw)) for d in parser.feed(raw[i:i + 1])] + parser.close()
    assert "".join(d.content for d in out) == text
    assert parse(b"ok \xff\xfe end").content == "ok \ufffd\ufffd end"


def test_default_ids_are_openai_shaped_and_unique() -> None:
    msg = parse(CALL * 3)
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", c.id) for c in msg.tool_calls)
    assert len({c.id for c in msg.tool_calls}) == 3


def test_default_ids_drawn_in_batches_stay_unique_across_threads_and_a_forked_child() -> None:
    # `spec.random_id` reads the symbols of many ids at once: each is handed out once, in any thread,
    # and a forked child draws its own instead of the ones its parent still holds.
    with ThreadPoolExecutor(4) as pool:
        drawn = list(pool.map(openai_id, range(2000)))
    assert len(set(drawn)) == len(drawn) and all(re.fullmatch(r"call_[A-Za-z0-9]{24}", one) for one in drawn)
    openai_id(0)  # the batch now holds ids the parent has not given out
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child)
        os.write(write, "".join(openai_id(k) for k in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = pipe.read()
    ours = "".join(openai_id(k) for k in range(3))
    assert len(theirs) == len(ours) == 3 * 29 and theirs != ours


def test_id_factory_makes_ids_deterministic_and_a_model_id_is_kept_where_the_format_has_ids() -> None:
    nemo = '[TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}, "id": "mine12345"}]'
    assert [c.id for c in parse(nemo, "mistral", id_factory=ids).tool_calls] == ["call_0", "mine12345"]
    # Hermes' wire format has no ids: an "id" member is an extra member, so progressive streaming (which
    # sends the id with the name, before any later member) and parse() agree.
    msg = parse(CALL + '<tool_call>{"name": "g", "arguments": {}, "id": "mine"}</tool_call>', id_factory=ids)
    assert [c.id for c in msg.tool_calls] == ["call_0", "call_1"]


def test_to_openai_shapes() -> None:
    msg = parse("<think>r</think>Hi" + CALL, id_factory=ids)
    assert msg.to_openai() == {
        "role": "assistant", "content": "Hi", "reasoning_content": "r",
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    assert parse("").to_openai() == {"role": "assistant", "content": None, "reasoning_content": None}
    delta = next(iter(streamparse.stream([CALL], id_factory=ids)))
    assert delta.to_openai() == {"tool_calls": [{"index": 0, "id": "call_0", "type": "function",
                                                 "function": {"name": "f", "arguments": '{"a": 1}'}}]}


def test_empty_output_is_an_empty_message() -> None:
    assert parse("") == streamparse.Message()
    assert parse(" \n ") == streamparse.Message()


def test_render_writes_what_parse_reads() -> None:
    msg = parse("<think>r</think>Hi" + CALL, id_factory=ids)
    assert parse(streamparse.render(msg, "hermes"), id_factory=ids) == msg
    with pytest.raises(TypeError, match="Message"):
        streamparse.render("text", "hermes")  # type: ignore[arg-type]


def test_the_testing_module_says_how_to_get_hypothesis_when_missing() -> None:
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "try:\n    import streamparse.testing\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'streamparse[test]'" in out


def test_parse_makes_no_deltas_and_gives_the_streamed_message(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nobody reads the deltas of parse()'s one feed: none are made; the message is the stream's.
    text = "<think>r</think>Hi " + CALL + " and " + CALL
    streamed = StreamParser()
    deltas = [*streamed.feed(text), *streamed.close()]
    assert any(delta.tool_calls for delta in deltas) and any(delta.content for delta in deltas)
    made: list[object] = []

    def counted(*args: object, **named: object) -> Delta:
        made.append(args)
        return Delta(*args, **named)  # type: ignore[arg-type]
    monkeypatch.setattr(regions, "Delta", counted)
    monkeypatch.setattr(settle, "Delta", counted)
    message = parse(text, id_factory=ids)
    assert made == []
    assert (message.content, message.reasoning, [(c.name, c.arguments_json) for c in message.tool_calls]) == (
        streamed.message.content, streamed.message.reasoning,
        [(c.name, c.arguments_json) for c in streamed.message.tool_calls])
    StreamParser().feed(text)
    assert made  # a stream still makes them
