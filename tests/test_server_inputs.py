"""`streamparse serve` never answers 500 to what a client or an upstream sends: a wrong request is a 400
naming the field, an upstream answer of the wrong shape a 502 (or mid-stream an error event then
`[DONE]`), and the server's log shows no traceback. The real serve process, the real fake upstream on
127.0.0.1 (tests/upstream.py, answering the bad shapes verbatim), the real OpenAI SDK, and raw httpx
for bodies the SDK cannot send."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
jiter = pytest.importorskip("jiter")

import test_server  # noqa: E402
from conftest import FIXTURES  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from upstream import Script, Upstream, free_port  # noqa: E402

TIMEOUT = test_server.TIMEOUT
TEMPLATE = FIXTURES / "hermes" / "chat_template.jinja"  # its prompt ends in `<think>\n`: outputs close it first
TOOLS = json.loads((FIXTURES / "hermes" / "tools.json").read_text())
LINE_LIMIT = 4096  # --max-upstream-line of the server under test: small, so a long line is cheap to send


class Server(test_server.Server):
    """A `streamparse serve` process (tests/test_server.py builds its command line) whose stderr goes to a
    file the tests read."""

    def __init__(self, upstream_url: str, *flags: str) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="serve-", suffix=".log")  # noqa: SIM115 (closed in stop)
        try:
            super().__init__(upstream_url, TEMPLATE, *flags, stderr=self.log)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {self.stderr()}") from None

    def stderr(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def post(self, body: bytes | dict[str, Any]) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.post(self.url + "/chat/completions", content=content, timeout=TIMEOUT,
                          headers={"Content-Type": "application/json"})

    def stop(self) -> None:
        super().stop()
        self.log.close()


@pytest.fixture(scope="module")
def server(upstream: Upstream) -> Iterator[Server]:
    running = Server(upstream.url, "--max-upstream-line", str(LINE_LIMIT))
    yield running
    running.stop()


@pytest.fixture
def clean(server: Server) -> Iterator[Server]:
    """The server, and after the test: its log holds no traceback (and no line of the last-resort catch)."""
    yield server
    log = server.stderr()
    assert "Traceback" not in log, log
    assert "unexpected" not in log, log


def user(key: str, text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": f"{key} {text}"}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"message", "type", "param", "code"} <= set(body["error"]), body
    return dict(body["error"])


def events(response: httpx.Response) -> list[Any]:
    """The data of every SSE event, each read as strict JSON (no NaN/Infinity), `[DONE]` as a string."""
    out: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else jiter.from_json(data.encode(), allow_inf_nan=False))
    return out


# -- a wrong request is a 400 naming the field ------------------------------------------------------------

GOOD = [{"role": "user", "content": "hi"}]
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
# (what is changed, the body, the param the error names, a piece of its message)
BAD_REQUESTS: list[tuple[str, Any, str | None, str]] = [
    ("body a list", [], None, "JSON object"),
    ("body a number", 5, None, "JSON object"),
    ("no messages", {"model": "m"}, "messages", "non-empty list"),
    ("messages empty", {"messages": []}, "messages", "(empty)"),
    ("messages a string", {"messages": "hi"}, "messages", "not a string"),
    ("message not an object", {"messages": [5]}, "messages[0]", "message object"),
    ("role missing", {"messages": [{"content": "hi"}]}, "messages[0].role", "a string"),
    ("role a number", {"messages": [{"role": 1, "content": "hi"}]}, "messages[0].role", "not a number"),
    ("content a number", {"messages": [{"role": "user", "content": 5}]}, "messages[0].content", "text parts"),
    ("content an object", {"messages": [{"role": "user", "content": {}}]}, "messages[0].content", "not an object"),
    ("part not an object", {"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content[0]",
     "content part"),
    ("image part", {"messages": [GOOD[0], {"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "messages[1].content[1].type", "images are not supported"),
    ("audio part", {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
     "messages[0].content[0].type", "audio are not supported"),
    ("unknown part type", {"messages": [{"role": "user", "content": [{"type": "blob"}]}]},
     "messages[0].content[0].type", "must be 'text'"),
    ("part text a number", {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
     "messages[0].content[0].text", "a string"),
    ("name a number", {"messages": [{"role": "user", "content": "hi", "name": 5}]}, "messages[0].name", "a string"),
    ("tool_calls an object", {"messages": [GOOD[0], {"role": "assistant", "tool_calls": CALL}]},
     "messages[1].tool_calls", "a list of tool calls"),
    ("tool call a string", {"messages": [GOOD[0], {"role": "assistant", "tool_calls": ["get_weather"]}]},
     "messages[1].tool_calls[0]", "tool call object"),
    ("tool call without function", {"messages": [GOOD[0], {"role": "assistant", "tool_calls": [{"id": "c1"}]}]},
     "messages[1].tool_calls[0].function", "'name' and 'arguments'"),
    ("tool call name a number", {"messages": [GOOD[0], {"role": "assistant", "tool_calls": [
        {"function": {"name": 3, "arguments": "{}"}}]}]}, "messages[1].tool_calls[0].function.name", "non-empty"),
    ("tool call arguments a list", {"messages": [GOOD[0], {"role": "assistant", "tool_calls": [
        {"function": {"name": "f", "arguments": [1]}}]}]}, "messages[1].tool_calls[0].function.arguments",
     "JSON text or an object"),
    ("tool_call_id a number", {"messages": [GOOD[0], {"role": "tool", "content": "x", "tool_call_id": 7}]},
     "messages[1].tool_call_id", "a string"),
    ("reasoning a list", {"messages": [GOOD[0], {"role": "assistant", "content": "a", "reasoning": []}]},
     "messages[1].reasoning", "a string"),
    ("tools an object", {"messages": GOOD, "tools": {"type": "function"}}, "tools", "a list of tool definitions"),
    ("tool a string", {"messages": GOOD, "tools": ["get_weather"]}, "tools[0]", "tool object"),
    ("tool without function", {"messages": GOOD, "tools": [{"type": "function"}]}, "tools[0].function",
     "'name' and 'parameters'"),
    ("tool without name", {"messages": GOOD, "tools": [{"type": "function", "function": {}}]},
     "tools[0].function.name", "non-empty"),
    ("tool parameters a string", {"messages": GOOD, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": "object"}}]}, "tools[0].function.parameters", "JSON Schema object"),
    ("tool schema invalid", {"messages": GOOD, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": 5}}}]}, "tools", "invalid tools"),
    ("tool_choice required without tools", {"messages": GOOD, "tool_choice": "required"}, "tool_choice",
     "needs tools"),
    ("tool_choice a number", {"messages": GOOD, "tool_choice": 5}, "tool_choice", "'auto', 'none', 'required'"),
    ("parallel_tool_calls a string", {"messages": GOOD, "parallel_tool_calls": "yes"}, "parallel_tool_calls",
     "true or false"),
    ("stream a string", {"messages": GOOD, "stream": "false"}, "stream", "true or false"),
    ("stream_options a list", {"messages": GOOD, "stream": True, "stream_options": []}, "stream_options",
     "an object"),
    ("include_usage a string", {"messages": GOOD, "stream": True, "stream_options": {"include_usage": "y"}},
     "stream_options.include_usage", "true or false"),
    ("n zero", {"messages": GOOD, "n": 0}, "n", "from 1 to 128"),
    ("n too many", {"messages": GOOD, "n": 100000}, "n", "from 1 to 128"),
    ("n a string", {"messages": GOOD, "n": "2"}, "n", "not a string"),
    ("n a boolean", {"messages": GOOD, "n": True}, "n", "not a boolean"),
    ("logprobs a string", {"messages": GOOD, "logprobs": "abc"}, "logprobs", "true or false"),
    ("top_logprobs a string", {"messages": GOOD, "logprobs": True, "top_logprobs": "abc"}, "top_logprobs",
     "from 0 to 20"),
    ("top_logprobs 21", {"messages": GOOD, "logprobs": True, "top_logprobs": 21}, "top_logprobs", "from 0 to 20"),
    ("max_tokens zero", {"messages": GOOD, "max_tokens": 0}, "max_tokens", "positive integer"),
    ("max_tokens a float", {"messages": GOOD, "max_tokens": 1.5}, "max_tokens", "positive integer"),
    ("max_completion_tokens a string", {"messages": GOOD, "max_completion_tokens": "9"}, "max_completion_tokens",
     "positive integer"),
    ("temperature a string", {"messages": GOOD, "temperature": "hot"}, "temperature", "finite number"),
    ("top_p a boolean", {"messages": GOOD, "top_p": True}, "top_p", "finite number"),
    ("top_k a float", {"messages": GOOD, "top_k": 2.5}, "top_k", "integer"),
    ("stop a number", {"messages": GOOD, "stop": 5}, "stop", "a string or a list of strings"),
    ("stop a list of numbers", {"messages": GOOD, "stop": ["a", 1]}, "stop[1]", "a string"),
    ("seed too large", {"messages": GOOD, "seed": 2 ** 70}, "seed", "64-bit integer"),
    ("chat_template_kwargs a list", {"messages": GOOD, "chat_template_kwargs": []}, "chat_template_kwargs",
     "an object"),
    ("chat_template_kwargs sets messages", {"messages": GOOD, "chat_template_kwargs": {"messages": []}},
     "chat_template_kwargs.messages", "set by the proxy"),
    ("chat_template_kwargs sets add_generation_prompt", {"messages": GOOD, "chat_template_kwargs": {
        "add_generation_prompt": False}}, "chat_template_kwargs.add_generation_prompt", "set by the proxy"),
    ("model a number", {"messages": GOOD, "model": 5}, "model", "a string"),
    ("unknown key nested too deep", {"messages": GOOD, "extra": json.loads("[" * 70 + "]" * 70)},
     "extra" + "[0]" * 63, "deeper than 64"),
]
# Bodies no JSON serializer writes for you: (what, raw bytes, param, a piece of the message)
BAD_BYTES: list[tuple[str, bytes, str | None, str]] = [
    ("not JSON", b'{"messages": [', None, "not JSON"),
    ("trailing bytes", b'{"messages": []} x', None, "not JSON"),
    ("not UTF-8", b'{"messages": [{"role": "user", "content": "\xff"}]}', None, "not JSON"),
    ("NaN temperature", b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature",
     "finite number"),
    ("Infinity top_p", b'{"messages": [{"role": "user", "content": "hi"}], "top_p": -Infinity}', "top_p",
     "finite number"),
    ("overflowing float in a forwarded key", b'{"messages": [{"role": "user", "content": "hi"}], "x": {"y": 1e400}}',
     "x.y", "finite number"),
    ("NaN in a logit_bias", b'{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"5": NaN}}',
     "logit_bias.5", "finite number"),
    ("escaped lone surrogate", b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}', None, "lone surrogate"),
    ("raw lone surrogate", b'{"messages": [{"role": "user", "content": "a\xed\xa0\x80b"}]}', None, "lone surrogate"),
    ("lone low surrogate in a key", b'{"messages": [{"role": "user", "content": "hi"}], "\\udc00": 1}', None,
     "lone surrogate"),
    ("200 KB of nested brackets", b"[" * 100_000 + b"]" * 100_000, None, "nested at most"),
    ("200 KB of nested objects", b'{"a":' * 40_000 + b"1" + b"}" * 40_000, None, "nested at most"),
]


@pytest.mark.parametrize(("body", "param", "words"), [case[1:] for case in BAD_REQUESTS],
                         ids=[case[0] for case in BAD_REQUESTS])
def test_a_wrong_field_is_a_400_naming_it(clean: Server, body: Any, param: str | None, words: str) -> None:
    response = clean.post(json.dumps(body).encode())
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert words in error["message"], error["message"]


@pytest.mark.parametrize(("raw", "param", "words"), [case[1:] for case in BAD_BYTES],
                         ids=[case[0] for case in BAD_BYTES])
def test_a_body_no_serializer_writes_is_a_400(clean: Server, raw: bytes, param: str | None, words: str) -> None:
    response = clean.post(raw)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["param"] == param
    assert words in error["message"], error["message"]


def test_the_sdk_sees_bad_request_errors(clean: Server, upstream: Upstream) -> None:
    key = upstream.script("sdk-bad", Script(["never"]))
    client = clean.client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": [
            {"type": "text", "text": key}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]}])
    assert "images are not supported" in str(caught.value)
    with pytest.raises(openai.BadRequestError) as caught:  # (the SDK itself refuses to write NaN: raw bytes above)
        client.chat.completions.create(model="m", messages=[user(key)], extra_body={"top_logprobs": "abc"})
    assert caught.value.body["param"] == "top_logprobs"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=[user(key)], n=0)
    assert caught.value.body["param"] == "n"
    assert "sdk-bad" not in upstream.requests  # nothing wrong ever reaches the upstream


def test_what_is_right_still_passes_and_unknown_keys_are_forwarded(clean: Server, upstream: Upstream) -> None:
    key = upstream.script("good-shapes", Script(["</think>Fine."]))
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}
    answer = clean.client().chat.completions.create(
        model="m", tools=TOOLS, tool_choice="auto", parallel_tool_calls=True, n=2, logprobs=True, top_logprobs=3,
        max_completion_tokens=5, temperature=0.5, top_p=1, stop=["x"], seed=-1, messages=[
            {"role": "system", "content": None}, {"role": "user", "content": [{"type": "text", "text": key}]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        extra_body={"my_engine_key": {"deep": [1, {"x": None}]}, "top_k": -1, "chat_template_kwargs": {"a": 1}})
    assert [choice.message.content for choice in answer.choices] == ["Fine.", "Fine."]
    sent = upstream.last("good-shapes")
    assert sent["my_engine_key"] == {"deep": [1, {"x": None}]}
    assert (sent["n"], sent["max_tokens"], sent["logprobs"], sent["seed"]) == (2, 5, 3, -1)


# -- an upstream answer of the wrong shape is a 502 --------------------------------------------------------

BAD_ANSWERS: list[tuple[str, bytes, str]] = [
    ("not JSON", b"<html>oops</html>", "cannot be read"),
    ("a number", b"5", "is a number"),
    ("null", b"null", "is null"),
    ("NaN alone", b"NaN", "is null"),
    ("choices missing", b'{"id": "x"}', "'choices' is null"),
    ("choices an object", b'{"choices": {"text": "a"}}', "'choices' is an object"),
    ("a choice a string", b'{"choices": ["a"]}', "choices[0] is a string"),
    ("text a number", b'{"choices": [{"index": 0, "text": 5}]}', "choices[0].text is a number"),
    ("text missing", b'{"choices": [{"index": 0, "finish_reason": "stop"}]}', "choices[0].text is null"),
    ("index a string", b'{"choices": [{"index": "0", "text": "a"}]}', "index is '0'"),
    ("index beyond n", b'{"choices": [{"index": 7, "text": "a"}]}', "below n=1"),
    ("finish_reason a number", b'{"choices": [{"index": 0, "text": "a", "finish_reason": 1}]}', "finish_reason"),
    ("logprobs a list", b'{"choices": [{"index": 0, "text": "a", "logprobs": [1]}]}', "logprobs is a list"),
    ("logprobs tokens a number", b'{"choices": [{"index": 0, "text": "a", "logprobs": {"tokens": 5}}]}',
     "logprobs.tokens"),
    ("top_logprobs of strings", b'{"choices": [{"index": 0, "text": "a", "logprobs": {"tokens": ["a"], '
     b'"token_logprobs": [-1], "top_logprobs": [{"a": "high"}]}}]}', "top_logprobs"),
    ("usage a string", b'{"choices": [{"index": 0, "text": "a"}], "usage": "lots"}', "usage is a string"),
    ("usage counts strings", b'{"choices": [{"index": 0, "text": "a"}], "usage": {"prompt_tokens": "11"}}',
     "usage.prompt_tokens"),
    ("nested too deep", b"[" * 300 + b"]" * 300, "cannot be read"),
]


@pytest.mark.parametrize(("raw", "words"), [case[1:] for case in BAD_ANSWERS], ids=[case[0] for case in BAD_ANSWERS])
def test_a_wrong_upstream_answer_is_a_502(clean: Server, upstream: Upstream, raw: bytes, words: str) -> None:
    key = upstream.script(f"bad-whole-{hash(raw)}", Script(raw=[raw]))
    with pytest.raises(openai.APIStatusError) as caught:
        clean.client().chat.completions.create(model="m", messages=[user(key)])
    assert caught.value.status_code == 502
    assert caught.value.body["type"] == "upstream_error"
    assert words in caught.value.body["message"], caught.value.body["message"]


GOOD_CHUNK = b'data: {"choices": [{"index": 0, "text": "</think>Hello", "finish_reason": null}]}\n\n'
BAD_EVENTS: list[tuple[str, list[bytes], str]] = [
    ("data: 5", [GOOD_CHUNK, b"data: 5\n\n", b"data: [DONE]\n\n"], "is a number"),
    ("data: null", [GOOD_CHUNK, b"data: null\n\n", b"data: [DONE]\n\n"], "is null"),
    ("text a number", [GOOD_CHUNK, b'data: {"choices":[{"text":5}]}\n\n', b"data: [DONE]\n\n"],
     "choices[0].text is a number"),
    ("not JSON", [GOOD_CHUNK, b"data: {oops\n\n", b"data: [DONE]\n\n"], "cannot be read"),
    ("choices missing", [b'data: {"id": "x"}\n\n', b"data: [DONE]\n\n"], "'choices' is null"),
    ("index beyond n", [b'data: {"choices":[{"index": 3, "text": "a"}]}\n\n', b"data: [DONE]\n\n"], "below n=1"),
    ("usage a list", [GOOD_CHUNK, b'data: {"choices": [], "usage": [1]}\n\n', b"data: [DONE]\n\n"],
     "usage is a list"),
    ("a line over the bound", [GOOD_CHUNK, b'data: {"choices": [{"index": 0, "text": "' + b"x" * 1000,
                                            b"y" * (LINE_LIMIT * 3), b'"}]}\n\n', b"data: [DONE]\n\n"],
     f"longer than {LINE_LIMIT} bytes"),
    ("a line over the bound by its last read", [GOOD_CHUNK, b"data: " + b"q" * (LINE_LIMIT - 10),
                                                b"q" * 20 + b"\n\n", GOOD_CHUNK, b"data: [DONE]\n\n"],
     f"longer than {LINE_LIMIT} bytes"),
    ("a line over the bound, never ended", [GOOD_CHUNK] + [b"z" * 1024] * (LINE_LIMIT // 256), "longer than"),
    ("no [DONE]", [GOOD_CHUNK], "ended without [DONE]"),
]


@pytest.mark.parametrize(("pieces", "words"), [case[1:] for case in BAD_EVENTS], ids=[case[0] for case in BAD_EVENTS])
def test_a_wrong_upstream_event_is_an_error_event_then_done(clean: Server, upstream: Upstream, pieces: list[bytes],
                                                            words: str) -> None:
    key = upstream.script(f"bad-event-{hash(tuple(pieces))}", Script(raw=pieces))
    response = clean.post({"model": "m", "stream": True, "messages": [user(key)]})
    assert response.status_code == 200
    sent = events(response)
    assert sent[-1] == "[DONE]"
    error = sent[-2]["error"]
    assert (error["type"], error["code"]) == ("upstream_error", 502)
    assert words in error["message"], error["message"]
    if pieces[0] == GOOD_CHUNK:  # what came before the bad event was answered
        assert any(choice["delta"].get("content") for chunk in sent[:-2] for choice in chunk["choices"])
    with pytest.raises(openai.APIError):  # the SDK raises on the error event
        list(clean.client().chat.completions.create(model="m", stream=True, messages=[user(key)]))


def test_a_long_event_line_within_the_bound_is_read(clean: Server, upstream: Upstream) -> None:
    text = "w" * (LINE_LIMIT - 200)
    chunk = json.dumps({"choices": [{"index": 0, "text": "</think>" + text, "finish_reason": "stop"}]}).encode()
    pieces = [b"data: " + chunk[:100], chunk[100:] + b"\r\n\r\n", b"data: [DONE]\r\n\r\n"]  # CRLF lines, split reads
    key = upstream.script("long-line", Script(raw=pieces))
    stream = clean.client().chat.completions.create(model="m", stream=True, messages=[user(key)])
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == text


NONFINITE_LOGPROBS = (b'{"index": 0, "text": "a", "finish_reason": "stop", "logprobs": {"tokens": ["a"], '
                      b'"token_logprobs": [-Infinity], "top_logprobs": [{"a": -Infinity, "b": NaN}], '
                      b'"text_offset": [0]}}')


def test_non_finite_upstream_logprobs_reach_the_client_as_json(clean: Server, upstream: Upstream) -> None:
    """-inf becomes -9999.0 (what vLLM sends), NaN null: the answer stays strict JSON."""
    whole = upstream.script("inf-whole", Script(raw=[b'{"choices": [' + NONFINITE_LOGPROBS + b"]}"]))
    response = clean.post({"model": "m", "messages": [user(whole)], "logprobs": True})
    assert response.status_code == 200
    answer = jiter.from_json(response.content, allow_inf_nan=False)
    token = answer["choices"][0]["logprobs"]["content"][0]
    assert token["logprob"] == -9999.0
    assert [top["logprob"] for top in token["top_logprobs"]] == [-9999.0, None]
    streamed = upstream.script("inf-stream", Script(raw=[b'data: {"choices": [' + NONFINITE_LOGPROBS + b"]}\n\n",
                                                         b"data: [DONE]\n\n"]))
    response = clean.post({"model": "m", "messages": [user(streamed)], "logprobs": True, "stream": True})
    logprobs = [choice["logprobs"] for chunk in events(response)[:-1] for choice in chunk["choices"]
                if choice.get("logprobs")]
    assert logprobs[0]["content"][0]["logprob"] == -9999.0


@pytest.mark.parametrize(("status", "raw", "expected", "words"), [
    (503, b"Service Unavailable", 502, "HTTP 503: Service Unavailable"),
    (500, b'{"error": {"message": "CUDA out of memory", "type": "InternalServerError"}}', 502, "CUDA out of memory"),
    (404, b'{"object": "error", "message": "model x not found"}', 404, "model x not found"),
    (400, b"<html>bad</html>", 400, "bad"),
    (422, b'{"detail": NaN}', 422, "null"),
    (302, b"", 502, "HTTP 302"),
])
def test_upstream_error_statuses(clean: Server, upstream: Upstream, status: int, raw: bytes, expected: int,
                                 words: str) -> None:
    """A 4xx keeps the upstream's status and words; a 5xx or anything not 2xx is a 502."""
    key = upstream.script(f"status-{status}", Script(raw=[raw], raw_status=status))
    for stream in (False, True):
        response = clean.post({"model": "m", "stream": stream, "messages": [user(key)]})
        assert response.status_code == expected
        error = jiter.from_json(response.content, allow_inf_nan=False)["error"]
        assert words in json.dumps(error), error


