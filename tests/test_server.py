"""`streamparse serve` end to end: the real server process between the real OpenAI SDK and a real HTTP
upstream streaming token by token (tests/upstream.py) recorded streams and outputs rendered from real
chat templates. Every answer is checked exactly against `streamparse.parse` of the same output."""

from __future__ import annotations

import asyncio
import json
import os
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

from conftest import CASES, FIXTURES, ROOT, ids  # noqa: E402
from upstream import Script, Upstream, free_port  # noqa: E402

import streamparse  # noqa: E402

TIMEOUT = 20
HERMES_TEMPLATE = FIXTURES / "hermes" / "chat_template.jinja"
HERMES_TOOLS = json.loads((FIXTURES / "hermes" / "tools.json").read_text())
RECORDED_OUTPUT = (FIXTURES / "streams" / "output.txt").read_text()
TEMPLATES = CASES.parent


def serve_argv(upstream_url: str, template: Path, port: int, *flags: str) -> list[str]:
    """The one place the serve command line of the end-to-end tests is built."""
    return [sys.executable, "-m", "streamparse", "serve", "--upstream", upstream_url, "--chat-template",
            str(template), "--port", str(port), "--ids", "ordinal", "--log-level", "warning",
            *(() if "--workers" in flags else ("--workers", "1")), *flags,
            *(() if ((template if template.is_dir() else template.parent) / "tokenizer.json").is_file()
              or template.suffix == ".gguf" or "--text-prompt" in flags else ("--text-prompt",))]


