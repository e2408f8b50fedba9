"""`streamparse.serve.template`: HF `apply_chat_template` rendering, and loading a template from a file,
a tokenizer_config.json or a model directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2")

from conftest import CASES, FIXTURES

from streamparse.serve import template as chat_template
from streamparse.serve.template import ChatTemplate, TemplateRenderError, load_chat_template

TEMPLATES = CASES.parent
HERMES = FIXTURES / "hermes" / "chat_template.jinja"


def test_a_jinja_file_renders_with_the_generation_prompt() -> None:
    template = load_chat_template(HERMES)
    prompt = template.render([{"role": "user", "content": "Hi"}])
    assert prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert template.render([{"role": "user", "content": "Hi"}], add_generation_prompt=False).endswith("<|im_end|>\n")


def test_hf_conventions() -> None:
    source = ("{{ bos_token }}{{ {'b': '<a&b>', 'a': 'é'} | tojson }}"
              "|{% for m in messages %}{% for c in m.tool_calls or [] %}"
              "{{ c.function.name }}{{ c.function.arguments.x }}"
              "{% endfor %}{% endfor %}"
              "|{{ strftime_now('%Y') | length }}|{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}"
              "{{ m.content }}{% endfor %}\n  {% if add_generation_prompt %}GEN{% endif %}")
    template = ChatTemplate(source, {"bos_token": "<s>"})
    messages = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"x": 7}'}}]},
        {"role": "user", "content": [{"type": "text", "text": "part1 "}, {"type": "text", "text": "part2"}]}]
    # tojson keeps key order and does not HTML-escape; arguments given as JSON text reach the template as an
    # object (as vLLM does); text parts are joined; trim_blocks/lstrip_blocks; loopcontrols
    assert template.render(messages) == '<s>{"b": "<a&b>", "a": "é"}|f7|4|part1 part2GEN'


def test_a_template_that_raises_or_breaks_the_sandbox_is_a_render_error() -> None:
    with pytest.raises(TemplateRenderError, match="roles must alternate"):
        ChatTemplate("{{ raise_exception('roles must alternate') }}").render([{"role": "user", "content": "x"}])
    with pytest.raises(TemplateRenderError):
        ChatTemplate("{{ ''.__class__.__mro__[1].__subclasses__() }}").render([{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="does not compile"):
        ChatTemplate("{% if %}").render([])


def test_tokenizer_config_and_model_directories(tmp_path: Path) -> None:
    config = {"bos_token": {"content": "<|begin|>", "lstrip": False}, "eos_token": "<|end|>",
              "chat_template": [{"name": "default", "template": "D{{ bos_token }}{{ eos_token }}"},
                                {"name": "tool_use",
                                 "template": "T{% for t in tools %}{{ t.function.name }}{% endfor %}"}]}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    for source in (tmp_path / "tokenizer_config.json", tmp_path):
        template = load_chat_template(source)
        assert template.special_tokens == {"bos_token": "<|begin|>", "eos_token": "<|end|>"}
        assert template.render([{"role": "user", "content": "x"}]) == "D<|begin|><|end|>"
        tools = [{"type": "function", "function": {"name": "f"}}]
        assert template.render([{"role": "user", "content": "x"}], tools=tools) == "Tf"
    # a chat_template.jinja in the directory wins, as in transformers; special tokens still from the config
    (tmp_path / "chat_template.jinja").write_text("J{{ eos_token }}")
    assert load_chat_template(tmp_path).render([]) == "J<|end|>"
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="no chat_template"):
        load_chat_template(tmp_path / "empty")
    (tmp_path / "plain.json").write_text("{}")
    with pytest.raises(ValueError, match="has no 'chat_template'"):
        load_chat_template(tmp_path / "plain.json")


@pytest.mark.skipif(not CASES.is_file(), reason="../shared/templates is not beside the checkout")
def test_renders_every_real_template_as_the_reference_renderer_does(monkeypatch: Any) -> None:
    sys.path.insert(0, str(TEMPLATES))
    try:
        import render_cases
    finally:
        sys.path.remove(str(TEMPLATES))
    monkeypatch.setattr(chat_template, "_strftime_now", render_cases._strftime_now)
    env = render_cases.make_env()
    checked = 0
    for tpl in render_cases.TEMPLATES:
        if not (TEMPLATES / tpl["file"]).is_file():
            continue
        reference = render_cases.Renderer(env, tpl)
        ours = ChatTemplate((TEMPLATES / tpl["file"]).read_text(), tpl["tokens"])
        tools = render_cases.tools_for_case(tpl, {"tool_calls": []})
        for variant in tpl.get("variants", [{}]):
            for kind in ("first", "after_tool"):
                messages = render_cases.history_messages(tpl, kind, tpl.get("empty_content", False))
                try:
                    expected = reference.render(messages, tools, True, dict(variant))
                except Exception:
                    continue
                if tools and not ours.capabilities.tools:
                    continue  # ours gives the tool list in a system message (docs/server.md); the reference drops it
                assert ours.render(messages, tools, True, **variant) == expected, tpl["file"]
                checked += 1
    assert checked >= 40
