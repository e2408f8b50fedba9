"""The proxy's stream path piece by piece: the chunked coding undone however the bytes are cut, the
upstream's events read however its reads fall, and answer chunks written byte for byte as
`json.dumps` writes them. The end-to-end promises (the real process, the SDK) are in test_server.py."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamparse.openai import _ChunkMaker
from streamparse.options import Options
from streamparse.serve.http import HttpClient, HttpError, _Chunked
from streamparse.serve.sse import ChunkWriter
from streamparse.serve.upstream import UpstreamEvents, UpstreamStreamError, joined

STREAMS = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
VLLM = [json.loads(line) for line in (STREAMS / "vllm_v1_completions.jsonl").read_text().splitlines()]
SSE = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in VLLM) + b"data: [DONE]\n\n"


def cut(data: bytes, reads: st.DataObject) -> list[bytes]:
    """`data` as the reads of a socket might bring it: cut at a few drawn places, or byte by byte."""
    if reads.draw(st.booleans()):
        return [data[i:i + 1] for i in range(len(data))]
    points = sorted(reads.draw(st.sets(st.integers(1, max(1, len(data) - 1)), max_size=40)))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def chunked(payload: bytes, sizes: list[int]) -> bytes:
    """`payload` in the chunked coding, cut into chunks of `sizes` (cycled), with a chunk extension
    and a trailer, as a server may send it."""
    out, start, i = [], 0, 0
    while start < len(payload):
        piece = payload[start:start + sizes[i % len(sizes)]]
        out.append(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        start, i = start + len(piece), i + 1
    return b"".join(out) + b"0\r\nX-Trailer: yes\r\n\r\n"


@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=5), reads=st.data())
def test_the_chunked_coding_is_undone_however_the_reads_fall(sizes: list[int], reads: st.DataObject) -> None:
    wire = chunked(SSE, sizes)
    decoder = _Chunked()
    cuts = cut(wire, reads)
    assert b"".join(decoder.feed(piece) for piece in cuts) == SSE
    assert decoder.done


@pytest.mark.parametrize(("wire", "words"), [
    (b"zz\r\nabc\r\n", "bad chunk size"),
    (b"-5\r\nabcde\r\n", "bad chunk size"),
    (b"+5\r\nabcde\r\n", "bad chunk size"),
    (b"0x5\r\nabcde\r\n", "bad chunk size"),
    (b"5_0\r\n", "bad chunk size"),
    (b"\r\n", "bad chunk size"),
    (b"1" * 17 + b"\r\n", "bad chunk size"),
    (b"3\r\nabcdef\r\n", "longer than its size"),
    (b"1" * 2000, "never ends"),
])
def test_a_broken_chunked_coding_is_an_error(wire: bytes, words: str) -> None:
    with pytest.raises(HttpError, match=words):
        _Chunked().feed(wire)


@given(reads=st.data())
def test_upstream_events_are_the_same_however_the_reads_fall(reads: st.DataObject) -> None:
    events = UpstreamEvents(1, 1 << 20)
    got = [chunk for piece in cut(SSE.replace(b"\n", b"\r\n"), reads) for chunk in events.feed(piece)]
    assert got == VLLM
    assert events.done
    events.end()


def folded(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client assembles from answer chunks: content, reasoning, calls, finish reasons."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "calls": [], "finish": []}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            out["content"] += delta.get("content") or ""
            out["reasoning"] += delta.get("reasoning_content") or ""
            out["calls"] += delta.get("tool_calls") or []
            out["finish"] += [choice["finish_reason"]] if choice["finish_reason"] else []
    return out


@given(reads=st.data())
def test_joining_what_one_read_brought_answers_the_same(reads: st.DataObject) -> None:
    """Text-only chunks of one read become one (fewer parser feeds, fewer events); the client
    assembles the same answer, and a finish reason or usage is never folded into text."""
    answers = []
    for join in (False, True):
        events = UpstreamEvents(1, 1 << 20)
        maker = _ChunkMaker(Options("hermes", id_factory=lambda ordinal: f"call_{ordinal}"), "m", "x", "both")
        chunks = list(maker.start(0))
        for piece in cut(SSE, reads) if join else [SSE]:
            read = events.feed(piece)
            for chunk in joined(read) if join else read:
                chunks += maker.read(chunk)
        answers.append(folded(chunks + list(maker.end())))
    assert answers[0] == answers[1]
    assert answers[0]["finish"] == ["tool_calls"] or answers[0]["finish"] == ["stop"]
    whole = UpstreamEvents(1, 1 << 20).feed(SSE)
    assert len(joined(whole)) < len(whole)
    assert [chunk for chunk in joined(whole) if chunk.get("usage") or chunk["choices"][0].get("finish_reason")] == [
        chunk for chunk in whole if chunk.get("usage") or chunk["choices"][0].get("finish_reason")]


def test_chunks_before_a_bad_event_are_given_then_the_error() -> None:
    events = UpstreamEvents(1, 1 << 20)
    good = b"data: " + json.dumps(VLLM[0]).encode() + b"\n\n"
    assert events.feed(good + b"data: {oops\n\n" + good) == [VLLM[0]]
    with pytest.raises(UpstreamStreamError, match="cannot be read"):
        events.check()


def test_a_stream_without_done_is_an_error() -> None:
    events = UpstreamEvents(1, 1 << 20)
    assert events.feed(SSE[:SSE.index(b"data: [DONE]")]) == VLLM
    with pytest.raises(UpstreamStreamError, match="ended without"):
        events.end()


def answer_chunks(texts: list[str], logprobs: bool) -> list[dict[str, Any]]:
    """What the proxy's chunk maker makes of a hermes stream of `texts` (reasoning, content, a call)."""
    maker = _ChunkMaker(Options("hermes"), "qwen/\"model\"", None, "both")
    out = list(maker.start(0))
    for text in texts:
        choice = {"index": 0, "text": text, "finish_reason": None,
                  "logprobs": {"tokens": [text], "token_logprobs": [-0.5], "top_logprobs": [{text: -0.5}]}
                  if logprobs else None}
        out += maker.read({"choices": [choice]})
    out += maker.read({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})
    out += maker.read({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})
    return out + list(maker.end())


TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


@given(texts=st.lists(TEXT | st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>",
                                              '{"name": "f", "arguments": {"a": "\\u00e9\\n"}}']), max_size=12),
       logprobs=st.booleans())
def test_chunks_are_written_as_json_dumps_writes_them(texts: list[str], logprobs: bool) -> None:
    chunks = answer_chunks(texts, logprobs)
    writer = ChunkWriter(chunks[0]["id"], chunks[0]["created"], chunks[0]["model"])
    for chunk in chunks:
        assert writer.write(chunk) == b"data: " + json.dumps(
            chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


CALL = ["<think>\nhm\n</think>\n\nSure.\n<tool_call>\n", '{"name": "f", "arguments": {"a": "\\u00e9"}}',
        "\n</tool_call>"]


@pytest.mark.parametrize("emit", ["validated", "progressive"])
def test_a_call_is_written_as_json_dumps_writes_it(emit: str) -> None:
    maker = _ChunkMaker(Options("hermes", emit_calls=emit), "m", None, "reasoning_content")
    chunks = list(maker.start(0))
    for text in CALL:
        chunks += maker.read({"choices": [{"index": 0, "text": text}]})
    chunks += maker.end()
    assert any("tool_calls" in chunk["choices"][0]["delta"] for chunk in chunks if chunk["choices"])
    writer = ChunkWriter(chunks[0]["id"], chunks[0]["created"], chunks[0]["model"])
    for chunk in chunks:
        assert writer.write(chunk) == b"data: " + json.dumps(
            chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def test_a_chunk_of_another_answer_is_written_whole() -> None:
    chunk = answer_chunks(["hi"], False)[1]
    writer = ChunkWriter("chatcmpl-other", chunk["created"], chunk["model"])
    assert json.loads(writer.write(chunk)[6:]) == chunk


# -- the upstream client against a real socket ---------------------------------------------------------------

async def _answering(answers: list[bytes | tuple[bytes, ...]], close_after: bool) -> tuple[asyncio.Server, list[bytes]]:
    """A TCP server on 127.0.0.1 giving `answers` in turn, one per request read (its head and body);
    with `close_after` it drops each connection after answering, as a keep-alive that expired; an
    empty answer closes the connection without one; a tuple is sent part by part. The
    list it returns gets each request, and `b"connection"` for each connection opened."""
    requests: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(b"connection")
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                requests.append(head + await reader.readexactly(length))
                answer = answers[min(len(requests) - requests.count(b"connection"), len(answers)) - 1]
                if not answer:  # read the request, answer nothing, close: a kept connection gone stale
                    break
                for part in (answer,) if isinstance(answer, bytes) else answer:  # a tuple: its parts 0.1 s apart
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0 if isinstance(answer, bytes) else 0.1)
                if close_after:
                    break
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0), requests


CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
SIZED = b"HTTP/1.1 404 Not Found\r\nContent-Length: 7\r\n\r\nmissing"


