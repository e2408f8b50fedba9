"""What an operator of `streamparse serve` relies on, with the real server process, the real OpenAI SDK
and a real HTTP upstream (tests/upstream.py): the API key, the bounds on a request, request ids and the
log line, `/metrics` read by prometheus_client's own parser, and the SIGTERM drain."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
parser = pytest.importorskip("prometheus_client.parser")

from conftest import ROOT  # noqa: E402
from test_server import HERMES_TEMPLATE, HERMES_TOOLS, RECORDED_OUTPUT, TIMEOUT, Server  # noqa: E402
from upstream import Script, Upstream  # noqa: E402

import streamparse  # noqa: E402
from streamparse.serve.replay import bundled_output  # noqa: E402

KEY = "sk-test-0123456789abcdef"
ANSWER = "<think>\nok\n</think>\n\n"  # the Hermes template opens reasoning: an output closes it first


@pytest.fixture(scope="module")
def keyed(upstream: Upstream) -> Iterator[Server]:
    server = Server(upstream.url, HERMES_TEMPLATE, "--api-key", KEY, "--upstream-api-key", "upstream-secret")
    yield server
    server.stop()


def _chat(key: str, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": f"{key} hi"}], "stream": stream, **extra}


def _sdk(server: Server, api_key: str) -> Any:
    return openai.OpenAI(base_url=server.url, api_key=api_key, timeout=TIMEOUT, max_retries=0)


# --------------------------------------------------------------------------------------------
# The API key
# --------------------------------------------------------------------------------------------

def test_the_sdk_api_key_is_required_and_checked(keyed: Server, upstream: Upstream) -> None:
    key = upstream.script("keyed", Script([RECORDED_OUTPUT]))
    completion = _sdk(keyed, KEY).chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], tools=HERMES_TOOLS)
    expected = streamparse.parse(RECORDED_OUTPUT, "hermes", HERMES_TOOLS)
    assert [c.function.name for c in completion.choices[0].message.tool_calls] == [c.name for c in expected.tool_calls]
    assert upstream.authorization["keyed"] == "Bearer upstream-secret"  # --upstream-api-key goes upstream
    assert [model.id for model in _sdk(keyed, KEY).models.list()] == ["hermes"]
    with pytest.raises(openai.AuthenticationError) as refused:
        _sdk(keyed, KEY + "x").chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert refused.value.status_code == 401
    assert refused.value.body["code"] == "invalid_api_key"
    assert "not the one this server accepts" in refused.value.body["message"]
    with pytest.raises(openai.AuthenticationError):
        _sdk(keyed, KEY).with_options(api_key=KEY[:-1]).models.list()


@pytest.mark.parametrize(("headers", "says"), [
    ({}, "no API key"),
    ({"Authorization": f"Basic {KEY}"}, "must read 'Bearer KEY'"),
    ({"Authorization": "Bearer"}, "must read 'Bearer KEY'"),
    ({"Authorization": KEY}, "must read 'Bearer KEY'"),
    ({"Authorization": f"Bearer {KEY} extra"}, "not the one"),
    ({"Authorization": f"Bearer {KEY.upper()}"}, "not the one"),
    ({"X-Api-Key": KEY}, "no API key"),
    ({"api-key": KEY}, "no API key"),
    ({"Cookie": f"api_key={KEY}"}, "no API key"),
], ids=["missing", "basic", "bearer-alone", "no-scheme", "trailing", "case", "x-api-key",
        "api-key", "cookie"])
def test_a_missing_malformed_wrong_or_misplaced_key_is_a_401(keyed: Server, headers: dict[str, str],
                                                            says: str) -> None:
    for method, path in (("POST", "/chat/completions"), ("GET", "/models")):
        answer = httpx.request(method, keyed.url + path, headers=headers, json=_chat("[[none]]"), timeout=TIMEOUT)
        assert answer.status_code == 401, (method, path)
        assert answer.headers["www-authenticate"].startswith("Bearer")
        error = answer.json()["error"]
        assert says in error["message"] and error["type"] == "invalid_request_error"
        assert answer.headers["x-request-id"].startswith("req-")


def test_two_authorization_headers_are_refused(keyed: Server) -> None:
    headers = [("Authorization", f"Bearer {KEY}"), ("Authorization", f"Bearer {KEY}")]
    answer = httpx.get(keyed.url + "/models", headers=headers, timeout=TIMEOUT)
    assert answer.status_code == 401 and "not several" in answer.json()["error"]["message"]


def test_health_and_metrics_stay_open_with_a_key(keyed: Server) -> None:
    base = keyed.url.removesuffix("/v1")
    assert httpx.get(base + "/health", timeout=TIMEOUT).json() == {"status": "ok"}
    assert httpx.get(base + "/metrics", timeout=TIMEOUT).status_code == 200


def test_the_key_comes_from_the_environment(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPARSE_API_KEY", "from-env")
    server = Server(upstream.url, HERMES_TEMPLATE)
    try:
        assert httpx.get(server.url + "/models", timeout=TIMEOUT).status_code == 401
        assert [m.id for m in _sdk(server, "from-env").models.list()] == ["hermes"]
    finally:
        server.stop()


def test_an_empty_key_stops_serve_at_start(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPARSE_API_KEY", " ")
    with pytest.raises(RuntimeError, match="--api-key is empty"):
        Server(upstream.url, HERMES_TEMPLATE)


# --------------------------------------------------------------------------------------------
# Bounds
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bounded(upstream: Upstream) -> Iterator[Server]:
    server = Server(upstream.url, HERMES_TEMPLATE, "--max-body-bytes", "4096", "--max-messages", "3")
    yield server
    server.stop()


def _raw(server: Server, request: bytes, *, then: bytes = b"", timeout: float = TIMEOUT) -> bytes:
    """What the server answers on one connection to `request` (head and maybe body), `then` sent after
    the answer began (a client that goes on sending), read until the server closes or the answer ends."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        try:
            sock.sendall(request)
            if then:
                sock.sendall(then)
        except OSError:
            pass  # the server answered and closed while we were still sending: read what it said
        got = b""
        while True:
            try:
                data = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not data:
                break
            got += data
            if b"\r\n\r\n" in got and got.split(b"\r\n\r\n", 1)[1].rstrip().endswith(b"}"):
                break
        return got


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_too_many_messages_is_a_400_naming_messages(bounded: Server, upstream: Upstream) -> None:
    key = upstream.script("three", Script([ANSWER + "fine"]))
    messages = [{"role": "user", "content": f"{key} one"}, {"role": "assistant", "content": "two"},
                {"role": "user", "content": "three"}]
    answer = bounded.client().chat.completions.create(model="m", messages=messages)
    assert answer.choices[0].message.content == "fine"
    with pytest.raises(openai.BadRequestError) as refused:
        bounded.client().chat.completions.create(model="m", messages=[*messages, {"role": "user", "content": "4"}])
    assert refused.value.body["param"] == "messages"
    assert "4 messages, more than the 3" in refused.value.body["message"]