class Server:
    """One `python -m streamparse serve` process, killed by the fixture that made it; its stderr goes to
    a pipe read when it fails to start, or to the file given."""

    def __init__(self, upstream_url: str, template: Path, *flags: str, stderr: Any = subprocess.PIPE,
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.process = subprocess.Popen(serve_argv(upstream_url, template, self.port, *flags), cwd=ROOT,
                                        stdout=subprocess.DEVNULL, stderr=stderr,
                                        env={**os.environ, **env} if env else None)
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                error = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"serve exited: {error}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("serve did not answer /health within 30 s")
            time.sleep(0.1)

    def client(self) -> Any:
        return openai.OpenAI(base_url=self.url, api_key="x", timeout=TIMEOUT, max_retries=0)

    def async_client(self) -> Any:
        return openai.AsyncOpenAI(base_url=self.url, api_key="x", timeout=TIMEOUT, max_retries=0)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stderr:
            self.process.stderr.close()


@pytest.fixture(scope="module")
def servers(upstream: Upstream) -> Iterator[Any]:
    """`servers(template, *flags)`: a running server, started once per module for those arguments."""
    running: dict[tuple[Any, ...], Server] = {}

    def get(template: Path = HERMES_TEMPLATE, *flags: str, upstream_url: str | None = None) -> Server:
        key = (template, flags, upstream_url)
        if key not in running:
            running[key] = Server(upstream_url or upstream.url, template, *flags)
        return running[key]

    yield get
    for server in running.values():
        server.stop()


def assemble(stream: Any) -> dict[int, dict[str, Any]]:
    """What a client builds from the SDK's chunk objects, per choice index."""
    out: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        fold(out, chunk)
    return out


def fold(out: dict[int, dict[str, Any]], chunk: Any) -> None:
    if chunk.usage is not None:
        out.setdefault(-1, {})["usage"] = chunk.usage.model_dump(exclude_none=True)
    for choice in chunk.choices:
        slot = out.setdefault(choice.index, {"content": "", "reasoning": "", "reasoning_content": "", "calls": {},
                                             "finish": None, "statuses": [], "logprobs": []})
        delta = choice.delta
        extra = delta.model_extra or {}
        slot["content"] += delta.content or ""
        slot["reasoning"] += extra.get("reasoning") or ""
        slot["reasoning_content"] += extra.get("reasoning_content") or ""
        for call in delta.tool_calls or []:
            entry = slot["calls"].setdefault(call.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = entry["id"] or call.id
            entry["name"] += (call.function.name or "") if call.function else ""
            entry["arguments"] += (call.function.arguments or "") if call.function else ""
            if (call.model_extra or {}).get("status"):
                slot["statuses"].append(call.model_extra["status"])
        if choice.logprobs is not None and choice.logprobs.content:
            slot["logprobs"] += [t.token for t in choice.logprobs.content]
        slot["finish"] = choice.finish_reason or slot["finish"]


def expected(message: streamparse.Message, finish: str = "stop") -> dict[str, Any]:
    return {"content": message.content, "reasoning": message.reasoning,
            "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments_json} for c in message.tool_calls],
            "finish": "tool_calls" if message.tool_calls else finish}


def streamed(slot: dict[str, Any]) -> dict[str, Any]:
    assert slot["reasoning"] == slot["reasoning_content"]  # the default --reasoning-field both
    return {"content": slot["content"], "reasoning": slot["reasoning"],
            "calls": [slot["calls"][i] for i in sorted(slot["calls"])], "finish": slot["finish"]}


# --------------------------------------------------------------------------------------------
# Basic shapes, with the project's own template (always runs)
# --------------------------------------------------------------------------------------------

def test_health_and_models(servers: Any) -> None:
    server = servers()
    assert httpx.get(server.url.replace("/v1", "/health"), timeout=TIMEOUT).json() == {"status": "ok"}
    assert [m.id for m in server.client().models.list()] == ["hermes"]


def test_streaming_with_tools_and_reasoning_matches_parse(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("hermes-stream", Script([RECORDED_OUTPUT]))
    stream = servers().client().chat.completions.create(
        model="qwen3", messages=[{"role": "user", "content": f"{key} Weather in Paris?"}], tools=HERMES_TOOLS,
        stream=True)
    (slot,) = assemble(stream).values()
    prompt = upstream.last("hermes-stream")["prompt"]
    assert streamed(slot) == expected(streamparse.parse(RECORDED_OUTPUT, "hermes", HERMES_TOOLS, prompt=prompt,
                                                        id_factory=ids))
    assert slot["calls"][0]["name"] == "get_weather" and slot["reasoning"] and slot["content"] == "Let me check."


def test_non_streaming_with_tools(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("hermes-whole", Script([RECORDED_OUTPUT]))
    completion = servers().client().chat.completions.create(
        model="qwen3", messages=[{"role": "user", "content": f"{key} Weather?"}], tools=HERMES_TOOLS)
    choice = completion.choices[0]
    message = streamparse.parse(RECORDED_OUTPUT, "hermes", HERMES_TOOLS, id_factory=ids)
    assert choice.finish_reason == "tool_calls" and completion.object == "chat.completion"
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        (c.id, c.name, c.arguments_json) for c in message.tool_calls]
    assert choice.message.content == message.content
    assert choice.message.model_extra["reasoning"] == choice.message.model_extra["reasoning_content"] == (
        message.reasoning)
    assert completion.usage.total_tokens == 33


@pytest.mark.parametrize("name", ["llamacpp_v1_completions", "vllm_v1_completions"])
def test_recorded_upstream_streams(servers: Any, upstream: Upstream, name: str) -> None:
    key = upstream.script(f"replay-{name}", Script(replay=name))
    stream = servers().client().chat.completions.create(
        model="qwen3", messages=[{"role": "user", "content": f"{key} Weather?"}], tools=HERMES_TOOLS, stream=True,
        stream_options={"include_usage": True})
    folded = assemble(stream)
    assert streamed(folded[0]) == {
        "content": "Let me check.", "reasoning": "The user asks for Paris weather.",
        "calls": [{"id": "call_0", "name": "get_weather",
                   "arguments": '{"location": "Paris, France", "unit": "celsius"}'}],
        "finish": "tool_calls"}
    assert folded[-1]["usage"]["prompt_tokens"] == 40


def test_async_client_streaming_and_not(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("async", Script(["<think>\nShort.\n</think>\n\nHi there."]))
    client = servers().async_client()

    async def run() -> tuple[Any, Any]:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"{key} hi"}], stream=True)
        folded: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            fold(folded, chunk)
        whole = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} hi"}])
        await client.close()
        return folded, whole

    folded, whole = asyncio.run(run())
    assert streamed(folded[0]) == {"content": "Hi there.", "reasoning": "Short.", "calls": [], "finish": "stop"}
    assert whole.choices[0].message.content == "Hi there." and whole.choices[0].finish_reason == "stop"


