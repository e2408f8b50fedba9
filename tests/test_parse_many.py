"""`parse_many` is `[parse(text) for text in texts]`, in order, in this process or on worker processes."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest
from conftest import ROOT, SHARED, ids
from corpus import case_rows, fixture_rows, groups
from hypothesis import given
from hypothesis import strategies as st

import streamparse
from streamparse.batch.many import (
    SHORTEST_PIECE,
    ReceivedToolCall,
    _piece,
    compact_fields,
    iter_parse_many,
    message_from_compact,
    parse_compact,
)
from streamparse.batch.workers import CHUNK_SIZE, every_core, ordered_map
from streamparse.options import make_options
from streamparse.types import ToolCall

ALL_ROWS = fixture_rows() + case_rows()
GROUPS = groups(ALL_ROWS)


@pytest.mark.parametrize("key", list(GROUPS), ids=lambda key: f"{key[0]}-{hash(key[1]) & 0xffff:04x}-{key[2]}")
@pytest.mark.parametrize("workers", [1, 2])
def test_every_row_is_exactly_its_parse(key: tuple[str, str, bool], workers: int) -> None:
    rows = GROUPS[key]
    fmt, tools, forced = rows[0].format, rows[0].tools, rows[0].thinking_forced_open
    expected = [streamparse.parse(r.text, fmt, tools=tools, thinking_forced_open=forced, id_factory=ids) for r in rows]
    got = streamparse.parse_many([r.text for r in rows], workers=workers, format=fmt, tools=tools,
                                 thinking_forced_open=forced, id_factory=ids)
    assert got == expected


@pytest.mark.parametrize("key", list(GROUPS)[::7], ids=lambda key: f"{key[0]}-{key[2]}")
def test_rows_sent_back_by_workers_in_small_chunks_are_exactly_their_parse(key: tuple[str, str, bool]) -> None:
    rows = GROUPS[key] * 3
    fmt, tools, forced = rows[0].format, rows[0].tools, rows[0].thinking_forced_open
    options = make_options(fmt, tools, forced, {"id_factory": ids})
    texts = [r.text for r in rows]
    sent = ordered_map(parse_compact, texts, options, 2, chunk_size=2)
    got = [message_from_compact(text, fields) for text, fields in zip(texts, sent, strict=True)]
    assert got == [streamparse.parse(r.text, fmt, tools=tools, thinking_forced_open=forced, id_factory=ids)
                   for r in rows]


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_message_survives_its_compact_form_with_types_key_order_and_raw_text(as_bytes: bool) -> None:
    for row in ALL_ROWS:
        text = row.text.encode() if as_bytes else row.text
        message = streamparse.parse(text, row.format, tools=row.tools, thinking_forced_open=row.thinking_forced_open)
        back = message_from_compact(text, compact_fields(message, text))
        assert back == message and message == back
        assert [c.raw for c in back.tool_calls] == [c.raw for c in message.tool_calls]
        assert [r.raw for r in back.rejected] == [r.raw for r in message.rejected]
        for received, parsed in zip(back.tool_calls, message.tool_calls, strict=True):
            assert list(received.arguments) == list(parsed.arguments)
            assert json.dumps(received.arguments) == json.dumps(parsed.arguments)  # types too: 1 is not 1.0


def test_long_strings_of_a_text_are_sent_as_where_they_lie_not_as_text() -> None:
    text = "<think>\n" + "why " * 40 + "\n</think>\n\n" + "answer " * 40 + (
        '<tool_call>\n{"name": "f", "arguments": {"path": "' + "a" * 60 + '"}}\n</tool_call>')
    message = streamparse.parse(text)
    content, reasoning, calls, _rejected = compact_fields(message, text)
    assert isinstance(content, tuple) and isinstance(reasoning, tuple)
    (_id, name, arguments_json, raw, _arguments), = calls
    assert isinstance(arguments_json, tuple) and isinstance(raw, tuple) and name == "f"
    assert text[arguments_json[0]:arguments_json[1]] == message.tool_calls[0].arguments_json


@given(st.data())
def test_a_piece_is_where_the_value_first_lies_or_the_value_itself(data: st.DataObject) -> None:
    # a text of one head followed by short tails, so the head stands in many places where the value
    # does not: the head-then-compare search, its bound on misses and its fallback all get drawn
    head = data.draw(st.one_of(st.text("ab", min_size=SHORTEST_PIECE - 2, max_size=SHORTEST_PIECE + 2),
                               st.sampled_from(["a" * SHORTEST_PIECE, "ab" * (SHORTEST_PIECE // 2)])))
    tails = data.draw(st.lists(st.text("ab", max_size=3), max_size=24))
    text = "".join(head + tail for tail in tails)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    value = head + data.draw(st.one_of(st.sampled_from(tails) if tails else st.just(""), st.text("ab", max_size=8)))
    at = text.find(value, start, end)
    want = value if len(value) < SHORTEST_PIECE or at < 0 else (at, at + len(value))
    assert _piece(text, value, start, end) == want


HEAD = "h" * SHORTEST_PIECE


@pytest.mark.parametrize(("text", "value", "at"), [
    (HEAD + "b", HEAD + "b", 0),
    ("a" + HEAD + "b", HEAD + "b", 1),
    (HEAD + "hb", HEAD + "b", 1),  # the head again one place on, inside its first place
    ((HEAD + "x") * 4 + HEAD + "y", HEAD + "y", 4 * (SHORTEST_PIECE + 1)),  # after the last head miss
    ((HEAD + "x") * 9 + HEAD + "y", HEAD + "y", 9 * (SHORTEST_PIECE + 1)),  # found by the whole-value find
    ((HEAD + "x") * 9, HEAD + "y", None),
])
def test_a_piece_found_past_heads_that_do_not_go_on_as_the_value(text: str, value: str, at: int | None) -> None:
    assert _piece(text, value) == (value if at is None else (at, at + len(value)))


def test_a_call_sent_back_reads_like_a_parsed_one_and_pickles_as_one() -> None:
    text = '<tool_call>\n{"name": "f", "arguments": {"b": [1, 2.5, null], "a": {"x": "y"}}}\n</tool_call>'
    parsed = streamparse.parse(text, id_factory=ids).tool_calls[0]
    received = streamparse.parse_many([text] * (2 * CHUNK_SIZE), workers=2, id_factory=ids)[0].tool_calls[0]
    if every_core() > 1:
        assert isinstance(received, ReceivedToolCall)
    assert received.arguments == {"b": [1, 2.5, None], "a": {"x": "y"}} and received.arguments is received.arguments
    assert received == parsed and parsed == received and repr(received) == repr(parsed)
    assert type(pickle.loads(pickle.dumps(received))) is ToolCall
    assert pickle.loads(pickle.dumps(received)) == parsed
    assert dataclasses.replace(received, name="g") == dataclasses.replace(parsed, name="g")
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        received.colour  # type: ignore[attr-defined]  # noqa: B018


def _pid(options: object, item: object) -> int:
    return os.getpid()


def test_no_more_processes_than_cores_and_chunks_of_work() -> None:
    options = streamparse.Options()
    assert set(ordered_map(_pid, ["x"] * 3, options, 24)) == {os.getpid()}  # one chunk: this process
    pids = set(ordered_map(_pid, ["x"] * 400, options, 24, chunk_size=4))
    assert len(pids) <= every_core()
    if every_core() > 1:  # two chunks of work: two workers, not this process
        assert os.getpid() not in pids
        assert len(set(ordered_map(_pid, iter(["x"] * 3), options, 24, chunk_size=2)) - {os.getpid()}) >= 1
    assert streamparse.parse_many(["x"] * 3, workers=24) == [streamparse.parse("x")] * 3


def test_order_is_kept_across_many_chunks_on_two_workers() -> None:
    rows = [row for row in fixture_rows() if row.format == "hermes"]
    texts = [rows[i % len(rows)].text if i % 2 else f"row {i}" for i in range(CHUNK_SIZE * 5 + 3)]
    tools = rows[0].tools
    got = streamparse.parse_many(iter(texts), workers=2, tools=tools, id_factory=ids)  # any iterable
    assert got == [streamparse.parse(t, tools=tools, id_factory=ids) for t in texts]
    assert [m.content for m in got[::2]] == [f"row {i}" for i in range(0, len(texts), 2)]


def test_every_core_by_default_and_bytes_too() -> None:
    texts = [b"<think>\nhm\n</think>\n\nhi", "plain"] * (CHUNK_SIZE + 1)
    assert streamparse.parse_many(texts) == [streamparse.parse(t) for t in texts]
    assert streamparse.parse_many([]) == []
    assert list(iter_parse_many(["a", "b"], streamparse.Options(), workers=1)) == [streamparse.parse("a"),
                                                                                    streamparse.parse("b")]


def test_messages_pickle_so_workers_can_send_them_back() -> None:
    for row in fixture_rows():
        message = streamparse.parse(row.text, row.format, tools=row.tools)
        assert pickle.loads(pickle.dumps(message)) == message


def test_an_id_factory_workers_cannot_receive_is_a_clear_error_unless_in_process() -> None:
    def local_ids(ordinal: int) -> str:
        return f"local_{ordinal}"

    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    with pytest.raises(ValueError, match=r"id_factory .*module level.*workers=1"):
        streamparse.parse_many([text] * 3, workers=2, id_factory=local_ids)
    assert streamparse.parse_many([text], workers=1, id_factory=local_ids)[0].tool_calls[0].id == "local_0"


def test_misuse_raises_at_once_in_the_caller() -> None:
    with pytest.raises(ValueError, match="emit_calls"):
        streamparse.parse_many(["x"], workers=2, emit_calls="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown option 'colour'"):
        streamparse.parse_many(["x"], colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="unknown format"):
        streamparse.parse_many(["x"], format="gpt9")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            streamparse.parse_many(["x"], workers=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="iterable of texts"):
        streamparse.parse_many("one text")
    with pytest.raises(TypeError, match="takes the output as str"):
        streamparse.parse_many([42], workers=1)  # type: ignore[list-item]


def test_import_streamparse_leaves_the_batch_package_unloaded_until_parse_many_is_used() -> None:
    code = ("import sys, streamparse\n"
            "before = sorted(m for m in sys.modules if m.startswith('streamparse.batch'))\n"
            "streamparse.parse_many(['x'])\n"
            "print(before, 'streamparse.batch.many' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["[]", "True"]


def test_the_files_path_imports_the_flags_module_not_the_command() -> None:
    code = "import sys, streamparse.batch.files\nprint('streamparse.cli' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["False"]


def _echo(options: object, item: str) -> str:
    return item


def _fail_on(options: object, item: str) -> str:
    if item == "fail":
        raise ValueError(f"cannot take {item!r}")
    if item == "odd error":
        raise _Unpicklable("no pickle")
    if item == "exit":
        os._exit(3)
    return item


class _Unpicklable(Exception):
    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("not this one")


def test_chunks_larger_than_any_socket_buffer_go_both_ways_in_order() -> None:
    items = [f"{i:06d}" + "x" * 300_000 for i in range(120)]  # chunks of 40: 12 MB each way
    assert list(ordered_map(_echo, iter(items), streamparse.Options(), 2, chunk_size=40)) == items


@pytest.mark.skipif(every_core() < 2, reason="needs two cores for worker processes")
def test_an_error_in_a_worker_is_raised_here_with_the_worker_traceback_after_the_rows_before_it() -> None:
    got: list[str] = []
    with pytest.raises(ValueError, match="cannot take 'fail'") as raised:
        got.extend(ordered_map(_fail_on, ["a"] * 7 + ["fail"] + ["b"] * 8, streamparse.Options(), 2, chunk_size=2))
    assert got == ["a"] * 6  # the chunks before the failing one, in order
    assert "_fail_on" in str(raised.value.__cause__)
    with pytest.raises(RuntimeError, match="_Unpicklable: no pickle"):
        list(ordered_map(_fail_on, ["a"] * 4 + ["odd error"], streamparse.Options(), 2, chunk_size=2))
    assert multiprocessing.active_children() == []


@pytest.mark.skipif(every_core() < 2, reason="needs two cores for worker processes")
def test_a_worker_that_dies_is_a_broken_pool_not_a_hang() -> None:
    with pytest.raises(BrokenProcessPool, match="exit code 3"):
        list(ordered_map(_fail_on, ["a"] * 6 + ["exit"] + ["b"] * 20, streamparse.Options(), 2, chunk_size=2))
    assert multiprocessing.active_children() == []


@pytest.mark.skipif(every_core() < 2, reason="needs two cores for worker processes")
def test_a_caller_that_stops_reading_ends_the_workers() -> None:
    results = ordered_map(_echo, iter(["a"] * 5000), streamparse.Options(), 2, chunk_size=8)
    assert next(results) == "a" and len(multiprocessing.active_children()) == 2
    results.close()  # type: ignore[attr-defined]  # (a generator: closing it is what a break does)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_workers_started_by_spawn_or_forkserver_give_the_same_messages(method: str) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} on this OS")
    code = ("import multiprocessing, streamparse\n"
            "if __name__ == '__main__':\n"
            f"    multiprocessing.set_start_method({method!r})\n"
            "    texts = ['<think>\\nhm\\n</think>\\n\\nhi', 'plain ' * 20] * 300\n"
            "    print(streamparse.parse_many(texts, workers=2) == [streamparse.parse(t) for t in texts])\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True"], done.stderr


SPAWNED_FORMATS = """
import json, multiprocessing, pickle, sys
import streamparse

