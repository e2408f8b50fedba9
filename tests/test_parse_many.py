"""`parse_many` is `[parse(text) for text in texts]`, in order, in this process or on worker processes."""

from __future__ import annotations

import pickle

import pytest
from conftest import ids
from corpus import case_rows, fixture_rows, groups

import streamparse
from streamparse.many import CHUNK_SIZE, iter_parse_many

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