def test_a_body_over_the_bound_is_a_413(bounded: Server) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        bounded.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 5000}])
    assert refused.value.status_code == 413
    assert "larger than 4096 bytes" in refused.value.body["message"]
    assert "--max-body-bytes" in refused.value.body["message"]


def test_a_50_mb_body_is_a_413_at_the_default_bound(observed: tuple[Server, Path]) -> None:
    server, _ = observed
    with pytest.raises(openai.APIStatusError) as refused:
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * (50 << 20)}])
    assert refused.value.status_code == 413 and "larger than 8388608 bytes" in refused.value.body["message"]


def test_a_declared_length_over_the_bound_is_refused_before_the_body_is_sent(bounded: Server) -> None:
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000000\r\n\r\n")
    answer = _raw(bounded, head)  # not one byte of the ten gigabytes is sent
    assert _status(answer) == 413 and b"larger than 4096 bytes" in answer


def test_a_chunked_body_without_a_length_is_counted_as_it_arrives(bounded: Server) -> None:
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 1000
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20)) + b"0\r\n\r\n"
    answer = _raw(bounded, head + chunks)
    assert _status(answer) == 413 and b"larger than 4096 bytes" in answer
    small = json.dumps(_chat("[[none]]")).encode()
    fine = _raw(bounded, head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(small), small))
    assert _status(fine) == 400 and b"no script" in fine  # read whole, forwarded: the fake upstream refuses it


