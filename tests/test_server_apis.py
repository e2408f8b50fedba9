"""`streamparse serve` speaks the Responses API, Anthropic's Messages API and Ollama's chat API (issue #43),
through the real serve process, the real clients (the `openai`, `anthropic` and `ollama` SDKs) and the
recording upstream of tests/upstream.py on 127.0.0.1: answers streamed and whole equal
`streamparse.parse` of the upstream's text on every format's real-template cases; an agent loop of each
API renders the prompt the chat path renders for the same conversation; bad input is a 4xx in the API's
own error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
ollama = pytest.importorskip("ollama")

from conftest import FORMAT_NAMES, ids, shared_cases  # noqa: E402
from test_server import HERMES_TEMPLATE, HERMES_TOOLS, RECORDED_OUTPUT, TIMEOUT, Server  # noqa: E402
from upstream import Script, Upstream  # noqa: E402

import streamparse  # noqa: E402

KEY = "sk-apis-0123456789"
TOOLS = HERMES_TOOLS  # OpenAI chat tools: {"type": "function", "function": {"name", "description", "parameters"}}


def _flat(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat tools as the Responses API declares them."""
    return [{"type": "function", **tool["function"]} for tool in tools]


def _anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
             "input_schema": t["function"].get("parameters", {"type": "object"})} for t in tools]


# A template that opens no reasoning and names no format: the format comes from --format, and whether
# reasoning is open from --forced-open (the case's own prompt is not rendered here).
PLAIN = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}<|assistant|>"


@pytest.fixture(scope="module")
def servers(upstream: Upstream, tmp_path_factory: Any) -> Iterator[Any]:
    running: dict[tuple[str, ...], Server] = {}
    plain = tmp_path_factory.mktemp("plain") / "chat_template.jinja"
    plain.write_text(PLAIN)

    def get(*flags: str) -> Server:
        if flags not in running:
            template = plain if "--format" in flags else HERMES_TEMPLATE
            running[flags] = Server(upstream.url, template, "--api-key", KEY, *flags)
        return running[flags]

    yield get
    for server in running.values():
        server.stop()


def _openai(server: Server) -> Any:
    return openai.OpenAI(base_url=server.url, api_key=KEY, timeout=TIMEOUT, max_retries=0)


def _anthropic(server: Server) -> Any:
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key=KEY, timeout=TIMEOUT, max_retries=0)


def _ollama(server: Server) -> Any:
    return ollama.Client(host=server.url.removesuffix("/v1"), headers={"Authorization": f"Bearer {KEY}"},
                         timeout=TIMEOUT)


def _expected(message: streamparse.Message) -> dict[str, Any]:
    return {"reasoning": message.reasoning, "content": message.content,
            "calls": [(call.name, call.arguments) for call in message.tool_calls]}


# --------------------------------------------------------------------------------------------
# What each client gets back, streamed and whole
# --------------------------------------------------------------------------------------------

