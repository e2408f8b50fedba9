"""`streamparse serve` has the upstream enforce `tool_choice`, `parallel_tool_calls: false`, strict tools
and `response_format`: the real server process, the real OpenAI SDK, and a recording upstream
(tests/upstream.py) per engine kind. Each test checks the exact constraint sent (the grammar
`grammar_for` / `grammar_triggers` gives for those tools, compiled by xgrammar or llguidance and
accepting the upstream's canned output) and that the forced call comes back through the SDK as a call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("xgrammar")
pytest.importorskip("llguidance")

from grammar_engines import gbnf_accepts, structural_tag_accepts  # noqa: E402
from test_server import HERMES_TEMPLATE, HERMES_TOOLS, TIMEOUT, Server  # noqa: E402
from upstream import Script, Upstream, free_port  # noqa: E402

import streamparse  # noqa: E402
from streamparse.constrain import GrammarUnsupported, grammar_triggers  # noqa: E402

KINDS = ("vllm", "sglang", "llama.cpp")
OWNERS = {"vllm": "vllm", "sglang": "sglang", "llama.cpp": "llamacpp"}
CONSTRAINT_KEYS = ("structured_outputs", "response_format", "json_schema", "grammar", "grammar_lazy",
                   "grammar_triggers", "preserved_tokens")
# The Hermes test template's prompt ends inside `<think>`: each output closes that reasoning first.
THOUGHT = "The user asks; a call answers it.\n</think>\n\n"
TIME_CALL = '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}\n</tool_call>'
WEATHER_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'
STRICT_TOOLS = [{**tool, "function": {**tool["function"], "strict": True}} if tool["function"]["name"] == "get_time"
                else tool for tool in HERMES_TOOLS]


def named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def allowed(mode: str, *names: str) -> dict[str, Any]:
    return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": [named(name) for name in names]}}


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, Upstream]]:
    """A recording upstream per engine kind, each naming itself in /v1/models as that engine does."""
    running = {kind: Upstream(OWNERS[kind]).start() for kind in KINDS}
    yield running
    for upstream in running.values():
        upstream.stop()


@pytest.fixture(scope="module")
def servers() -> Iterator[Any]:
    """`servers(upstream_url, template, *flags)`: a running server, started once per module for those arguments."""
    running: dict[tuple[Any, ...], Server] = {}

    def get(upstream_url: str, template: Path = HERMES_TEMPLATE, *flags: str) -> Server:
        key = (upstream_url, template, flags)
        if key not in running:
            running[key] = Server(upstream_url, template, *flags)
        return running[key]

    yield get
    for server in running.values():
        server.stop()


def constraint_sent(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in CONSTRAINT_KEYS if key in body}


def expected_fields(kind: str, tools: list[dict[str, Any]], choice: Any, parallel: bool = True,
                    forced_open: bool = True) -> dict[str, Any]:
    """The fields each engine is sent, from the public grammar API for the same tools and choice."""
    shape = {"tool_choice": choice, "parallel_tool_calls": parallel, "thinking_forced_open": forced_open}
    if kind == "llama.cpp":
        return grammar_triggers("hermes", tools, **shape)
    tag = streamparse.grammar_for("hermes", tools, syntax="structural_tag", **shape)
    if kind == "vllm":
        return {"structured_outputs": {"structural_tag": json.dumps(tag, ensure_ascii=False)}}
    return {"response_format": tag}


def accepts(kind: str, fields: dict[str, Any], output: str) -> bool:
    """Whether the grammar sent, compiled by the engine's library, takes `output` whole (a lazy
    grammar from its trigger on)."""
    if kind == "llama.cpp":
        trigger = fields["grammar_triggers"][0]["value"] if fields["grammar_lazy"] else output[:0]
        return gbnf_accepts(fields["grammar"], output[output.index(trigger):])
    tag = json.loads(fields["structured_outputs"]["structural_tag"]) if kind == "vllm" else fields["response_format"]
    return structural_tag_accepts(tag, output)


CHOICES = [
    # (id, tools, tool_choice, parallel_tool_calls, canned output, the call's name)
    ("required", HERMES_TOOLS, "required", None, TIME_CALL, "get_time"),
    ("named", HERMES_TOOLS, named("get_time"), None, TIME_CALL, "get_time"),
    ("allowed-required", HERMES_TOOLS, allowed("required", "get_weather", "get_time"), None, WEATHER_CALL,
     "get_weather"),
    ("allowed-auto", HERMES_TOOLS, allowed("auto", "get_time"), None, TIME_CALL, "get_time"),
    ("parallel-false", HERMES_TOOLS, "auto", False, WEATHER_CALL, "get_weather"),
    ("strict-auto", STRICT_TOOLS, "auto", None, TIME_CALL, "get_time"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("case", "tools", "choice", "parallel", "output", "name"), CHOICES,
                         ids=[case[0] for case in CHOICES])
def test_each_tool_choice_is_sent_as_the_engines_constraint(servers: Any, upstream: Upstream, kind: str, case: str,
                                                            tools: Any, choice: Any, parallel: bool | None,
                                                            output: str, name: str) -> None:
    output = THOUGHT + output
    key = upstream.script(f"{kind}-{case}", Script([output]))
    server = servers(upstream.url, HERMES_TEMPLATE, "--upstream-kind", kind)
    extra = {} if parallel is None else {"parallel_tool_calls": parallel}
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} what time is it?"}], tools=tools,
        tool_choice=choice, **extra)
    sent = constraint_sent(upstream.last(key[2:-2]))
    fields = expected_fields(kind, tools, choice, parallel is not False)
    assert sent == fields
    assert accepts(kind, fields, output)
    assert upstream.models_asked == 0  # --upstream-kind named the engine: nothing was asked
    message = answer.choices[0].message
    assert answer.choices[0].finish_reason == "tool_calls"
    assert [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls] == [
        (name, json.loads(output.split("\n")[-2])["arguments"])]


@pytest.mark.parametrize("kind", KINDS)
def test_a_streamed_forced_call_comes_back_as_a_call(servers: Any, upstream: Upstream, kind: str) -> None:
    key = upstream.script(f"stream-{kind}", Script([THOUGHT + TIME_CALL]))
    server = servers(upstream.url, HERMES_TEMPLATE, "--upstream-kind", kind)
    stream = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} time?"}], tools=HERMES_TOOLS,
        tool_choice=named("get_time"), stream=True)
    names, arguments, finish = "", "", None
    for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                names += call.function.name or ""
                arguments += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert (names, json.loads(arguments), finish) == ("get_time", {"timezone": "Europe/Paris"}, "tool_calls")
    assert constraint_sent(upstream.last(f"stream-{kind}")) == expected_fields(kind, HERMES_TOOLS, named("get_time"))


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
RESPONSE_FORMATS = {
    "json_object": ({"type": "json_object"}, {
        "vllm": {"structured_outputs": {"json_object": True}},
        "sglang": {"json_schema": '{"type": "object"}'},
        "llama.cpp": {"json_schema": {"type": "object"}}}),
    "json_schema": ({"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}}, {
        "vllm": {"structured_outputs": {"json": SCHEMA}},
        "sglang": {"json_schema": json.dumps(SCHEMA, sort_keys=True)},
        "llama.cpp": {"json_schema": SCHEMA}}),
}


PLAIN_TEMPLATE = ("{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>"
                  "{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}<|start_header_id|>assistant"
                  "<|end_header_id|>\n\n")
ANSWER = '{"city": "Paris"}'


@pytest.fixture(scope="module")
def plain_template(tmp_path_factory: Any) -> Path:
    """A template of a format without reasoning (llama3_json), for the engines' own JSON modes."""
    path = tmp_path_factory.mktemp("plain") / "plain.jinja"
    path.write_text(PLAIN_TEMPLATE)
    return path


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", sorted(RESPONSE_FORMATS))
def test_response_format_is_the_engines_json_mode_for_a_format_without_reasoning(
        servers: Any, upstream: Upstream, plain_template: Path, kind: str, shape: str) -> None:
    import xgrammar

    response_format, fields = RESPONSE_FORMATS[shape]
    key = upstream.script(f"rf-{shape}-{kind}", Script([ANSWER]))
    server = servers(upstream.url, plain_template, "--upstream-kind", kind, "--format", "llama3_json")
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} where?"}], response_format=response_format)
    assert constraint_sent(upstream.last(f"rf-{shape}-{kind}")) == fields[kind]
    xgrammar.Grammar.from_json_schema(json.dumps(SCHEMA if shape == "json_schema" else {"type": "object"}))
    assert (answer.choices[0].message.content, answer.choices[0].message.tool_calls) == (ANSWER, None)