def test_an_unreachable_upstream_is_a_502() -> None:
    server = Server(f"http://127.0.0.1:{free_port()}/v1")
    try:
        response = server.post({"model": "m", "messages": GOOD})
        assert response.status_code == 502
        assert "cannot reach the upstream" in error_of(response)["message"]
        assert "Traceback" not in server.stderr()
    finally:
        server.stop()


# -- random values in every field: never a 500 -------------------------------------------------------------

_SCALARS = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats()
            | st.text(st.characters(codec=None), max_size=8))
JSON_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5) | st.sampled_from(["type", "text", "function",
                                                                                      "name", "role", "content"]),
                                             inner, max_size=3), max_leaves=8)
FIELDS = [("body", name) for name in (
    "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options", "n", "logprobs",
    "top_logprobs", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "seed",
    "chat_template_kwargs", "model", "response_format", "unknown_key")] + [
    ("message", "role"), ("message", "content"), ("message", "name"), ("message", "tool_call_id"),
    ("assistant", "tool_calls"), ("call", "function"), ("call_function", "arguments"), ("tool", "function"),
    ("tool_function", "parameters")]


def _request(key: str, where: tuple[str, str], value: Any) -> dict[str, Any]:
    """A valid request with a tool and an earlier call, `value` put at `where` (which object, which key)."""
    call_function = {"name": "get_weather", "arguments": "{}"}
    tool_function = {"name": "get_weather", "parameters": {"type": "object"}}
    parts: dict[str, dict[str, Any]] = {
        "message": user(key), "call": {"id": "c1", "type": "function", "function": call_function},
        "call_function": call_function, "tool": {"type": "function", "function": tool_function},
        "tool_function": tool_function}
    parts["assistant"] = {"role": "assistant", "content": None, "tool_calls": [parts["call"]]}
    parts["body"] = {"model": "m", "messages": [parts["message"], parts["assistant"]], "tools": [parts["tool"]]}
    parts[where[0]][where[1]] = value
    return parts["body"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(FIELDS), value=JSON_VALUES)
def test_random_values_in_any_field_are_never_a_500(clean: Server, upstream: Upstream, where: tuple[str, str],
                                                    value: Any) -> None:
    key = upstream.script("fuzz", Script(["<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"]))
    response = clean.post(json.dumps(_request(key, where, value)).encode())
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    if response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream"):
        assert all("error" not in chunk for chunk in events(response)[:-1]), response.text