def _responses(server: Server, key: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    client = _openai(server)
    request = {"model": "m", "input": f"{key} What is the weather in Paris?", "tools": _flat(tools)}
    if stream:
        sequence = []
        with client.responses.stream(**request) as events:
            for event in events:
                sequence.append(event.sequence_number)
            response = events.get_final_response()
        assert sequence == list(range(len(sequence)))  # every event numbered, in order
    else:
        response = client.responses.create(**request)
    assert response.status == "completed"
    out = {"reasoning": "", "content": "", "calls": []}
    for item in response.output:
        if item.type == "reasoning":
            out["reasoning"] += "".join(part.text for part in item.content or [])
        elif item.type == "message":
            out["content"] += "".join(part.text for part in item.content)
        elif item.type == "function_call":
            assert item.call_id  # the model's own id where its format writes one, else a generated one
            out["calls"].append((item.name, json.loads(item.arguments)))
    return out


def _messages(server: Server, key: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    client = _anthropic(server)
    request = {"model": "m", "max_tokens": 512, "tools": _anthropic_tools(tools),
               "messages": [{"role": "user", "content": f"{key} What is the weather in Paris?"}]}
    if stream:
        with client.messages.stream(**request) as events:
            kinds = [event.type for event in events]
            message = events.get_final_message()
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    else:
        message = client.messages.create(**request)
    out = {"reasoning": "", "content": "", "calls": []}
    for block in message.content:
        if block.type == "thinking":
            out["reasoning"] += block.thinking
        elif block.type == "text":
            out["content"] += block.text
        elif block.type == "tool_use":
            out["calls"].append((block.name, block.input))
    assert message.stop_reason == ("tool_use" if out["calls"] else "end_turn")
    return out


def _ollama_chat(server: Server, key: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    client = _ollama(server)
    messages = [{"role": "user", "content": f"{key} What is the weather in Paris?"}]
    parts = client.chat(model="m", messages=messages, tools=tools, stream=stream)
    out: dict[str, Any] = {"reasoning": "", "content": "", "calls": []}
    for part in parts if stream else [parts]:
        out["reasoning"] += part.message.thinking or ""
        out["content"] += part.message.content or ""
        out["calls"] += [(call.function.name, dict(call.function.arguments)) for call in part.message.tool_calls or []]
    last = part
    assert last.done and last.done_reason == "stop"
    return out


CLIENTS = {"responses": _responses, "anthropic": _messages, "ollama": _ollama_chat}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", sorted(CLIENTS))
def test_each_client_gets_the_parsed_answer(servers: Any, upstream: Upstream, api: str, stream: bool) -> None:
    key = upstream.script(f"recorded-{api}-{stream}", Script([RECORDED_OUTPUT]))
    got = CLIENTS[api](servers(), key, TOOLS, stream)
    message = streamparse.parse(RECORDED_OUTPUT, "hermes", TOOLS)
    assert message.tool_calls and message.reasoning  # the recorded output has both
    assert got == _expected(message)


def _format_cases() -> list[tuple[str, bool, dict[str, Any]]]:
    """One real-template case per format and prompt kind (forced-open reasoning or not), from every
    cases file, one with calls where the format has such cases."""
    chosen = []
    for fmt in FORMAT_NAMES:
        by_kind: dict[bool, list[dict[str, Any]]] = {}
        for case in shared_cases(fmt):
            by_kind.setdefault(bool(case["thinking_forced_open"]), []).append(case)
        for forced, cases in sorted(by_kind.items()):
            cases.sort(key=lambda case: not case["expected"]["tool_calls"])
            chosen.append((fmt, forced, cases[0]))
    return chosen


def _tools_of(case: dict[str, Any]) -> list[dict[str, Any]]:
    tools = case["tools"]
    if isinstance(tools, str):  # a Python literal in some case files
        import ast
        tools = ast.literal_eval(tools)
    return tools or TOOLS


@pytest.mark.parametrize("api", sorted(CLIENTS))
def test_every_format_reads_the_same_through_every_api(servers: Any, upstream: Upstream, api: str) -> None:
    cases = _format_cases()
    if not cases:
        pytest.skip("../shared/templates is not beside the checkout")
    checked = set()
    for fmt, forced, case in cases:
        flags = ("--format", fmt, "--ids", "ordinal", *(("--forced-open",) if forced else ()))
        tools = _tools_of(case)
        message = streamparse.parse(case["output"], fmt, tools, thinking_forced_open=forced, id_factory=ids)
        for stream in (False, True):
            key = upstream.script(f"{api}-{fmt}-{case['template']}-{case['case']}-{stream}", Script([case["output"]]))
            got = CLIENTS[api](servers(*flags), key, tools, stream)
            assert got == _expected(message), (fmt, case["template"], case["case"], stream)
        checked.add(fmt)
    assert checked == {fmt for fmt in FORMAT_NAMES if shared_cases(fmt)} and len(checked) >= 25


# --------------------------------------------------------------------------------------------
# An agent loop of each API renders the prompt the chat path renders
# --------------------------------------------------------------------------------------------

CALL_ARGUMENTS = {"location": "Paris"}
CHAT_LOOP = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": None, "reasoning_content": "I should call the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": json.dumps(CALL_ARGUMENTS)}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, cloudy"},
]


def _prompt_of(upstream: Upstream, key: str) -> str:
    return str(upstream.last(key)["prompt"])


def test_agent_loops_render_what_the_chat_path_renders(servers: Any, upstream: Upstream) -> None:
    server = servers()
    tools = TOOLS
    name = tools[0]["function"]["name"]
    loop = json.loads(json.dumps(CHAT_LOOP).replace("get_weather", name))
    prompts = {}
    for api in ("chat", "responses", "anthropic", "ollama"):
        key = upstream.script(f"loop-{api}", Script(["It is 18 C."]))
        marked = json.loads(json.dumps(loop).replace("What is the weather", f"{key} What is the weather"))
        if api == "chat":
            _openai(server).chat.completions.create(model="m", messages=marked, tools=tools)
        elif api == "responses":
            _openai(server).responses.create(model="m", instructions="Be brief.", tools=_flat(tools), input=[
                {"role": "user", "content": marked[1]["content"]},
                {"type": "reasoning", "id": "rs_1", "summary": [],
                 "content": [{"type": "reasoning_text", "text": "I should call the tool."}]},
                {"type": "function_call", "call_id": "call_1", "name": name, "arguments": json.dumps(CALL_ARGUMENTS)},
                {"type": "function_call_output", "call_id": "call_1", "output": "18 C, cloudy"}])
        elif api == "anthropic":  # sent as JSON: the SDK reorders a schema's keys, which templates print
            httpx.post(server.url + "/messages", timeout=TIMEOUT, headers={"x-api-key": KEY}, json={
                "model": "m", "max_tokens": 64, "system": "Be brief.", "tools": _anthropic_tools(tools), "messages": [
                    {"role": "user", "content": marked[1]["content"]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "I should call the tool.", "signature": "sig"},
                        {"type": "tool_use", "id": "call_1", "name": name, "input": CALL_ARGUMENTS}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
                                                  "content": "18 C, cloudy"}]}]}).raise_for_status()
        else:  # sent as JSON too: the ollama client reorders a schema's keys as well
            httpx.post(server.url.removesuffix("/v1") + "/api/chat", timeout=TIMEOUT,
                       headers={"Authorization": f"Bearer {KEY}"}, json={
                "model": "m", "tools": tools, "stream": False, "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": marked[1]["content"]},
                    {"role": "assistant", "content": "", "thinking": "I should call the tool.",
                     "tool_calls": [{"function": {"name": name, "arguments": CALL_ARGUMENTS}}]},
                    {"role": "tool", "content": "18 C, cloudy", "tool_name": name}]}).raise_for_status()
        prompts[api] = _prompt_of(upstream, f"loop-{api}").replace(f"[[loop-{api}]]", "[[loop]]")
    assert "18 C, cloudy" in prompts["chat"] and "Be brief." in prompts["chat"]
    # Ollama's calls carry no ids: the proxy names them, and the one template line that prints the id differs.
    assert prompts["responses"] == prompts["chat"]
    assert prompts["anthropic"] == prompts["chat"]
    assert prompts["ollama"].replace("call_0_0", "call_1") == prompts["chat"].replace("call_0_0", "call_1")