@pytest.mark.parametrize("kind", KINDS)
def test_response_format_after_forced_open_reasoning_is_a_grammar_of_both(servers: Any, upstream: Upstream,
                                                                          kind: str) -> None:
    """The Hermes test prompt ends inside <think>: a bare JSON constraint would make the model's JSON
    the reasoning; the grammar sent has the reasoning close first, then the JSON answer."""
    response_format = RESPONSE_FORMATS["json_schema"][0]
    key = upstream.script(f"rf-reasoning-{kind}", Script([THOUGHT + ANSWER]))
    server = servers(upstream.url, HERMES_TEMPLATE, "--upstream-kind", kind)
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} where?"}], response_format=response_format)
    sent = constraint_sent(upstream.last(f"rf-reasoning-{kind}"))
    if kind == "llama.cpp":
        assert (sent["grammar_lazy"], sent["grammar_triggers"]) == (False, [])
        assert sent["preserved_tokens"] == grammar_triggers("hermes")["preserved_tokens"]
    assert accepts(kind, sent, THOUGHT + ANSWER)
    assert not accepts(kind, sent, ANSWER)  # the opened reasoning must close first
    assert not accepts(kind, sent, THOUGHT + '{"town": "Paris"}')  # the schema holds: city is required
    message = answer.choices[0].message
    assert (message.content, message.model_extra.get("reasoning_content")) == (ANSWER, THOUGHT.partition("\n")[0])