def read(message):
    return message.content, message.reasoning, [(c.name, c.arguments) for c in message.tool_calls], message.rejected

if __name__ == "__main__":
    multiprocessing.set_start_method("spawn")
    template, chat_template = sys.argv[1:3]
    imported = streamparse.format_from_response_template(json.load(open(template)), name="glm_imported")
    derived = streamparse.derive_format(open(chat_template, encoding="utf-8").read())
    texts = {imported: ["<think>r</think>hi<tool_call>f\\n<arg_key>a</arg_key>\\n"
                        "<arg_value>1</arg_value>\\n</tool_call>"],
             derived: ["hi\\n<tool_call>\\n<function=f>\\n<parameter=a>\\n1\\n"
                       "</parameter>\\n</function>\\n</tool_call>"]}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}}]
    for spec, batch in texts.items():
        print(pickle.loads(pickle.dumps(spec)) == spec, end=" ")
        many = streamparse.parse_many(batch * 400, workers=2, format=spec, tools=tools)
        print([read(m) for m in many] == [read(streamparse.parse(t, spec, tools=tools)) for t in batch * 400], end=" ")
        print(read(many[0])[2])
"""


def test_an_imported_and_a_derived_format_go_to_spawned_workers_unregistered(tmp_path: Path) -> None:
    """A format from a response_template or derived from a chat template pickles to an equal one (the derived
    one derived again from its template in the worker), so a spawn pool parses with it, not registered."""
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED_FORMATS)
    template = ROOT / "bench" / "templates" / "glm45.json"
    chat_template = SHARED / "templates" / "Qwen3-Coder-30B-A3B-Instruct.jinja"
    done = subprocess.run([sys.executable, str(script), str(template), str(chat_template)], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.splitlines() == ["True True [('f', {'a': 1})]"] * 2, done.stderr