# --------------------------------------------------------------------------------------------
# Requests recorded from Codex and Claude Code
# --------------------------------------------------------------------------------------------

def test_a_codex_shaped_request_is_answered(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("codex", Script([RECORDED_OUTPUT]))
    body = {"model": "gpt-5-codex", "instructions": "You are a coding agent.", "stream": True, "store": False,
            "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "medium", "summary": "auto"},
            "tool_choice": "auto", "parallel_tool_calls": False, "prompt_cache_key": "abc",
            "tools": _flat(TOOLS),
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": f"{key} What is the weather in Paris?"}]}]}
    # parallel_tool_calls false is sent upstream for the engine to enforce: name the engine
    with httpx.stream("POST", servers("--upstream-kind", "vllm").url + "/responses", json=body, timeout=TIMEOUT,
                      headers={"Authorization": f"Bearer {KEY}"}) as response:
        assert response.status_code == 200
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    calls = [event["item"] for event in events
             if event["type"] == "response.output_item.done" and event["item"]["type"] == "function_call"]
    message = streamparse.parse(RECORDED_OUTPUT, "hermes", TOOLS)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [(c.name, c.arguments)
                                                                        for c in message.tool_calls]


def test_a_claude_code_shaped_request_is_answered(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("claude-code", Script(["Easy.</think>\n\nIt is 18 C."]))  # the template opens reasoning
    body = {"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": False,
            "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
            "metadata": {"user_id": "user_abc"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{**tool, "cache_control": {"type": "ephemeral"}} for tool in _anthropic_tools(TOOLS)],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": f"{key} Weather?",
                                              "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "Call it.", "signature": "x"},
                                                  {"type": "redacted_thinking", "data": "opaque"},
                                                  {"type": "text", "text": "Checking."}]},
                {"role": "user", "content": "Go on."}]}
    response = httpx.post(servers().url + "/messages", json=body, timeout=TIMEOUT,
                          headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["type"] == "message" and answer["content"] == [
        {"type": "thinking", "thinking": "Easy.", "signature": ""}, {"type": "text", "text": "It is 18 C."}]
    assert answer["stop_reason"] == "end_turn"


# --------------------------------------------------------------------------------------------
# Bad input: a 4xx in the API's own shape, never a 500, never dropped
# --------------------------------------------------------------------------------------------

RESPONSES_BAD = [
    ({"input": 42}, "input"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"input": [{"type": "web_search_call"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": "hi", "store": True}, "store"),
    ({"input": "hi", "background": True}, "background"),
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "hi", "tools": [{"type": "custom", "name": "x"}]}, "tools[0].type"),
    ({"input": "hi", "tools": [{"type": "function", "name": 3}]}, "tools[0].name"),
    ({"input": "hi", "tool_choice": {"type": "file_search"}}, "tool_choice.type"),
    ({"input": "hi", "text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"input": "hi", "max_output_tokens": "many"}, "max_tokens"),
    ({"input": "hi", "frobnicate": 1}, "frobnicate"),
]


@pytest.mark.parametrize(("body", "param"), RESPONSES_BAD)
def test_bad_responses_requests_are_400s_naming_the_field(servers: Any, body: dict[str, Any], param: str) -> None:
    response = httpx.post(servers().url + "/responses", json={"model": "m", **body}, timeout=TIMEOUT,
                          headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]


ANTHROPIC_BAD = [
    ({"messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
    ({"max_tokens": 5, "messages": []}, "messages"),
    ({"max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]}, "messages[0].role"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content[0].type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b",
                                                                   "input": {}}]}]}, "messages[0].content[0].type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "mystery"}]}]},
     "messages[0].content[0].type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "x"}]},
     "tools[0].input_schema"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "web_search_20250305",
                                                                                   "name": "web_search"}]},
     "tools[0].type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "maybe"}},
     "tool_choice.type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "sometimes"}},
     "thinking.type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "stop_sequences": "END"}, "stop_sequences"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "mcp_servers": []}, "mcp_servers"),
]