def test_response_format_text_and_plain_auto_send_no_constraint(servers: Any, upstream: Upstream) -> None:
    server = servers(upstream.url, HERMES_TEMPLATE, "--upstream-kind", "vllm")
    for i, extra in enumerate(({"response_format": {"type": "text"}}, {"tools": HERMES_TOOLS, "tool_choice": "auto"},
                               {"tools": HERMES_TOOLS, "tool_choice": "none"}, {"tools": HERMES_TOOLS})):
        key = upstream.script(f"free-{i}", Script([THOUGHT + "Hello."]))
        answer = server.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"{key} hi"}], **extra)
        assert answer.choices[0].message.content == "Hello."
        assert constraint_sent(upstream.last(f"free-{i}")) == {}


@pytest.mark.parametrize("kind", KINDS)
def test_the_engine_is_found_from_its_models_list_once(servers: Any, engines: dict[str, Upstream], kind: str) -> None:
    engine = engines[kind]
    server = servers(engine.url)
    for i in range(2):
        key = engine.script(f"found-{i}", Script([THOUGHT + TIME_CALL]))
        answer = server.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"{key} time?"}], tools=HERMES_TOOLS,
            tool_choice="required")
        assert answer.choices[0].message.tool_calls[0].function.name == "get_time"
        assert constraint_sent(engine.last(f"found-{i}")) == expected_fields(kind, HERMES_TOOLS, "required")
    assert engine.models_asked == 1  # the answer is kept


def test_an_unknown_engine_is_a_400_naming_the_flag(servers: Any, upstream: Upstream) -> None:
    server = servers(upstream.url)  # this upstream's /v1/models is a 404
    key = upstream.script("unknown-engine", Script([THOUGHT + TIME_CALL]))
    with pytest.raises(openai.BadRequestError, match="--upstream-kind vllm"):
        server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} x"}],
                                                tools=HERMES_TOOLS, tool_choice="required")
    assert "unknown-engine" not in upstream.requests  # nothing was sent unconstrained
    plain = server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": f"{key} x"}],
                                                    tools=HERMES_TOOLS)
    assert plain.choices[0].message.tool_calls[0].function.name == "get_time"  # auto needs no engine


