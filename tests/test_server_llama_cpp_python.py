"""`--upstream-kind llama-cpp-python`: what the proxy sends llama-cpp-python's `llama_cpp.server`, whose
`/v1/completions` takes `grammar` (GBNF, applied from the first token) and ignores lazy-grammar fields
and `json_schema` (tests/test_engine_llama_cpp.py runs the real engine). A recording upstream
(tests/upstream.py): each constraint goes as one whole-answer grammar that takes the canned answer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("llguidance")
pytest.importorskip("xgrammar")

from conftest import ROOT
from grammar_engines import gbnf_accepts
from test_server import HERMES_TEMPLATE, Server
from test_server_constrain import ANSWER, CHOICES, CONSTRAINT_KEYS, RESPONSE_FORMATS, THOUGHT
from upstream import Script, Upstream

import streamparse

KIND = "llama-cpp-python"


@pytest.fixture(scope="module")
def server(upstream: Upstream) -> Iterator[Server]:
    running = Server(upstream.url, HERMES_TEMPLATE, "--upstream-kind", KIND)  # no tokenizer: --text-prompt
    yield running
    running.stop()


def sent(upstream: Upstream, key: str) -> dict[str, Any]:
    body = upstream.last(key)
    assert isinstance(body["prompt"], str)  # llama_cpp.server takes no token ids
    return {name: body[name] for name in CONSTRAINT_KEYS if name in body}


@pytest.mark.parametrize(("case", "tools", "choice", "parallel", "output", "name"), CHOICES,
                         ids=[case[0] for case in CHOICES])
def test_each_tool_choice_is_one_whole_answer_grammar(server: Server, upstream: Upstream, case: str, tools: Any,
                                                      choice: Any, parallel: bool | None, output: str,
                                                      name: str) -> None:
    output = THOUGHT + output
    key = upstream.script(f"lcp-{case}", Script([output]))
    extra = {} if parallel is None else {"parallel_tool_calls": parallel}
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} what time is it?"}], tools=tools,
        tool_choice=choice, **extra)
    grammar = streamparse.grammar_for("hermes", tools, syntax="gbnf", tool_choice=choice,
                                      parallel_tool_calls=parallel is not False, thinking_forced_open=True)
    assert sent(upstream, f"lcp-{case}") == {"grammar": grammar}
    assert gbnf_accepts(grammar, output)  # from the first token: the reasoning the prompt opened, then the call
    if "auto" in (choice, choice.get("allowed_tools", {}).get("mode") if isinstance(choice, dict) else None):
        # the free text of "auto" is in the grammar too
        assert gbnf_accepts(grammar, THOUGHT + "It is noon.")
    else:
        assert not gbnf_accepts(grammar, THOUGHT + "It is noon.")
    calls = answer.choices[0].message.tool_calls
    assert [call.function.name for call in calls] == [name]


@pytest.mark.parametrize("shape", sorted(RESPONSE_FORMATS))
def test_response_format_is_a_grammar_of_the_reasoning_and_the_json(server: Server, upstream: Upstream,
                                                                     shape: str) -> None:
    key = upstream.script(f"lcp-rf-{shape}", Script([THOUGHT + ANSWER]))
    answer = server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"{key} where?"}],
        response_format=RESPONSE_FORMATS[shape][0])
    fields = sent(upstream, f"lcp-rf-{shape}")
    assert list(fields) == ["grammar"]
    assert gbnf_accepts(fields["grammar"], THOUGHT + ANSWER)
    assert not gbnf_accepts(fields["grammar"], ANSWER)  # the opened reasoning closes first
    assert not gbnf_accepts(fields["grammar"], THOUGHT + '{"city": "Paris"} and more')
    assert answer.choices[0].message.content == ANSWER


def test_without_text_prompt_serve_says_why(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "chat_template.jinja").write_text(HERMES_TEMPLATE.read_text())
    done = subprocess.run([sys.executable, "-m", "streamparse", "serve", "--upstream", "http://127.0.0.1:9/v1",
                           "--chat-template", str(tmp_path), "--upstream-kind", KIND], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--text-prompt" in done.stderr and "refuses token ids" in done.stderr