def test_usage_logprobs_sampling_parameters_and_special_tokens_forwarded(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("forward", Script(["Hello <b>world</b>"], finish_reason="length"))
    stream = servers().client().chat.completions.create(
        model="qwen3", messages=[{"role": "user", "content": f"{key} hi"}], stream=True, temperature=0.3, top_p=0.9,
        max_tokens=17, seed=5, stop=["</s>"], logprobs=True, top_logprobs=2, stream_options={"include_usage": True},
        extra_body={"top_k": 20, "repetition_penalty": 1.05, "chat_template_kwargs": {"enable_thinking": False}})
    folded = assemble(stream)
    assert folded[-1]["usage"] == {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}
    assert "".join(folded[0]["logprobs"]) == "Hello <b>world</b>" and folded[0]["finish"] == "length"
    sent = upstream.last("forward")
    assert {k: sent[k] for k in ("temperature", "top_p", "max_tokens", "seed", "stop", "top_k", "repetition_penalty",
                                 "logprobs", "skip_special_tokens", "stream", "model")} == {
        "temperature": 0.3, "top_p": 0.9, "max_tokens": 17, "seed": 5, "stop": ["</s>"], "top_k": 20,
        "repetition_penalty": 1.05, "logprobs": 2, "skip_special_tokens": False, "stream": True, "model": "qwen3"}
    assert not {"messages", "tools", "chat_template_kwargs", "top_logprobs"} & set(sent)
    # no include_usage asked: no usage chunk
    stream = servers().client().chat.completions.create(
        model="qwen3", messages=[{"role": "user", "content": f"{key} hi"}], stream=True)
    assert -1 not in assemble(stream)


def test_n_choices_stay_apart(servers: Any, upstream: Upstream) -> None:
    # the project's template forces thinking open: each output starts as reasoning
    key = upstream.script("n2", Script(["One.\n</think>\n\nHello world", "Deux.\n</think>\n\nBonjour monde"]))
    stream = servers().client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], n=2, stream=True)
    folded = assemble(stream)
    assert [(folded[i]["reasoning"], folded[i]["content"], folded[i]["finish"]) for i in (0, 1)] == [
        ("One.", "Hello world", "stop"), ("Deux.", "Bonjour monde", "stop")]
    whole = servers().client().chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key}"}], n=2)
    assert [c.message.content for c in whole.choices] == ["Hello world", "Bonjour monde"]


def test_tool_choice_none_returns_a_written_call_as_text(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("choice-none", Script([RECORDED_OUTPUT]))
    completion = servers().client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], tools=HERMES_TOOLS, tool_choice="none")
    message = completion.choices[0].message
    assert not message.tool_calls and "<tool_call>" in message.content
    assert completion.choices[0].finish_reason == "stop"
    assert "get_weather" not in upstream.last("choice-none")["prompt"]  # the template was given no tools


@pytest.mark.skipif(not CASES.is_file(), reason="../shared/templates is not beside the checkout")
def test_reasoning_sent_back_under_either_key_and_template_kwargs_reach_the_template(
        servers: Any, upstream: Upstream) -> None:
    key = upstream.script("history", Script(["ok"]))
    client = servers(TEMPLATES / "Qwen3-8B.jinja").client()
    for field in ("reasoning", "reasoning_content"):
        completion = client.chat.completions.create(model="m", messages=[
            {"role": "user", "content": f"{key} a"},
            {"role": "assistant", "content": "b", field: "THOUGHT-1"},
            {"role": "user", "content": [{"type": "text", "text": "c"}]}], extra_body={"chat_template_kwargs": {
                "enable_thinking": False}})
        assert completion.choices[0].message.content == "ok"
        prompt = upstream.last("history")["prompt"]
        assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # enable_thinking=False
        assert "<|im_start|>user\nc<|im_end|>" in prompt


# --------------------------------------------------------------------------------------------
# Progressive mode: a call rejected after it started
# --------------------------------------------------------------------------------------------

def test_progressive_call_rejected_after_it_started_is_closed_visibly(servers: Any, upstream: Upstream) -> None:
    bad = ('Hm.\n</think>\n\nChecking.\n'
           '<tool_call>\n{"name": "get_weather", "arguments": {"location": 42}}\n</tool_call>')
    key = upstream.script("progressive-bad", Script([bad]))
    stream = servers(HERMES_TEMPLATE, "--emit", "progressive").client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], tools=HERMES_TOOLS, stream=True)
    (slot,) = assemble(stream).values()
    assert slot["finish"] == "stop"                      # not tool_calls: a stock client runs nothing
    assert slot["statuses"] == ["schema_violation"]      # streamparse-aware clients see why
    assert slot["content"] == streamparse.parse(bad, "hermes", HERMES_TOOLS, True, on_rejected="content").content
    assert '"location": 42' in slot["content"]           # the call's text comes back as content


def test_progressive_accepted_calls_stream_in_fragments(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("progressive-good", Script([RECORDED_OUTPUT]))
    stream = servers(HERMES_TEMPLATE, "--emit", "progressive").client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], tools=HERMES_TOOLS, stream=True)
    (slot,) = assemble(stream).values()
    assert streamed(slot) == expected(streamparse.parse(RECORDED_OUTPUT, "hermes", HERMES_TOOLS, id_factory=ids))


# --------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------