def test_a_content_length_that_lies_short_reads_only_that_many_bytes(bounded: Server) -> None:
    body = json.dumps(_chat("[[none]]", padding="y" * 20000)).encode()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 40\r\n\r\n")
    with socket.create_connection(("127.0.0.1", bounded.port), timeout=TIMEOUT) as sock:
        sock.sendall(head + body[:40])
        answer = _answer(sock)  # the first 40 bytes, cut mid-object, are the whole request
        assert _status(answer) == 400 and b"not JSON" in answer
        sock.sendall(body[40:])  # the rest reads as a next request, which is no HTTP at all
        assert _status(_answer(sock)) == 400
    assert httpx.get(f"http://127.0.0.1:{bounded.port}/health", timeout=TIMEOUT).status_code == 200


def _answer(sock: socket.socket) -> bytes:
    """One answer with a Content-Length read off `sock`, and nothing after it."""
    got = b""
    while b"\r\n\r\n" not in got or len(got) < _length(got):
        data = sock.recv(65536)
        if not data:
            break
        got += data
    return got


def _length(answer: bytes) -> int:
    head, _, _ = answer.partition(b"\r\n\r\n")
    found = re.search(rb"(?im)^content-length: *(\d+)", head)
    return len(head) + 4 + int(found.group(1)) if found else len(answer)


def test_a_body_that_ends_before_its_content_length_is_no_server_error(
        observed: tuple[Server, Path]) -> None:
    server, log = observed
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-Request-Id: short-body\r\nContent-Length: 4000\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        sock.sendall(head + b"[" * 1000)
        sock.shutdown(socket.SHUT_WR)  # the client is done sending, 3,000 bytes short
        while sock.recv(65536):
            pass
    deadline = time.monotonic() + 5
    while "request_id=short-body " not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    line = next(line for line in log.read_text().splitlines() if "request_id=short-body " in line)
    assert "status=400" in line and "unexpected" not in log.read_text()
    assert httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=TIMEOUT).status_code == 200


def test_a_content_length_that_is_not_a_number_is_a_400(bounded: Server) -> None:
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: lots\r\n\r\n{}")
    assert _status(_raw(bounded, head)) == 400


# --------------------------------------------------------------------------------------------
# Request ids, the log line, /metrics
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def observed(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    log = tmp_path_factory.mktemp("serve") / "stderr.log"
    with log.open("wb") as stderr:
        server = Server(upstream.url, HERMES_TEMPLATE, "--log-level", "info", stderr=stderr)
        yield server, log
        server.stop()


def _metrics(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=TIMEOUT).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in parser.text_string_to_metric_families(text) for sample in family.samples}


def _moved(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_move_as_requests_are_made(observed: tuple[Server, Path], upstream: Upstream) -> None:
    server, _ = observed
    streamed = upstream.script("m-stream", Script([RECORDED_OUTPUT]))
    whole = upstream.script("m-whole", Script([RECORDED_OUTPUT]))
    unknown_call = '<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>'
    unknown = upstream.script("m-unknown", Script([ANSWER + unknown_call]))
    failing = upstream.script("m-fail", Script(status=500, message="engine down"))
    before = _metrics(server)
    client = server.client()
    chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{streamed} a"}],
                                                 tools=HERMES_TOOLS, stream=True))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{whole} b"}], tools=HERMES_TOOLS)
    rejected = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{unknown} c"}],
                                              tools=HERMES_TOOLS)
    assert rejected.choices[0].message.tool_calls is None
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{failing} d"}])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[])
    after = _metrics(server)

    chat = "/v1/chat/completions"
    assert _moved(before, after, "streamparse_requests_total", path=chat, status="200") == 3
    assert _moved(before, after, "streamparse_requests_total", path=chat, status="400") == 1
    assert _moved(before, after, "streamparse_requests_total", path=chat, status="502") == 1
    assert _moved(before, after, "streamparse_requests_total", path="/metrics", status="200") == 1
    assert _moved(before, after, "streamparse_upstream_errors_total", kind="status") == 1
    assert _moved(before, after, "streamparse_rejected_calls_total", status="unknown_tool", format="hermes") == 1
    # the fake upstream reports 11 prompt and 22 completion tokens for each of the three it answered
    assert _moved(before, after, "streamparse_prompt_tokens_total") == 33
    assert _moved(before, after, "streamparse_completion_tokens_total") == 66
    assert _moved(before, after, "streamparse_time_to_first_token_seconds_count") == 1  # streams only
    assert _moved(before, after, "streamparse_request_duration_seconds_count") == 6  # the first scrape too
    assert after[("streamparse_streams_open", ())] == 0


