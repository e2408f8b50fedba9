"""Template capabilities on the 71 real templates, the agent loop through every one that renders calls,
the workarounds and refusals, and `streamparse render`'s answers to bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("jinja2")

from conftest import SHARED

from streamparse.serve.template import CapabilityError, ChatTemplate, TemplateRenderError

TEMPLATES = SHARED / "templates"
ALL = sorted(TEMPLATES.glob("*.jinja"))
pytestmark = pytest.mark.skipif(not ALL, reason="../shared/templates is not beside the checkout")


def _tokens() -> dict[str, dict[str, str]]:
    """The special tokens of each template's model, as ../shared/templates' render scripts record them."""
    if not ALL:
        return {}
    sys.path.insert(0, str(TEMPLATES))
    try:
        import render_cases
        import render_cases_more
        import render_cases_wave3
    finally:
        sys.path.remove(str(TEMPLATES))
    return {t["file"]: t["tokens"] for m in (render_cases, render_cases_more, render_cases_wave3) for t in m.TEMPLATES}


TOKENS = _tokens()


def _template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), TOKENS.get(name, {}), name)


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]
# What the OpenAI SDK sends back after a call: the assistant turn with content None, then the result.
AGENT_LOOP = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a1b2c3d4e", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "a1b2c3d4e", "content": "18 C, sunny"},
]


def test_capabilities_of_every_real_template() -> None:
    table = {path.name: _template(path.name).capabilities for path in ALL}
    assert len(table) == len(ALL) == 71  # every template in ../shared/templates
    assert not table["DeepSeek-R1.jinja"].tools and not table["DeepSeek-V3.1.jinja"].tools
    assert table["DeepSeek-R1.jinja"].tool_calls and table["DeepSeek-R1.jinja"].arguments == "text"
    gpt_oss = table["gpt-oss-120b.jinja"]
    assert not gpt_oss.later_system and gpt_oss.reasoning and "reasoning_effort" in gpt_oss.kwargs
    qwen3 = table["Qwen3-8B.jinja"]
    assert qwen3.system_role and qwen3.later_system and qwen3.tools and qwen3.tool_calls
    assert qwen3.parallel_tool_calls and qwen3.tool_results and qwen3.reasoning and qwen3.kwargs == {"enable_thinking"}
    assert not table["Llama-3.1-8B-Instruct.jinja"].parallel_tool_calls  # it raises on two calls
    assert "date_string" in table["Llama-3.1-8B-Instruct.jinja"].kwargs
    assert table["Mistral-Nemo-Instruct-2407.jinja"].tool_call_ids
    assert table["LFM2-8B-A1B.jinja"].null_content == "empty"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_the_agent_loop_renders_on_every_template_that_renders_calls(path: Path) -> None:
    template = _template(path.name)
    if not template.capabilities.tool_calls:
        with pytest.raises(CapabilityError) as refused:
            template.render(AGENT_LOOP, TOOLS)
        assert refused.value.capability in ("tool_calls", "tool_results")
        return
    prompt = template.render(AGENT_LOOP, TOOLS)
    assert "get_weather" in prompt and "Paris" in prompt
    assert "None" not in prompt  # content null never printed as Python's None
    if template.capabilities.tool_results:
        assert "18 C, sunny" in prompt


def test_tools_reach_a_template_that_never_prints_them_in_a_system_message() -> None:
    prompt = _template("DeepSeek-R1.jinja").render([{"role": "user", "content": "hi"}], TOOLS)
    assert prompt.startswith("<｜begin▁of▁sentence｜>You can call any of the following tools to satisfy the user's "
                             "requests: [")
    assert '"name": "get_weather"' in prompt


def test_a_later_system_message_gpt_oss_would_drop_is_refused() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                {"role": "system", "content": "now be terse"}, {"role": "user", "content": "c"}]
    with pytest.raises(CapabilityError) as refused:
        _template("gpt-oss-120b.jinja").render(messages)
    assert refused.value.capability == "later_system"
    assert "now be terse" in _template("Qwen3-8B.jinja").render(messages)


def test_earlier_reasoning_reaches_gpt_oss_under_every_alias() -> None:
    for key in ("reasoning", "reasoning_content", "thinking"):
        messages = [{"role": "user", "content": "q"},
                    {"role": "assistant", "content": None, key: "I should look it up",
                     "tool_calls": AGENT_LOOP[1]["tool_calls"]}, AGENT_LOOP[2]]
        assert "I should look it up" in _template("gpt-oss-120b.jinja").render(messages, TOOLS), key


def test_lfm25_generation_blocks_compile_and_a_nullable_type_is_a_render_error_not_a_crash() -> None:
    assert "<|im_start|>assistant" in _template("LFM2.5-8B-A1B.jinja").render([{"role": "user", "content": "hi"}])
    nullable = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": ["string", "null"]}}}}}]
    with pytest.raises(TemplateRenderError, match="recurses"):
        _template("Hermes-3-Llama-3.1-8B-tool_use.jinja").render([{"role": "user", "content": "hi"}], nullable)


def _render_cli(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamparse", "render", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def test_render_prints_the_prompt(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    done = _render_cli("--chat-template", str(TEMPLATES / "Qwen3-8B.jinja"), "--tools", str(tmp_path / "tools.json"),
                       "--kwargs", '{"enable_thinking": false}', stdin=json.dumps(AGENT_LOOP))
    assert done.returncode == 0, done.stderr
    assert done.stdout == _template("Qwen3-8B.jinja").render(AGENT_LOOP, TOOLS, enable_thinking=False)


@pytest.mark.parametrize(("args", "stdin", "says"), [
    ((), "not json", "stdin is not JSON"),
    ((), '{"role": "user"}', "JSON list of message objects"),
    ((), "[]", "JSON list of message objects"),
    (("--kwargs", "[1]"), '[{"role": "user", "content": "x"}]', "--kwargs must be a JSON object"),
    (("--tools", "/nonexistent/tools.json"), '[{"role": "user", "content": "x"}]', "cannot read --tools"),
    (("--special-token", "bos"), '[{"role": "user", "content": "x"}]', "NAME=TEXT"),
])
def test_render_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], stdin: str, says: str) -> None:
    done = _render_cli("--chat-template", str(TEMPLATES / "Qwen3-8B.jinja"), *args, stdin=stdin)
    assert done.returncode == 2 and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_render_unreadable_template_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "broken.jinja").write_text("{% if %}")
    for path in (tmp_path / "missing.jinja", tmp_path / "broken.jinja"):
        done = _render_cli("--chat-template", str(path), stdin='[{"role": "user", "content": "x"}]')
        assert done.returncode == 2 and "cannot load --chat-template" in done.stderr
        assert "Traceback" not in done.stderr


def test_serve_refuses_a_template_that_does_not_compile_at_start(tmp_path: Path) -> None:
    (tmp_path / "broken.jinja").write_text("{% if %}<tool_call>")
    done = subprocess.run([sys.executable, "-m", "streamparse", "serve", "--upstream", "http://127.0.0.1:9/v1",
                           "--chat-template", str(tmp_path / "broken.jinja"), "--format", "hermes"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "does not compile" in done.stderr and "Traceback" not in done.stderr


def test_a_bare_template_is_probed_as_if_its_special_tokens_were_given_and_says_which_are_missing() -> None:
    # Mistral Nemo joins eos_token to text: without tokenizer_config.json beside it every probe used to
    # fail, and the capabilities said it renders no tool calls at all.
    bare = ChatTemplate(TEMPLATES / "Mistral-Nemo-Instruct-2407.jinja")
    assert bare.missing_special_tokens == {"bos_token", "eos_token"}
    assert bare.capabilities.tool_calls and bare.capabilities.tools
    given = replace(bare, special_tokens={"bos_token": "<s>", "eos_token": "</s>"})
    assert not given.missing_special_tokens
    assert given.capabilities == bare.capabilities
