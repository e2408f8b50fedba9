"""What an exposed `streamparse serve` does at its edges (issue #39), with the real server process and a
real HTTP upstream on 127.0.0.1 (tests/upstream.py): the upstream's back-off headers reach the client,
the log holds what a request or a model wrote as one escaped line, a request's head and body are
bounded in bytes and time, and the worker processes die with their parent and outlive their crashes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from test_server import HERMES_TOOLS, TIMEOUT, Server  # noqa: E402
from test_server_ops import observed  # noqa: E402
from upstream import Script, Upstream  # noqa: E402

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