def test_streams_open_counts_a_stream_while_it_is_sent(observed: tuple[Server, Path], upstream: Upstream) -> None:
    server, _ = observed
    key = upstream.script("m-slow", Script(["word " * 200], delay=0.02))
    with httpx.stream("POST", server.url + "/chat/completions", json=_chat(key, stream=True),
                      timeout=TIMEOUT) as answer:
        lines = answer.iter_lines()
        next(lines)
        assert _metrics(server)[("streamparse_streams_open", ())] == 1
        assert [line for line in lines if line][-1] == "data: [DONE]"
    assert _metrics(server)[("streamparse_streams_open", ())] == 0


def test_a_client_that_leaves_mid_stream_is_no_upstream_error(observed: tuple[Server, Path],
                                                              upstream: Upstream) -> None:
    server, log = observed
    key = upstream.script("m-left", Script(["word " * 2000], delay=0.01))
    before = _metrics(server)
    with httpx.stream("POST", server.url + "/chat/completions", json=_chat(key, stream=True),
                      headers={"X-Request-Id": "client-left"}, timeout=TIMEOUT) as answer:
        lines = answer.iter_lines()
        next(lines)
        next(lines)  # then the client goes away, 20 s before the upstream would end
    deadline = time.monotonic() + 10
    while ("m-left" not in upstream.cancelled or "request_id=client-left " not in log.read_text()) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "m-left" in upstream.cancelled
    line = next(line for line in log.read_text().splitlines() if "request_id=client-left " in line)
    assert "status=200" in line and "upstream_error" not in line
    after = _metrics(server)
    assert _moved(before, after, "streamparse_upstream_errors_total", kind="stream") == 0
    assert after[("streamparse_streams_open", ())] == 0


def test_each_request_has_an_id_and_one_log_line(observed: tuple[Server, Path], upstream: Upstream) -> None:
    server, log = observed
    key = upstream.script("m-logged", Script([ANSWER + "hello there"]))
    answer = httpx.post(server.url + "/chat/completions", json=_chat(key), headers={"X-Request-Id": "trace-42.a"},
                        timeout=TIMEOUT)
    assert answer.status_code == 200 and answer.headers["x-request-id"] == "trace-42.a"
    made = httpx.post(server.url + "/chat/completions", json=_chat(key, stream=True), timeout=TIMEOUT)
    assert made.headers["x-request-id"].startswith("req-") and made.text.endswith("data: [DONE]\n\n")
    for unsafe in ("has space", "x" * 65, "new\u00e9", "a;b"):
        replaced = httpx.get(server.url + "/models", headers={"X-Request-Id": unsafe.encode()}, timeout=TIMEOUT)
        assert replaced.headers["x-request-id"].startswith("req-")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines()
        mine = [line for line in lines if "request_id=trace-42.a " in line]
        streamed = [line for line in lines if f"request_id={made.headers['x-request-id']} " in line]
        if mine and streamed:
            break
        time.sleep(0.05)
    assert len(mine) == 1 and len(streamed) == 1
    assert "path=/v1/chat/completions status=200 duration_ms=" in mine[0]
    assert "prompt_tokens=11 completion_tokens=22" in mine[0]
    assert "stream=true first_token_ms=" in streamed[0] and "prompt_tokens=11 completion_tokens=22" in streamed[0]
    assert "hello there" not in log.read_text()  # no request or answer text in the log


# --------------------------------------------------------------------------------------------
# SIGTERM
# --------------------------------------------------------------------------------------------