def test_bad_requests_are_openai_errors(servers: Any, upstream: Upstream, tmp_path_factory: Any) -> None:
    server = servers()
    answer = httpx.post(server.url + "/chat/completions", content=b"{not json", timeout=TIMEOUT)
    assert answer.status_code == 400 and "not JSON" in answer.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="messages"):
        server.client().chat.completions.create(model="m", messages=[])
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                tools=HERMES_TOOLS, tool_choice={"type": "function",
                                                                                 "function": {"name": "nope"}})
    with pytest.raises(openai.BadRequestError, match="invalid tools"):
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=[
            {"type": "function", "function": {"name": "f", "parameters": {"type": "no-such-type"}}}])
    folder = tmp_path_factory.mktemp("raising")
    (folder / "chat_template.jinja").write_text(
        "{% if messages[0].role != 'system' %}{{ raise_exception('a system message must come first') }}{% endif %}"
        "<|im_start|>assistant\n")
    with pytest.raises(openai.BadRequestError, match="a system message must come first"):
        servers(folder, "--format", "hermes").client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}])


def test_unreachable_upstream_is_a_502(servers: Any) -> None:
    server = servers(HERMES_TEMPLATE, upstream_url=f"http://127.0.0.1:{free_port()}/v1")
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as caught:
            server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                    stream=stream)
        assert caught.value.status_code == 502 and "cannot reach the upstream" in str(caught.value)


def test_upstream_error_status_and_message_are_passed_on(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("refused", Script(status=422, message="prompt is 9000 tokens, the limit is 8192"))
    for stream in (False, True):
        with pytest.raises(openai.UnprocessableEntityError, match="the limit is 8192"):
            servers().client().chat.completions.create(model="m", messages=[{"role": "user", "content": key}],
                                                       stream=stream)


@pytest.mark.parametrize("fault", ["break_after", "error_event_after"])
def test_upstream_that_breaks_mid_stream_ends_with_an_error_event(servers: Any, upstream: Upstream,
                                                                  fault: str) -> None:
    key = upstream.script(f"fault-{fault}", Script([RECORDED_OUTPUT], **{fault: 5}))
    stream = servers().client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], stream=True)
    with pytest.raises(openai.APIError, match="broke off" if fault == "break_after" else "CUDA out of memory"):
        for _ in stream:
            pass


def test_an_upstream_that_goes_silent_ends_the_stream_with_an_error_event(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("silent", Script(["Hm.\n</think>\n\nHello there, all of you."], delay=3))
    stream = servers(HERMES_TEMPLATE, "--upstream-timeout", "1").client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], stream=True)
    started = time.monotonic()
    with pytest.raises(openai.APIError, match="ReadTimeout"):
        for _ in stream:
            pass
    assert time.monotonic() - started < 10


def test_a_client_that_disconnects_cancels_its_upstream_request(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("slow", Script(["word " * 2000], delay=0.01))
    body = {"model": "m", "messages": [{"role": "user", "content": f"{key} hi"}], "stream": True}
    with httpx.stream("POST", servers().url + "/chat/completions", json=body, timeout=TIMEOUT) as answer:
        lines = answer.iter_lines()
        assert next(lines).startswith("data: ")
        next(lines)
    deadline = time.monotonic() + 10
    while "slow" not in upstream.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "slow" in upstream.cancelled


# --------------------------------------------------------------------------------------------
# Real templates from ../shared: hermes, qwen3_coder, deepseek, mistral end to end
# --------------------------------------------------------------------------------------------

_END_TO_END = ("Qwen3-8B.jinja", "Qwen3-Coder-30B-A3B-Instruct.jinja", "DeepSeek-R1-0528.jinja", "DeepSeek-V3.1.jinja",
               "Mistral-Small-3.2-24B-Instruct-2506.jinja", "Magistral-Small-2509-unsloth.jinja")


def _cases() -> list[dict[str, Any]]:
    if not CASES.is_file():
        return []
    return [c for c in json.loads(CASES.read_text()) if c["template"] in _END_TO_END]


@pytest.mark.skipif(not CASES.is_file(), reason="../shared/templates is not beside the checkout")
@pytest.mark.parametrize("template", _END_TO_END)
def test_real_templates_end_to_end(servers: Any, upstream: Upstream, template: str) -> None:
    cases = [c for c in _cases() if c["template"] == template]
    assert cases
    server = servers(TEMPLATES / template)
    fmt = streamparse.detect_format(TEMPLATES / template)
    for case in cases:
        key = upstream.script(f"{template}-{case['case']}", Script([case["output"]]))
        stream = server.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"{key} What is the weather in Paris?"}],
            tools=case["tools"], stream=True, extra_body={"chat_template_kwargs": case["template_kwargs"]})
        (slot,) = assemble(stream).values()
        prompt = upstream.last(f"{template}-{case['case']}")["prompt"]
        message = streamparse.parse(case["output"], fmt, case["tools"], prompt=prompt, id_factory=ids)
        assert streamed(slot) == expected(message), case["case"]
        if streamparse.thinking_forced_open(prompt, fmt) == case["thinking_forced_open"]:
            assert slot["content"].strip() == (case["expected"]["content"] or "").strip(), case["case"]
            assert [c["name"] for c in streamed(slot)["calls"]] == [c["name"] for c in case["expected"]["tool_calls"]]