def test_an_unreachable_upstream_asked_for_its_engine_is_a_502(servers: Any) -> None:
    server = servers(f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    answer = httpx.post(server.url + "/chat/completions", timeout=TIMEOUT, json={
        "messages": [{"role": "user", "content": "x"}], "tools": HERMES_TOOLS, "tool_choice": "required"})
    assert answer.status_code == 502
    assert answer.json()["error"]["type"] == "upstream_error" and "/v1/models" in answer.json()["error"]["message"]


def test_a_prompt_not_ending_inside_reasoning_gets_the_grammar_without_forced_reasoning(
        servers: Any, upstream: Upstream, tmp_path: Path) -> None:
    template = tmp_path / "no_thinking.jinja"  # as the Hermes test template, without the opened <think>
    template.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                        "{% if tools %}{{ tools | tojson }}{% endif %}<|im_start|>assistant\n")
    key = upstream.script("not-forced", Script([TIME_CALL]))
    server = servers(upstream.url, template, "--upstream-kind", "vllm", "--format", "hermes")
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} time?"}], tools=HERMES_TOOLS, tool_choice="required")
    fields = expected_fields("vllm", HERMES_TOOLS, "required", forced_open=False)
    assert constraint_sent(upstream.last("not-forced")) == fields
    assert fields != expected_fields("vllm", HERMES_TOOLS, "required", forced_open=True)
    assert accepts("vllm", fields, TIME_CALL)
    assert not accepts("vllm", expected_fields("vllm", HERMES_TOOLS, "required", forced_open=True), TIME_CALL)
    message = answer.choices[0].message
    assert message.content is None and message.tool_calls[0].function.name == "get_time"


def test_required_with_no_call_in_the_answer_returns_what_was_parsed(servers: Any, upstream: Upstream) -> None:
    key = upstream.script("required-no-call", Script([THOUGHT + "I would rather not."]))
    server = servers(upstream.url, HERMES_TEMPLATE, "--upstream-kind", "vllm")
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} x"}], tools=HERMES_TOOLS, tool_choice="required")
    assert answer.choices[0].message.content == "I would rather not."
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].finish_reason == "stop"