def test_sigterm_lets_an_open_stream_finish_then_exits_0(upstream: Upstream) -> None:
    output = "word " * 60
    key = upstream.script("drain", Script([ANSWER + output], delay=0.03))  # about 2.5 s of stream
    server = Server(upstream.url, HERMES_TEMPLATE)
    try:
        text, last = "", ""
        with httpx.stream("POST", server.url + "/chat/completions", json=_chat(key, stream=True),
                          timeout=TIMEOUT) as answer:
            lines = answer.iter_lines()
            next(lines)
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            with pytest.raises(httpx.ConnectError):  # it no longer accepts
                httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=2)
            for line in lines:
                if line.startswith("data: {"):
                    delta = json.loads(line[6:])["choices"]
                    text += delta[0]["delta"].get("content", "") if delta else ""
                last = line or last
        assert text == streamparse.parse(ANSWER + output, "hermes").content and last == "data: [DONE]"
        assert server.process.wait(timeout=15) == 0
    finally:
        server.stop()


def test_sigterm_cuts_a_stream_longer_than_the_shutdown_timeout(upstream: Upstream) -> None:
    key = upstream.script("drain-long", Script(["word " * 2000], delay=0.02))  # 40 s of stream
    server = Server(upstream.url, HERMES_TEMPLATE, "--shutdown-timeout", "1")
    try:
        with httpx.stream("POST", server.url + "/chat/completions", json=_chat(key, stream=True),
                          timeout=TIMEOUT) as answer:
            lines = answer.iter_lines()
            next(lines)
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            with pytest.raises(httpx.HTTPError):
                for _ in lines:
                    pass
        assert server.process.wait(timeout=15) == 0
        assert time.monotonic() - started < 10
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# The replaying upstream
# --------------------------------------------------------------------------------------------

def test_serve_in_front_of_the_replayer_answers_with_the_formats_real_output() -> None:
    from test_server import free_port

    port = free_port()
    replay = subprocess.Popen([sys.executable, "-m", "streamparse", "replay", "--format", "hermes", "--port", str(port),
                               "--delay", "0"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and replay.poll() is None, "the replayer did not start"
            time.sleep(0.1)
        server = Server(f"http://127.0.0.1:{port}/v1", HERMES_TEMPLATE)
        try:
            fixture = bundled_output("hermes").read_text()
            expected = streamparse.parse(fixture, "hermes", HERMES_TOOLS)
            stream = server.client().chat.completions.create(
                model="m", messages=[{"role": "user", "content": "anything at all"}], tools=HERMES_TOOLS, stream=True)
            names, content = [], ""
            for chunk in stream:
                for choice in chunk.choices:
                    content += choice.delta.content or ""
                    names += [call.function.name for call in choice.delta.tool_calls or () if call.function.name]
            assert names == [call.name for call in expected.tool_calls]
            assert content == expected.content
        finally:
            server.stop()
    finally:
        replay.terminate()
        replay.wait(timeout=10)
        if replay.stderr:
            replay.stderr.close()


@pytest.mark.parametrize("format_name", streamparse.formats())
def test_the_replayer_sends_each_formats_bundled_output_piece_by_piece(format_name: str) -> None:
    from starlette.testclient import TestClient

    from streamparse.serve.replay import Replay, create_replay_app

    output = bundled_output(format_name).read_text()
    assert streamparse.parse(output, format_name).tool_calls  # a real output with calls in it
    client = TestClient(create_replay_app(Replay(output, f"replay-{format_name}")))
    answer = client.post("/v1/completions", json={"prompt": [1, 2, 3], "stream": True, "n": 2,
                                                   "stream_options": {"include_usage": True}})
    events = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: {")]
    assert answer.text.endswith("data: [DONE]\n\n")
    for index in (0, 1):
        texts = [c["choices"][0]["text"] for c in events if c["choices"] and c["choices"][0]["index"] == index]
        assert "".join(texts) == output and len(texts) > 10
    assert events[-1]["usage"]["prompt_tokens"] == 3
    whole = client.post("/v1/completions", json={"prompt": "any prompt at all"}).json()
    assert whole["choices"][0]["text"] == output and whole["choices"][0]["finish_reason"] == "stop"
    cut = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3}).json()
    assert output.startswith(cut["choices"][0]["text"]) and cut["choices"][0]["finish_reason"] == "length"
    assert client.get("/v1/models").json()["data"][0]["id"] == f"replay-{format_name}"


def test_replay_misuse_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from streamparse.cli import main

    assert main(["replay", "--format", "no_such_format"]) == 2
    assert main(["replay", "--output", str(tmp_path / "missing.txt")]) == 2
    assert main(["replay", "--delay", "-1"]) == 2


def test_with_several_workers_a_scrape_sums_every_workers_metrics() -> None:
    from streamparse.serve.metrics import MULTIPROC_ENV, Metrics, shared_between_workers

    worker = ("import sys\nfrom streamparse.serve.metrics import Metrics\n"
              "metrics = Metrics('hermes')\nassert metrics.multiprocess\n"
              "for _ in range(int(sys.argv[1])): metrics.requests.labels('/v1/chat/completions', '200').inc()\n"
              "metrics.prompt_tokens.inc(11)\nmetrics.streams_open.inc()\n"
              "if sys.argv[2] == 'ends': metrics.close()\n")
    with shared_between_workers() as directory:
        for count, ending in ((3, "ends"), (4, "stays")):  # the second exits without closing: as if killed
            subprocess.run([sys.executable, "-c", worker, str(count), ending], check=True, cwd=ROOT)
        scraped = Metrics("hermes", multiprocess_mode=True).exposition().decode()
        assert Path(directory).is_dir()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in parser.text_string_to_metric_families(scraped) for s in family.samples}
    assert samples[("streamparse_requests_total", (("path", "/v1/chat/completions"), ("status", "200")))] == 7
    assert samples[("streamparse_prompt_tokens_total", ())] == 22
    assert samples[("streamparse_streams_open", ())] == 1  # the worker that closed no longer counts
    assert not Path(directory).exists() and MULTIPROC_ENV not in os.environ