@pytest.mark.parametrize("close_after", [False, True])
def test_the_client_keeps_connections_and_replaces_one_the_upstream_closed(close_after: bool) -> None:
    async def run() -> tuple[list[tuple[int, bytes]], list[bytes]]:
        server, requests = await _answering([CHUNKED, SIZED, CHUNKED], close_after)
        port = server.sockets[0].getsockname()[1]
        client = HttpClient(f"http://127.0.0.1:{port}/v1", timeout=5, headers={"Authorization": "Bearer k"})
        got = []
        for _ in range(3):
            response = await client.post("completions", b'{"a": 1}')
            got.append((response.status_code, await response.read()))
            await response.aclose()
            await asyncio.sleep(0.05)  # a closed connection's end reaches the client before the next request
        await client.aclose()
        server.close()
        await server.wait_closed()
        return got, requests

    got, requests = asyncio.run(run())
    assert got == [(200, b"hello world"), (404, b"missing"), (200, b"hello world")]
    posts = [request for request in requests if request != b"connection"]
    assert len(posts) == 3 and all(
        request.startswith(b"POST /v1/completions HTTP/1.1\r\n") and b"Authorization: Bearer k\r\n" in request
        and request.endswith(b'\r\n\r\n{"a": 1}') for request in posts)
    assert requests.count(b"connection") == (3 if close_after else 1)  # kept, or replaced when dropped


def test_a_request_on_a_kept_connection_that_gets_no_answer_is_sent_again_on_a_new_one() -> None:
    async def run() -> tuple[list[tuple[int, bytes]], list[bytes]]:
        server, requests = await _answering([CHUNKED, b"", SIZED], close_after=False)
        client = HttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", timeout=5)
        got = []
        for _ in range(2):
            response = await client.post("completions", b"{}")
            got.append((response.status_code, await response.read()))
            await response.aclose()
        await client.aclose()
        server.close()
        return got, requests

    got, requests = asyncio.run(run())
    assert got == [(200, b"hello world"), (404, b"missing")]
    assert requests.count(b"connection") == 2 and len(requests) == 5  # 3 requests: the second sent twice


def test_a_body_finished_early_is_read_to_its_end_in_the_background_and_its_connection_kept() -> None:
    """After a stream's [DONE] the body's end marker may come in a later read: `finish` leaves it to
    a background read, so the answer is not held up and the next request reuses the connection."""
    late_end = (CHUNKED[:CHUNKED.index(b"0\r\n")], b"0\r\n\r\n")

    async def run() -> tuple[list[bytes], list[bytes], float]:
        server, requests = await _answering([late_end, SIZED], close_after=False)
        client = HttpClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", timeout=5)
        response = await client.post("completions", b"{}")
        bodies = []
        async for data in response.pieces():
            bodies.append(data)
            if b"world" in b"".join(bodies):
                break
        start = time.monotonic()
        response.finish()
        await response.aclose()
        took = time.monotonic() - start
        await asyncio.sleep(0.3)
        second = await client.post("completions", b"{}")
        bodies.append(await second.read())
        await second.aclose()
        await client.aclose()
        server.close()
        return bodies, requests, took

    bodies, requests, took = asyncio.run(run())
    assert b"".join(bodies) == b"hello worldmissing"
    assert took < 0.05  # finish and aclose did not wait for the end marker
    assert requests.count(b"connection") == 1


def test_an_upstream_that_closes_mid_answer_or_goes_silent_is_an_http_error() -> None:
    async def run(answer: bytes, timeout: float) -> str:
        server, _ = await _answering([answer], close_after=answer.endswith(b"hel"))
        port = server.sockets[0].getsockname()[1]
        client = HttpClient(f"http://127.0.0.1:{port}", timeout=timeout)
        try:
            response = await client.post("/completions", b"{}")
            await response.read()
        except HttpError as error:
            return error.kind
        finally:
            await client.aclose()
            server.close()
        return "no error"

    assert asyncio.run(run(CHUNKED[:CHUNKED.index(b"lo")], 5)) == "RemoteProtocolError"
    assert asyncio.run(run(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhel", 0.3)) in ("RemoteProtocolError",
                                                                                       "ReadTimeout")
    assert asyncio.run(run(CHUNKED[:40], 0.3)) == "ReadTimeout"


@pytest.mark.parametrize("head", [b"HTTP/1.1 \xb2\xb2\xb2 OK", b"HTTP/1.1 2x0 OK", b"HTTP/2 200", b"garbage"])
def test_an_answer_head_without_an_http1_status_is_a_protocol_error(head: bytes) -> None:
    from streamparse.serve.http import _head

    with pytest.raises(HttpError, match="not an HTTP/1 status"):
        _head(head + b"\r\ncontent-type: text/plain")