def test_a_choice_the_formats_grammar_cannot_express_is_a_400(servers: Any, upstream: Upstream,
                                                              tmp_path: Path) -> None:
    spaced = [{"type": "function", "function": {"name": "get time", "parameters": {"type": "object"}}}]
    with pytest.raises(GrammarUnsupported) as unsupported:  # a harmony header cannot hold a space in a name
        streamparse.grammar_for("gpt_oss", spaced, tool_choice="required")
    template = tmp_path / "harmony.jinja"
    template.write_text("{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
                        "{% if tools %}{{ tools | tojson }}{% endif %}<|start|>assistant")
    key = upstream.script("unsupported", Script(["x"]))
    server = servers(upstream.url, template, "--upstream-kind", "vllm", "--format", "gpt_oss")
    answer = httpx.post(server.url + "/chat/completions", timeout=TIMEOUT, json={
        "messages": [{"role": "user", "content": f"{key} x"}], "tools": spaced, "tool_choice": "required"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "tool_choice" and "cannot be enforced for the gpt_oss format" in error["message"]
    assert str(unsupported.value) in error["message"]
    assert "unsupported" not in upstream.requests


def test_the_fields_are_built_once_per_engine_tools_and_choice() -> None:
    from streamparse.serve.constraints import constraint_of, upstream_fields
    from streamparse.validation import compiled_tools

    body = {"messages": [], "tools": HERMES_TOOLS, "tool_choice": named("get_time")}
    first = constraint_of(body, compiled_tools(json.loads(json.dumps(HERMES_TOOLS))), True)
    again = constraint_of(dict(body), compiled_tools(json.loads(json.dumps(HERMES_TOOLS))), True)
    assert first is not None and first == again
    assert upstream_fields("vllm", "hermes", first) is upstream_fields("vllm", "hermes", again)
    other = constraint_of({**body, "tool_choice": "required"}, compiled_tools(HERMES_TOOLS), True)
    assert other is not None and upstream_fields("vllm", "hermes", other) != upstream_fields("vllm", "hermes", first)



def test_an_answer_held_to_a_structural_tag_is_read_as_text() -> None:
    """Every grammar sent matches text (a model may spell a delimiter with ordinary tokens and meet it),
    so what an engine wrote under one is read as text; a request that sent none keeps the reading
    configured."""
    from streamparse.serve.constraints import UPSTREAM_KINDS, constraint_of, reads_as_text
    from streamparse.validation import compiled_tools

    forced = constraint_of({"tools": HERMES_TOOLS, "tool_choice": "required"}, compiled_tools(HERMES_TOOLS), False)
    json_answer = constraint_of({"response_format": {"type": "json_object"}}, None, False)
    assert all(reads_as_text(kind, forced) and reads_as_text(kind, json_answer) for kind in UPSTREAM_KINDS)
    assert not reads_as_text("vllm", constraint_of({"tools": HERMES_TOOLS}, compiled_tools(HERMES_TOOLS), False))


BAD = [
    ("unknown named function", {"tools": HERMES_TOOLS, "tool_choice": named("get_stock")},
     "tool_choice.function.name", "'get_stock', which is not among the request's tools"),
    ("allowed_tools naming an unknown tool",
     {"tools": HERMES_TOOLS, "tool_choice": allowed("auto", "get_time", "nope")},
     "tool_choice.allowed_tools.tools[1].function.name", "'nope', which is not among"),
    ("named function without tools", {"tool_choice": named("get_time")}, "tool_choice.function.name", "none were sent"),
    ("required without tools", {"tool_choice": "required"}, "tool_choice", "needs tools"),
    ("tool_choice an unknown word", {"tools": HERMES_TOOLS, "tool_choice": "always"}, "tool_choice",
     "'auto', 'none', 'required'"),
    ("tool_choice a number", {"tools": HERMES_TOOLS, "tool_choice": 5}, "tool_choice", "'auto', 'none', 'required'"),
    ("named function without a name", {"tools": HERMES_TOOLS, "tool_choice": {"type": "function"}}, "tool_choice",
     "must look like"),
    ("named function of another type", {"tools": HERMES_TOOLS, "tool_choice": {
        "type": "custom", "function": {"name": "get_time"}}}, "tool_choice", "must look like"),
    ("allowed_tools with an unknown mode", {"tools": HERMES_TOOLS, "tool_choice": {
        "type": "allowed_tools", "allowed_tools": {"mode": "sometimes", "tools": [named("get_time")]}}},
     "tool_choice", "'auto' or 'required'"),
    ("allowed_tools with no tools", {"tools": HERMES_TOOLS, "tool_choice": {
        "type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}}, "tool_choice", "must look like"),
    ("allowed_tools entry a string", {"tools": HERMES_TOOLS, "tool_choice": {
        "type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": ["get_time"]}}},
     "tool_choice.allowed_tools.tools[0]", "must look like"),
    ("response_format a string", {"response_format": "json"}, "response_format", "an object"),
    ("response_format of an unknown type", {"response_format": {"type": "yaml"}}, "response_format.type",
     "'text', 'json_object' or 'json_schema'"),
    ("json_schema missing", {"response_format": {"type": "json_schema"}}, "response_format.json_schema", "an object"),
    ("json_schema without schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema", "send the schema"),
    ("json_schema schema a string", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": "object"}}}, "response_format.json_schema.schema", "JSON Schema object"),
    ("json_schema strict a string", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": SCHEMA, "strict": "yes"}}}, "response_format.json_schema.strict", "true or false"),
    ("response_format with tools offered", {"tools": HERMES_TOOLS, "response_format": {"type": "json_object"}},
     "response_format", "one constraint per request"),
]


@pytest.mark.parametrize(("extra", "param", "words"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_tool_choice_and_response_format_are_400s(servers: Any, upstream: Upstream, extra: dict[str, Any],
                                                      param: str, words: str) -> None:
    server = servers(upstream.url, HERMES_TEMPLATE, "--upstream-kind", "vllm")
    key = upstream.script("bad", Script(["x"]))
    answer = httpx.post(server.url + "/chat/completions", timeout=TIMEOUT,
                        json={"messages": [{"role": "user", "content": f"{key} x"}], **extra})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["type"]) == (param, "invalid_request_error")
    assert words in error["message"]
    assert "bad" not in upstream.requests