@pytest.mark.parametrize("key", ["two words", "line\r\nX-Injected: 1", "caf\u00e9"])
def test_a_key_that_cannot_be_a_header_value_stops_serve_at_start(upstream: Upstream, key: str) -> None:
    with pytest.raises(RuntimeError, match="printable ASCII"):
        Server(upstream.url, HERMES_TEMPLATE, "--upstream-api-key", key)


def test_a_worker_forked_after_prometheus_client_was_imported_still_shares_its_metrics() -> None:
    from prometheus_client import values

    from streamparse.serve.metrics import Metrics, shared_between_workers

    before = values.ValueClass  # this process imported prometheus_client long ago, in-memory values
    try:
        with shared_between_workers():
            pids = []
            for count in (2, 5):
                pid = os.fork()
                if pid == 0:  # a worker as `--workers` forks it: counts, closes, leaves
                    status = 1
                    try:
                        metrics = Metrics("hermes")
                        metrics.requests.labels("/health", "200").inc(count)
                        metrics.close()
                        status = 0
                    finally:
                        os._exit(status)
                pids.append(pid)
            assert all(os.waitpid(pid, 0)[1] == 0 for pid in pids)
            scraped = Metrics("hermes").exposition().decode()
    finally:
        values.ValueClass = before
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in parser.text_string_to_metric_families(scraped) for s in family.samples}
    assert samples[("streamparse_requests_total", (("path", "/health"), ("status", "200")))] == 7


def _workers_of(server: Server) -> list[int]:
    pid = server.process.pid
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _metrics_directory(worker: int) -> Path:
    """The run's metrics directory, found by the files the worker keeps there (a variable the process
    set itself is not in /proc/PID/environ)."""
    import tempfile

    found = list(Path(tempfile.gettempdir()).glob(f"streamparse-metrics-*/counter_{worker}.db"))
    assert len(found) == 1, found
    return found[0].parent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="--workers above 1 is Linux-only")