@pytest.mark.parametrize(("body", "param"), ANTHROPIC_BAD)
def test_bad_messages_requests_are_400s_in_anthropics_shape(servers: Any, body: dict[str, Any], param: str) -> None:
    response = httpx.post(servers().url + "/messages", json={"model": "m", **body}, timeout=TIMEOUT,
                          headers={"x-api-key": KEY})
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    assert param in answer["error"]["message"]


OLLAMA_BAD = [
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "hi", "images": ["aGk="]}]}, "messages[0].images"),
    ({"messages": [{"role": "user", "content": "hi"}], "format": "yaml"}, "format"),
    ({"messages": [{"role": "user", "content": "hi"}], "options": {"warp": 9}}, "options.warp"),
    ({"messages": [{"role": "user", "content": "hi"}], "think": "very"}, "think"),
    ({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f",
                                                                                     "arguments": "{}"}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
]


@pytest.mark.parametrize(("body", "param"), OLLAMA_BAD)
def test_bad_ollama_requests_are_400s_in_ollamas_shape(servers: Any, body: dict[str, Any], param: str) -> None:
    response = httpx.post(servers().url.removesuffix("/v1") + "/api/chat", json={"model": "m", **body},
                          timeout=TIMEOUT, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400, response.text
    assert param in response.json()["error"]


def test_keys_and_their_refusals_in_each_apis_shape(servers: Any) -> None:
    server = servers()
    base = server.url.removesuffix("/v1")
    refused = httpx.post(base + "/v1/messages", json={}, headers={"x-api-key": "wrong"}, timeout=TIMEOUT)
    assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
    refused = httpx.post(base + "/api/chat", json={}, timeout=TIMEOUT)
    assert refused.status_code == 401 and "no API key" in refused.json()["error"]
    # x-api-key counts on the Anthropic paths only
    assert httpx.post(base + "/v1/responses", json={"input": "hi"}, headers={"x-api-key": KEY},
                      timeout=TIMEOUT).status_code == 401
    counted = httpx.post(base + "/v1/messages/count_tokens", headers={"x-api-key": KEY}, timeout=TIMEOUT,
                         json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert counted.status_code == 400 and "tokenizer.json" in counted.json()["error"]["message"]  # --text-prompt here


def test_ollamas_clients_can_start(servers: Any) -> None:
    client = _ollama(servers())
    assert [model.model for model in client.list().models] == ["hermes"]
    shown = client.show("hermes")
    assert "tools" in (shown.capabilities or []) and shown.template


# --------------------------------------------------------------------------------------------
# The writers: cheap paths equal to json.dumps, and no quadratic folding
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["plain", 'quote " and \\ backslash', "line\nbreak\ttab", "é ünïcode 雨 😀",
                                  "\x00\x1f control", "\u2028 separators \u2029"])
def test_a_responses_text_delta_is_the_bytes_json_dumps_writes(text: str) -> None:
    from streamparse.serve.apis.answer import Part
    from streamparse.serve.apis.responses import ResponseStream

    fast, slow = ResponseStream("m", {}), ResponseStream("m", {})
    for stream in (fast, slow):
        stream.start()
        stream.feed(Part("content", "a"))
    slow.open_pieces.append(text)
    expected = slow._event("response.output_text.delta", item_id=slow.open["id"], output_index=0, content_index=0,
                           delta=text, logprobs=[])
    fast.open["id"] = slow.open["id"]
    fast.sequence = slow.sequence - 1
    assert fast.feed(Part("content", text)) == expected


def test_a_long_streamed_answer_is_folded_in_linear_time() -> None:
    from streamparse.serve.apis.answer import Answer, Part
    from streamparse.serve.apis.responses import ResponseStream

    pieces = 200_000  # one character each: adding each to a string would copy ~20 GB in all
    stream = ResponseStream("m", {})
    stream.start()
    for _ in range(pieces):
        stream.feed(Part("content", "x"))
    stream.feed(Part("call", index=0, id="call_0", name="f"))
    for _ in range(pieces):
        stream.feed(Part("arguments", "y", index=0))
    end = stream.end()
    assert b'"text": "' + b"x" * pieces + b'"' in end and stream.answer.content == "x" * pieces
    assert stream.answer.calls[0].arguments == "y" * pieces
    folded = Answer()
    for _ in range(pieces):
        folded.add(Part("reasoning", "z"))
    assert folded.reasoning == "z" * pieces
