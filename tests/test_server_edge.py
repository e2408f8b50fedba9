"""What an exposed `streamparse serve` does at its edges (issue #39), with the real server process and a
real HTTP upstream on 127.0.0.1 (tests/upstream.py): the upstream's back-off headers reach the client,
the log holds what a request or a model wrote as one escaped line, a request's head and body are
bounded in bytes and time, and the worker processes die with their parent and outlive their crashes."""

from __future__ import annotations

import contextlib
import json
import os
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

from conftest import ROOT  # noqa: E402
from test_server import HERMES_TEMPLATE, HERMES_TOOLS, TIMEOUT, Server  # noqa: E402
from test_server_ops import _answer, _length, observed  # noqa: E402
from upstream import Script, Upstream, free_port  # noqa: E402

ANSWER = "<think>\nok\n</think>\n\n"  # the Hermes template opens reasoning: an output closes it first
BACK_OFF = {"Retry-After": "7", "retry-after-ms": "7000", "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "7s"}


server = observed  # a serve process at --log-level info, and the file its stderr goes to


def _chat(key: str, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": f"{key} hi"}], "stream": stream, **extra}


# --------------------------------------------------------------------------------------------
# Upstream answers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [429, 503, 413])
def test_an_upstream_errors_back_off_headers_reach_the_client(server: tuple[Server, Path], upstream: Upstream,
                                                              status: int) -> None:
    running, _ = server
    headers = {**BACK_OFF, "x-upstream-secret": "kept", "Retry-After-Bad": "x", "x-ratelimit-bad": "a\tb",
               "x-ratelimit-latin": "caf\u00e9"}
    key = upstream.script(f"back-off-{status}", Script(status=status, message="slow down", headers=headers))
    for stream in (False, True):
        answer = httpx.post(running.url + "/chat/completions", json=_chat(key, stream), timeout=TIMEOUT)
        assert answer.status_code == (status if status < 500 else 502)
        assert "slow down" in answer.json()["error"]["message"]
        assert {name: answer.headers.get(name) for name in BACK_OFF} == BACK_OFF
        # only the back-off headers, and only values a header can carry
        assert "x-upstream-secret" not in answer.headers and "x-ratelimit-bad" not in answer.headers
        assert "x-ratelimit-latin" not in answer.headers
        assert "retry-after-bad" not in answer.headers


def test_the_sdk_reads_the_retry_after_of_a_relayed_429(server: tuple[Server, Path], upstream: Upstream) -> None:
    running, _ = server
    key = upstream.script("back-off-sdk", Script(status=429, message="rate limited", headers={"Retry-After": "3"}))
    with pytest.raises(openai.RateLimitError) as refused:
        running.client().chat.completions.create(model="m", messages=[{"role": "user", "content": key}])
    assert refused.value.response.headers["retry-after"] == "3"


# --------------------------------------------------------------------------------------------
# The log
# --------------------------------------------------------------------------------------------

FORGED = "get_weather\n2026-12-06 INFO request forged\u2028\x1b[31mred\x1b[0m"


def _lines_with(log: Path, text: str, count: int) -> list[str]:
    deadline = time.monotonic() + 10
    while True:
        lines = [line for line in log.read_text().splitlines() if text in line]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_name_the_model_wrote_is_logged_as_one_escaped_line(server: tuple[Server, Path], upstream: Upstream,
                                                                   stream: bool) -> None:
    running, log = server
    call = json.dumps({"name": FORGED, "arguments": {}})  # JSON escapes: the name holds a real newline and ESC
    key = upstream.script(f"forged-{stream}", Script([f"{ANSWER}<tool_call>\n{call}\n</tool_call>"]))
    answer = httpx.post(running.url + "/chat/completions", json=_chat(key, stream, tools=HERMES_TOOLS),
                        timeout=TIMEOUT)
    assert answer.status_code == 200
    [line] = _lines_with(log, "rejected tool call: status=unknown_tool tool=get_weather", 1)[-1:]
    escaped = FORGED.encode("unicode_escape").decode()  # the name as Python escapes it: \n, \u2028, \x1b
    assert f"tool={escaped} at character " in line and f"no tool named {escaped[:40]}" in line.replace("'", ""), line
    text = log.read_text()
    assert "\x1b" not in text and "\u2028" not in text
    assert not any(line.startswith("2026-12-06") for line in text.splitlines())


def test_every_line_of_the_serve_log_is_escaped(capfd: pytest.CaptureFixture[str]) -> None:
    import logging

    from streamparse.serve.requests import configure_logging

    configure_logging("info")
    logging.getLogger("streamparse.requests").warning("request %s: unexpected %s", "r-1", "a\r\nINFO: forged\x9b2J")
    assert capfd.readouterr().err == "WARNING:     request r-1: unexpected a\\r\\nINFO: forged\\x9b2J\n"


def test_a_request_line_is_built_only_where_a_handler_writes_it() -> None:
    import logging

    from streamparse.serve.metrics import Metrics
    from streamparse.serve.requests import _lines_wanted, configure_logging

    root = logging.getLogger("streamparse")
    saved = (root.handlers[:], root.level, root.propagate)
    root.handlers.clear()  # (other tests' capture handlers would want the lines)
    metrics = Metrics("hermes", multiprocess_mode=False)
    try:
        configure_logging("warning")
        metrics.count_rejected_calls(root)  # keeps the logger at INFO for itself
        assert logging.getLogger("streamparse.requests").isEnabledFor(logging.INFO)
        assert not _lines_wanted()  # --log-level warning: no line is made for each request
        configure_logging("info")
        assert _lines_wanted()
    finally:
        metrics.close()
        root.handlers[:], root.level, root.propagate = saved


# --------------------------------------------------------------------------------------------
# Workers
# --------------------------------------------------------------------------------------------

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="--workers above 1 is Linux-only")


def _gone(pid: int) -> bool:
    """Whether the process ended (a zombie no one has reaped yet counts: it serves nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _children(server: Server) -> set[int]:
    pid = server.process.pid
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _new_child(server: Server, known: set[int], within: float = 20.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert server.process.poll() is None, "serve exited"
        fresh = _children(server) - known
        if fresh:
            return fresh.pop()
        time.sleep(0.01)
    raise AssertionError(f"no new worker within {within} s")


@linux_only
def test_the_workers_end_when_their_parent_is_killed(upstream: Upstream) -> None:
    server = Server(upstream.url, HERMES_TEMPLATE, "--workers", "2")
    workers = _children(server)
    assert len(workers) == 2
    try:
        server.process.kill()  # as the OOM killer does: no handler runs in the parent
        server.process.wait(timeout=10)
        deadline = time.monotonic() + 20
        while not all(map(_gone, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in workers if not _gone(pid)] == []
        with pytest.raises(httpx.ConnectError):  # nothing serves the port with the old key now
            httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=5)
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@linux_only
def test_a_worker_killed_twice_within_seconds_is_replaced_both_times(upstream: Upstream) -> None:
    key = upstream.script("crashing-workers", Script([ANSWER + "fine"]))
    server = Server(upstream.url, HERMES_TEMPLATE, "--workers", "2")
    try:
        first = _children(server)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        replacement = _new_child(server, first)
        os.kill(replacement, signal.SIGKILL)  # as it starts: well within 5 s of its fork
        last = _new_child(server, first | {replacement})
        deadline = time.monotonic() + 20
        while len(_children(server)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _children(server) == (first - {victim}) | {last}
        for _ in range(10):  # each on a new connection: both workers answer
            answer = httpx.post(server.url + "/chat/completions", json=_chat(key), timeout=TIMEOUT)
            assert answer.status_code == 200
        assert server.process.poll() is None
    finally:
        server.stop()


_FAKE_WORKERS = """
import asyncio, os, sys, time
from streamparse.serve.workers import run_workers

mode, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def serve_on(sock, tick):
    with open(log, "a") as out:
        out.write(f"start {os.getpid()}\\n")
    if mode == "slow-failure":  # a start that takes long (a large tokenizer) and then fails
        time.sleep(6)
        return False
    asyncio.run(tick())  # it serves
    if len(open(log).read().splitlines()) < 3:
        return True  # and ends at once: replaced all the same
    os.kill(os.getppid(), 15)  # enough: stop them all
    time.sleep(30)
    return True

sys.exit(run_workers(serve_on, "127.0.0.1", port, 2))
"""


@linux_only
@pytest.mark.parametrize(("mode", "status", "starts"), [("slow-failure", 1, {2}), ("served", 0, {3, 4})])
def test_only_a_worker_that_fails_its_own_start_stops_the_server(tmp_path: Path, mode: str, status: int,
                                                                 starts: set[int]) -> None:
    # by its exit before it served, however late; one that served and ended at once is replaced
    log = tmp_path / "starts.log"
    done = subprocess.run([sys.executable, "-c", _FAKE_WORKERS, mode, str(free_port()), str(log)], check=False,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == status, done.stderr
    assert len(log.read_text().splitlines()) in starts
    assert ("failed as it started" in done.stderr) == (status == 1)


# --------------------------------------------------------------------------------------------
# A request's head and body: bytes and time
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def timed(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """A server whose head and body timeouts are 1 s (the defaults are 60), logging at info."""
    log = tmp_path_factory.mktemp("timed") / "stderr.log"
    with log.open("wb") as stderr:
        running = Server(upstream.url, HERMES_TEMPLATE, "--header-timeout", "1", "--body-timeout", "1",
                         "--log-level", "info", stderr=stderr)
        yield running, log
        running.stop()


def _read_all(sock: socket.socket, within: float) -> bytes:
    """What the server sends until it closes the connection (b"" if it sends nothing for `within` s)."""
    sock.settimeout(within)
    got = b""
    try:
        while data := sock.recv(65536):
            got += data
    except TimeoutError:
        pass
    return got


def _json_answer(answer: bytes) -> tuple[int, dict[str, Any], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body), head.lower()


HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\n"


@pytest.mark.parametrize("size", [15 << 10, 16 << 10])
def test_a_head_within_the_default_16_kib_is_answered(server: tuple[Server, Path], size: int) -> None:
    running, _ = server
    padding = b"X-Padding: " + b"p" * (size - len(HEAD) - len(b"X-Padding: \r\n\r\n")) + b"\r\n\r\n"
    assert len(HEAD + padding) == size
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        sock.sendall(HEAD + padding)
        assert _answer(sock).startswith(b"HTTP/1.1 200 ")


def test_a_head_over_the_bound_is_a_431_before_it_ends(server: tuple[Server, Path]) -> None:
    # A 96 MB Authorization header, sent as fast as the server reads: the answer comes, and the
    # connection closes, after the first 16 KiB are read, long before the header would end.
    running, log = server
    piece = b"a" * (64 << 10)
    sent = 0
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
        try:
            while sent < 96 << 20:
                sock.sendall(piece)
                sent += len(piece)
        except OSError:  # the server closed the connection: what it answered is still to read
            pass
        answer = _read_all(sock, TIMEOUT)
    status, error, head = _json_answer(answer)
    assert status == 431 and b"connection: close" in head
    assert error["error"]["message"].startswith("the request line and headers are larger than 16384 bytes")
    assert "--max-header-bytes" in error["error"]["message"]
    assert sent < 16 << 20  # refused with most of the header unsent (the socket buffers hold a few MB)
    assert "431, the request line and headers are larger than 16384 bytes" in log.read_text()


def test_max_header_bytes_sets_the_bound(upstream: Upstream) -> None:
    running = Server(upstream.url, HERMES_TEMPLATE, "--max-header-bytes", "2048")
    try:
        fine = httpx.get(f"http://127.0.0.1:{running.port}/health", headers={"X-Pad": "p" * 1800}, timeout=TIMEOUT)
        assert fine.status_code == 200
        refused = httpx.get(f"http://127.0.0.1:{running.port}/health", headers={"X-Pad": "p" * 2100},
                            timeout=TIMEOUT)
        assert refused.status_code == 431 and "larger than 2048 bytes" in refused.json()["error"]["message"]
    finally:
        running.stop()


def test_a_connection_that_sends_nothing_gets_a_408_and_is_closed(timed: tuple[Server, Path]) -> None:
    running, _ = timed
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        answer = _read_all(sock, 15)  # read until the server closes it
    took = time.monotonic() - started
    status, error, head = _json_answer(answer)
    assert status == 408 and b"connection: close" in head and "--header-timeout" in error["error"]["message"]
    assert 0.9 < took < 15


def test_a_head_sent_a_byte_at_a_time_gets_a_408_before_it_ends(timed: tuple[Server, Path]) -> None:
    running, _ = timed
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n"
    answer = b""
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        sock.settimeout(0.25)
        for byte in request:  # 80 bytes a quarter second apart: 20 s for the head
            try:
                sock.sendall(bytes([byte]))
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if answer:
                break
        answer += _read_all(sock, 5)
    assert _json_answer(answer)[0] == 408
    assert byte != request[-1]  # the head never ended


def test_a_kept_connection_may_idle_between_requests_longer_than_the_head_timeout(
        timed: tuple[Server, Path]) -> None:
    running, _ = timed
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        for _ in range(2):  # the idle time between the two is uvicorn's keep-alive (5 s), not the head's
            sock.sendall(HEAD + b"\r\n")
            assert _answer(sock).startswith(b"HTTP/1.1 200 ")
            time.sleep(2)


def test_a_body_that_stops_short_gets_a_408_and_what_trickles_after_is_cut_off(timed: tuple[Server, Path]) -> None:
    running, log = timed
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-Request-Id: stopped-body\r\nContent-Length: 4000\r\n\r\n")
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        sock.sendall(head + b'{"messages": [' + b" " * 1000)  # and nothing more, the connection kept open
        sock.settimeout(15)
        answer = _answer(sock)
        for _ in range(20):  # a byte of the body now and then after the answer: dropped, then closed
            try:
                sock.sendall(b" ")
            except OSError:
                break
            time.sleep(0.25)
        assert _read_all(sock, 10) == b""
        with pytest.raises(OSError):
            sock.sendall(b" ")
            sock.sendall(b" ")
    status, error, _ = _json_answer(answer)
    assert status == 408
    assert error["error"]["message"] == ("the request body stopped: no bytes of it for 1 s "
                                         "(streamparse serve --body-timeout)")
    [line] = _lines_with(log, "request_id=stopped-body ", 1)
    assert "status=408" in line


def test_pipelined_requests_are_each_answered(server: tuple[Server, Path]) -> None:
    # Three requests in one send, a body between them: each head is found and bounded on its own.
    running, _ = server
    body = json.dumps({"messages": []}).encode()
    post = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with socket.create_connection(("127.0.0.1", running.port), timeout=TIMEOUT) as sock:
        sock.sendall(HEAD + b"\r\n" + post + HEAD + b"X-Pad: " + b"p" * (15 << 10) + b"\r\n\r\n")
        got, statuses = b"", []
        while len(statuses) < 3 and (data := sock.recv(65536)):
            got += data
            while b"\r\n\r\n" in got and len(got) >= _length(got):  # one whole answer at the front
                statuses.append(int(got.split(b" ", 2)[1]))
                got = got[_length(got):]
    assert statuses == [200, 400, 200]


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--max-header-bytes", "100", "--max-header-bytes must be at least 1024"),
    ("--header-timeout", "0", "--header-timeout and --body-timeout must be more than 0 seconds"),
    ("--body-timeout", "nan", "--header-timeout and --body-timeout must be more than 0 seconds"),
])
def test_a_bound_out_of_range_stops_serve_at_start(upstream: Upstream, flag: str, value: str, says: str) -> None:
    with pytest.raises(RuntimeError, match=says):
        Server(upstream.url, HERMES_TEMPLATE, flag, value)