def test_two_workers_share_metrics_and_both_drain_on_sigterm(upstream: Upstream) -> None:
    from prometheus_client.multiprocess import MultiProcessCollector

    key = upstream.script("two-workers", Script([ANSWER + "fine"]))
    server = Server(upstream.url, HERMES_TEMPLATE, "--workers", "2")
    try:
        workers = _workers_of(server)
        directory = _metrics_directory(workers[0])
        assert len(workers) == 2 and _metrics_directory(workers[1]) == directory
        for _ in range(20):  # each on a new connection: the kernel spreads them over the two workers
            assert httpx.post(server.url + "/chat/completions", json=_chat(key), timeout=TIMEOUT).status_code == 200
        ok = ("streamparse_requests_total", (("path", "/v1/chat/completions"), ("status", "200")))
        for _ in range(6):  # whichever worker answers the scrape, it tells the sum
            assert _metrics(server)[ok] == 20
        per_worker = {}
        for worker in workers:
            merged = MultiProcessCollector.merge([str(directory / f"counter_{worker}.db")], accumulate=True)
            per_worker[worker] = sum(sample.value for family in merged for sample in family.samples
                                     if sample.name == ok[0] and sample.labels.get("path") == ok[1][0][1])
        assert sorted(per_worker.values())[0] > 0 and sum(per_worker.values()) == 20, per_worker

        slow = upstream.script("two-workers-drain", Script([ANSWER + "word " * 60], delay=0.03))
        text = ""
        with httpx.stream("POST", server.url + "/chat/completions", json=_chat(slow, stream=True),
                          timeout=TIMEOUT) as answer:
            lines = answer.iter_lines()
            next(lines)
            server.process.send_signal(signal.SIGTERM)
            for line in lines:
                if line.startswith("data: {") and json.loads(line[6:])["choices"]:
                    text += json.loads(line[6:])["choices"][0]["delta"].get("content", "")
        assert text == streamparse.parse(ANSWER + "word " * 60, "hermes").content
        assert server.process.wait(timeout=15) == 0
        assert not directory.exists()  # the run's metrics directory goes with it
    finally:
        server.stop()


def test_rejected_calls_are_counted_with_the_log_at_warning(bounded: Server, upstream: Upstream) -> None:
    output = ANSWER + '<tool_call>\n{"name": "get_weather"}\n</tool_call>'
    status = streamparse.parse(output, "hermes", HERMES_TOOLS).rejected[0].status
    key = upstream.script("quiet-reject", Script([output]))
    before = _metrics(bounded)  # this server runs with --log-level warning (serve_argv's)
    answer = bounded.client().chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} x"}],
                                                      tools=HERMES_TOOLS)
    assert answer.choices[0].message.tool_calls is None
    assert _moved(before, _metrics(bounded), "streamparse_rejected_calls_total", status=status, format="hermes") == 1


# --------------------------------------------------------------------------------------------
# An HTTPS upstream: verified against the trusted authorities (SSL_CERT_FILE adds one)
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Upstream, Path]]:
    """The fake upstream over HTTPS with a certificate for 127.0.0.1 from a test authority, and the
    authority's certificate file."""
    import trustme

    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    folder = tmp_path_factory.mktemp("tls")
    chain, key, trusted = folder / "chain.pem", folder / "key.pem", folder / "authority.pem"
    chain.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(trusted))
    server = Upstream().start(tls=(str(chain), str(key)))
    yield server, trusted
    server.stop()


def test_an_https_upstream_with_a_trusted_certificate_answers_both_ways(tls_upstream: tuple[Upstream, Path]) -> None:
    upstream, trusted = tls_upstream
    assert upstream.url.startswith("https://")
    key = upstream.script("tls", Script([ANSWER + "over tls"]))
    server = Server(upstream.url, HERMES_TEMPLATE, env={"SSL_CERT_FILE": str(trusted)})
    try:
        client = server.client()
        whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} a"}])
        assert whole.choices[0].message.content == "over tls"
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} b"}],
                                                stream=True)
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == "over tls"
    finally:
        server.stop()


def test_an_https_upstream_whose_certificate_is_not_trusted_is_a_502(tls_upstream: tuple[Upstream, Path]) -> None:
    upstream, _ = tls_upstream
    key = upstream.script("tls-untrusted", Script([ANSWER + "never sent"]))
    server = Server(upstream.url, HERMES_TEMPLATE)  # the test authority is not among the default ones
    try:
        with pytest.raises(openai.APIStatusError) as refused:
            server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} a"}])
        assert refused.value.status_code == 502
        assert "certificate verify failed" in refused.value.body["message"]
        assert key not in upstream.requests
    finally:
        server.stop()


def test_https_to_an_upstream_that_speaks_plain_http_is_a_502(upstream: Upstream) -> None:
    server = Server(upstream.url.replace("http://", "https://"), HERMES_TEMPLATE)
    try:
        with pytest.raises(openai.APIStatusError) as refused:
            server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert refused.value.status_code == 502
        assert refused.value.body["message"].startswith("cannot reach the upstream at https://")
    finally:
        server.stop()