# --------------------------------------------------------------------------------------------
# Load: 64 concurrent streams, each checked exactly
# --------------------------------------------------------------------------------------------

def connections_by_worker(server: Server) -> dict[int, int]:
    """How many open client connections each worker process of `server` holds (Linux: its socket fds
    matched against the established TCP connections on the server's port)."""
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == server.port and fields[3] == "01":
                established.add(fields[9])
    workers = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    counts = {}
    for pid in map(int, workers):
        inodes = {os.readlink(fd)[8:-1] for fd in Path(f"/proc/{pid}/fd").iterdir()
                  if os.readlink(fd).startswith("socket:[")}
        counts[pid] = len(inodes & established)
    return counts


@pytest.mark.parametrize("workers", ["1", "2"])
def test_64_concurrent_streams_are_kept_apart(servers: Any, upstream: Upstream, workers: str) -> None:
    """Each of 64 concurrent streams gets its own answer exactly; with two workers both take a share
    of the connections (the kernel spreads them), and each stream stays whole in its worker."""
    if workers != "1" and not sys.platform.startswith("linux"):
        pytest.skip("--workers above 1 is Linux-only (SO_REUSEPORT)")
    server = servers(HERMES_TEMPLATE, "--workers", workers)
    outputs = {}
    for i in range(64):
        call = json.dumps({"name": "get_weather", "arguments": {"location": f"City {i}"}})
        outputs[i] = (f"<think>\nStream {i} thinks {'x' * (i % 7)}.\n</think>\n\nAnswer {i}: " + "ok " * (10 + i % 13)
                      + f"\n<tool_call>\n{call}\n</tool_call>")
        upstream.script(f"load-{i}", Script([outputs[i]], delay=0.002))
    client = server.async_client()
    spread: dict[int, int] = {}

    async def one(i: int) -> dict[str, Any]:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"[[load-{i}]] go"}], tools=HERMES_TOOLS, stream=True)
        folded: dict[int, dict[str, Any]] = {}
        async for chunk in stream:
            fold(folded, chunk)
        return streamed(folded[0])

    async def run() -> list[dict[str, Any]]:
        try:
            results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(64))), timeout=120)
            if workers != "1":
                spread.update(connections_by_worker(server))  # the client's connections, still open
            return results
        finally:
            await client.close()

    results = asyncio.run(run())
    for i, result in enumerate(results):
        assert result == expected(streamparse.parse(outputs[i], "hermes", HERMES_TOOLS, id_factory=ids)), i
    if workers != "1":
        assert len(spread) == int(workers) and all(spread.values()), spread
        assert sum(spread.values()) >= 32, spread  # the SDK keeps most of its 64 connections open


def test_agent_round_trip_and_capabilities_through_the_proxy(servers: Any, upstream: Upstream) -> None:
    """The turn the OpenAI SDK sends back after a call (`content: None`) renders on gpt-oss; a later
    system message it would drop is a 400 naming the capability; DeepSeek R1 gets the tools in a system
    message, since its template never prints them."""
    key = upstream.script("agent-loop", Script(["ok"]))
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}
    loop = [{"role": "user", "content": f"{key} weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
    gpt_oss = servers(TEMPLATES / "gpt-oss-120b.jinja").client()
    gpt_oss.chat.completions.create(model="m", messages=loop, tools=HERMES_TOOLS)
    prompt = upstream.last("agent-loop")["prompt"]
    assert "functions.get_weather" in prompt and "18 C" in prompt
    with pytest.raises(openai.BadRequestError, match="later_system"):
        gpt_oss.chat.completions.create(model="m", messages=[
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "system", "content": "be terse"}, {"role": "user", "content": "c"}])
    servers(TEMPLATES / "DeepSeek-R1-0528.jinja").client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} hi"}], tools=HERMES_TOOLS)
    prompt = upstream.last("agent-loop")["prompt"]
    assert "You can call any of the following tools" in prompt and '"name": "get_weather"' in prompt
