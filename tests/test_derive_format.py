"""`streamparse.derive_format`: a declaration derived from a chat template alone, checked leave-one-out on
every stored template that has real renders (`../shared/templates/cases*.json`): derived without
looking at the declared formats, it must parse that template's cases as `expected` says.

`EXACT` states, per template, how many of its cases the derived declaration reads exactly (a regression
record, not a target: raise a number when the derivation improves); a template whose layout cannot be
derived is listed with 0 and the part `derive_format` names. The declared formats appear here only as
a check: a derived declaration never accepts a call the declared format rejects."""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED
from grammar_engines import gbnf_accepts, lark_accepts, structural_tag_accepts

import streamparse
from streamparse.constrain import grammar_for
from streamparse.derive import Derivation, DeriveError, derive
from streamparse.spec import FormatSpec

TEMPLATES = SHARED / "templates"
CASE_FILES = ("cases.json", "cases_new_families.json", "cases_more.json", "cases_wave3.json", "cases_wave4.json")
CASE_FORMATS = {"deepseek_v3_2_dsml": "deepseek_v3_2", "mistral_nemo": "mistral", "mistral_call_id": "mistral",
                "mistral_args": "mistral"}


def _cases() -> dict[str, list[dict[str, Any]]]:
    by_template: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name in CASE_FILES:
        if (TEMPLATES / name).exists():
            for case in json.loads((TEMPLATES / name).read_text(encoding="utf-8")):
                by_template[case["template"]].append(case)
    return dict(sorted(by_template.items()))


CASES = _cases()

# Exact cases per template (of all its cases), and for the templates whose layout is not derived, the
# part `derive_format` names.
EXACT: dict[str, int] = {
    "Apertus-8B-Instruct-2509.jinja": 7,
    "Apriel-1.5-15b-Thinker.jinja": 8,
    "Apriel-1.5-unsloth.jinja": 8,
    "Apriel-1.6-15b-Thinker-fixed.jinja": 4,
    "Cohere2MoE.jinja": 2,
    "DeepSeek-R1-0528.jinja": 8,
    "DeepSeek-R1-2025-01-20.jinja": 8,
    "DeepSeek-R1.jinja": 4,
    "DeepSeek-V3-0324.jinja": 8,
    "DeepSeek-V3.1.jinja": 8,
    "DeepSeek-V3.2-llamacpp.jinja": 11,
    "DeepSeek-V4.jinja": 18,
    "Devstral-Small-2507-unsloth.jinja": 8,
    "EXAONE-4.0-32B.jinja": 19,
    "GLM-4.5.jinja": 20,
    "GLM-4.6.jinja": 20,
    "GLM-4.7.jinja": 12,
    "GigaChat3-10B-A1.8B.jinja": 7,
    "GigaChat3.1-10B-A1.8B.jinja": 7,
    "GigaChat3.5.jinja": 15,
    "Hermes-3-Llama-3.1-8B-tool_use.jinja": 7,
    "Hy3-preview.jinja": 20,
    "K-EXAONE-236B-A23B.jinja": 20,
    "LFM2-8B-A1B.jinja": 8,
    "Llama-3.1-8B-Instruct.jinja": 6,
    "Llama-3.2-3B-Instruct.jinja": 6,
    "Magistral-Small-2509-unsloth.jinja": 12,
    "MiMo-VL.jinja": 8,
    "MiniCPM5-1B.jinja": 15,
    "MiniMax-M2.jinja": 4,
    "Ministral-3-14B-Reasoning-2512.jinja": 12,
    "Mistral-Nemo-Instruct-2407.jinja": 7,
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": 7,
    "NVIDIA-Nemotron-3-Nano-30B-A3B.jinja": 12,
    "NVIDIA-Nemotron-Nano-9B-v2.jinja": 2,
    "QwQ-32B.jinja": 4,
    "Qwen2.5-7B-Instruct.jinja": 8,
    "Qwen3-0.6B.jinja": 20,
    "Qwen3-8B.jinja": 20,
    "Qwen3-Coder-30B-A3B-Instruct-2025-07-31.jinja": 8,
    "Qwen3-Coder-30B-A3B-Instruct.jinja": 8,
    "Qwen3.6.jinja": 20,
    "Qwen3.8.jinja": 20,
    "Reka-Edge.jinja": 20,
    "Seed-OSS-36B-Instruct.jinja": 12,
    "Step-3.5-Flash.jinja": 12,
    "StepFun3.7-Flash.jinja": 12,
    "c4ai-command-r7b-12-2024-tool_use.jinja": 3,
    "functionary-medium-v3.1.jinja": 8,
    "gpt-oss-120b.jinja": 9,
    "granite-4.0-llamacpp.jinja": 8,
}
NOT_DERIVED: dict[str, str] = {}


@cache
def derived(template: str) -> Derivation | DeriveError:
    try:
        return derive(TEMPLATES / template)
    except DeriveError as error:
        return error


def _format(template: str) -> FormatSpec:
    found = derived(template)
    assert isinstance(found, Derivation), found
    return found.spec


def _options(case: dict[str, Any]) -> dict[str, Any]:
    return {"tools": case.get("tools"), "thinking_forced_open": bool(case.get("thinking_forced_open"))}


def _text(value: object) -> str:
    return (value or "").strip() if isinstance(value, str) or value is None else str(value)


def _expected(case: dict[str, Any]) -> dict[str, Any]:
    want = case["expected"]
    calls = []
    for call in want.get("tool_calls") or []:
        arguments = call["arguments"]
        calls.append({"name": call["name"], "arguments": json.loads(arguments) if isinstance(arguments, str)
                      else arguments, **({"id": call["id"]} if call.get("id") else {})})
    return {"content": _text(want.get("content")), "reasoning": _text(want.get("reasoning")), "tool_calls": calls}


def _got(message: streamparse.Message, want: dict[str, Any]) -> dict[str, Any]:
    ids = [bool(call.get("id")) for call in want["tool_calls"]]
    calls = [{"name": call.name, "arguments": call.arguments,
              **({"id": call.id} if i < len(ids) and ids[i] else {})} for i, call in enumerate(message.tool_calls)]
    return {"content": _text(message.content), "reasoning": _text(message.reasoning), "tool_calls": calls}


def exact(template: str) -> int:
    found = derived(template)
    if isinstance(found, DeriveError):
        return 0
    return sum(_got(streamparse.parse(case["output"], format=found.spec, **_options(case)), want) == want
               for case in CASES[template] for want in [_expected(case)])


def test_leave_one_out_exact_counts() -> None:
    """Each template's derived declaration reads as many of its real renders exactly as recorded; more
    than llama.cpp's autoparser's ~31 templates are read whole."""
    got = {template: exact(template) for template in CASES}
    assert {t: n for t, n in got.items() if n} == EXACT
    fully = [t for t, n in got.items() if n == len(CASES[t])]
    assert len(fully) == 39  # llama.cpp's autoparser: ~31
    print("\n" + "\n".join(f"{t}: {n}/{len(CASES[t])}" for t, n in got.items()))


@pytest.mark.parametrize("template", [t for t in CASES if t not in EXACT])
def test_a_layout_not_derived_names_the_part(template: str) -> None:
    found = derived(template)
    if isinstance(found, Derivation):  # derived, but reads none of the cases exactly
        return
    assert str(found).startswith("derive_format: could not place the ") and found.part


DERIVED = [t for t in CASES if isinstance(derived(t), Derivation)]


def _calls(message: streamparse.Message) -> list[str]:
    return [call.name for call in message.tool_calls]


@pytest.mark.parametrize("template", DERIVED)
def test_a_derived_format_accepts_no_call_the_declared_one_rejects(template: str) -> None:
    """Every call the derived declaration accepts, the declared format accepts too (its arguments may be
    read otherwise: the exact counts above say where)."""
    for case in CASES[template]:
        declared = streamparse.parse(case["output"], format=CASE_FORMATS.get(case["format"], case["format"]),
                                     **_options(case))
        mine = streamparse.parse(case["output"], format=_format(template), **_options(case))
        allowed = _calls(declared)
        for call in _calls(mine):
            assert call in allowed, (case["case"], call, allowed)
            allowed.remove(call)


@pytest.mark.parametrize("template", DERIVED)
def test_a_derived_format_streams_as_it_parses(template: str) -> None:
    """Any chunking of a real render gives the final parse (its content, reasoning and calls)."""
    spec, rng = _format(template), random.Random(template)
    for case in CASES[template]:
        whole = streamparse.parse(case["output"], format=spec, **_options(case))
        text = case["output"]
        for _ in range(5):
            cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 12)))) if len(text) > 1 \
                else []
            chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            content, reasoning, calls = [], [], {}
            for delta in streamparse.stream(iter(chunks), format=spec, **_options(case)):
                content.append(delta.content or "")
                reasoning.append(delta.reasoning or "")
                for call in delta.tool_calls or ():
                    entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
                    entry["name"] += call.name or ""
                    entry["arguments"] += call.arguments or ""
            assert "".join(content) == whole.content, (case["case"], chunks)
            assert "".join(reasoning) == whole.reasoning, (case["case"], chunks)
            assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == \
                [(c.name, c.arguments) for c in whole.tool_calls], (case["case"], chunks)


def _calls_only(spec: FormatSpec, case: dict[str, Any]) -> str:
    """The output without its content: what `tool_choice="required"` leaves the model to write. Where
    the derived call closer is the stop token the case cut off (gpt-oss's `<|call|>`: the probe turn
    ended with it), the model writes it, and the grammar asks for it."""
    message = streamparse.parse(case["output"], format=spec, **_options(case))
    text = case["output"]
    text = text.replace(message.content, "", 1) if message.content.strip() else text
    closers = {closer for envelope in spec.envelopes for closer in getattr(envelope.body, "closers", ())}
    return text + case["stop"] if case.get("stop") in closers else text


def _exact_calls(template: str) -> list[dict[str, Any]]:
    """The template's cases with calls that its derived declaration reads exactly (content, reasoning, calls)."""
    spec = _format(template)
    return [case for case in CASES[template] for want in [_expected(case)] if want["tool_calls"]
            and _got(streamparse.parse(case["output"], format=spec, **_options(case)), want) == want]


@pytest.mark.parametrize("syntax", ["structural_tag", "lark", "gbnf"])
@pytest.mark.parametrize("template", [t for t in EXACT if isinstance(derived(t), Derivation)])
def test_required_grammars_of_a_derived_format_accept_the_real_calls_it_reads(template: str, syntax: str) -> None:
    """Per case: wherever the derived declaration reads a real render's calls exactly, its grammar with
    `tool_choice="required"` takes those calls (the content left out), in every syntax."""
    spec = _format(template)
    for case in _exact_calls(template):
        options = {"thinking_forced_open": bool(case.get("thinking_forced_open"))}
        extra = {"unicode_escapes": True} if syntax == "lark" else {}
        grammar = grammar_for(spec, case["tools"], syntax=syntax, tool_choice="required", **options, **extra)
        text = _calls_only(spec, case)
        if syntax == "structural_tag":
            assert isinstance(grammar, dict)
            assert structural_tag_accepts(grammar, text), case["case"]
        else:
            assert isinstance(grammar, str)
            assert (lark_accepts(grammar, text, ()) if syntax == "lark" else gbnf_accepts(grammar, text)), case["case"]


def test_the_grammar_check_reaches_past_the_fully_read_templates() -> None:
    partly = [t for t in EXACT if EXACT[t] < len(CASES[t]) and _exact_calls(t)]
    assert len(partly) >= 9, partly


# ----------------------------------------------------------------- inputs and refusals

QWEN3 = TEMPLATES / "Qwen3-8B.jinja"


def test_the_template_may_be_given_as_text_path_mapping_or_chat_template() -> None:
    from streamparse.serve.template import ChatTemplate

    text = QWEN3.read_text(encoding="utf-8")
    specs = [streamparse.derive_format(source) for source in
             (text, QWEN3, str(QWEN3), {"chat_template": text, "eos_token": "<|im_end|>"}, ChatTemplate(text))]
    assert {spec.name for spec in specs} == {specs[0].name}
    assert specs[0].envelopes[0].openers == ("<tool_call>",) and specs[0].reasoning == (("<think>", "</think>"),)
    message = streamparse.parse('<think>\nr\n</think>\n\nhi<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n'
                                "</tool_call>", format=specs[0])
    assert (message.reasoning.strip(), message.content.strip(), message.tool_calls[0].arguments) == ("r", "hi",
                                                                                                      {"a": 1})
    written = specs[0].render(message)  # a derived format writes a message back as the template does
    assert written.startswith("<think>\nr\n</think>\n\nhi") and "<tool_call>" in written
    again = streamparse.parse(written, format=specs[0])
    assert (again.content, again.reasoning, again.tool_calls[0].arguments) == (message.content.strip(),
                                                                               message.reasoning.strip(), {"a": 1})


def test_a_template_that_renders_no_calls_names_the_calls() -> None:
    with pytest.raises(DeriveError, match="could not place the calls") as raised:
        streamparse.derive_format("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                                  "{% if add_generation_prompt %}assistant: {% endif %}")
    assert raised.value.part == "calls"


def test_a_template_that_raises_is_a_derive_error_not_a_crash() -> None:
    with pytest.raises(DeriveError, match="content"):
        streamparse.derive_format("{{ raise_exception('no') }}")


def test_bad_input_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match="chat template"):
        streamparse.derive_format(42)
    with pytest.raises(ValueError, match="chat_template"):
        streamparse.derive_format({"eos_token": "</s>"})


def test_the_summary_names_the_parts() -> None:
    found = derived("Qwen3-Coder-30B-A3B-Instruct.jinja")
    assert isinstance(found, Derivation)
    summary = found.summary()
    assert "tagged_params" in summary and "'<parameter='" in summary and "'</function>'" in summary


# ----------------------------------------------------------------- the command line

# A template no declared format knows: calls as `<fncall>{"name", "arguments"}</fncall>`.
UNKNOWN = """{%- for m in messages %}<|{{ m.role }}|>
{%- if m.content %}{{ m.content }}{% endif %}
{%- for c in m.tool_calls or [] %}<fncall>{{ c.function | tojson }}</fncall>{% endfor %}<|end|>
{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"""


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamparse", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, check=False)


def test_detect_derives_a_format_for_a_template_none_matches(tmp_path: Path) -> None:
    assert streamparse.detect_format(UNKNOWN) is None
    template = tmp_path / "unknown.jinja"
    template.write_text(UNKNOWN, encoding="utf-8")
    done = _cli("detect", str(template))
    assert done.returncode == 0, done.stderr
    assert "no declared format matches" in done.stderr
    assert "calls: json_call" in done.stdout and "call opener: '<fncall>'" in done.stdout
    assert _cli("detect", "-", stdin=UNKNOWN).stdout == done.stdout
    shown = _cli("detect", "--show", str(QWEN3))  # a declared format matches: --show derives all the same
    assert shown.returncode == 0 and "reasoning: '<think>' ... '</think>'" in shown.stdout
    assert _cli("detect", str(QWEN3)).stdout.strip() == "hermes"
    refused = tmp_path / "plain.jinja"
    refused.write_text("{{ messages[0].content }}", encoding="utf-8")
    done = _cli("detect", str(refused))
    assert done.returncode == 1 and "none derived: derive_format: could not place the content" in done.stderr


def test_serve_uses_and_logs_a_derived_format(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    template = tmp_path / "unknown.jinja"
    template.write_text(UNKNOWN, encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "streamparse", "serve", "--upstream", "http://127.0.0.1:9/v1",
                               "--chat-template", str(template), "--text-prompt", "--port", str(port)],
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        lines = []
        while not lines or ("format, model" not in lines[-1] and len(lines) < 40):  # up to the line naming the format
            lines.append(server.stderr.readline())
    finally:
        server.terminate()
        server.wait(timeout=30)
    log = "".join(lines)
    assert "no declared format matches the chat template; using one derived from its renders" in log
    assert "call opener: '<fncall>'" in log and re.search(r"serve: derived-[0-9a-f]+ format", log)


def test_a_template_that_never_ends_is_stopped_by_its_deadline() -> None:
    from streamparse.serve.template import ChatTemplate, DeadlineExceeded

    endless = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(DeadlineExceeded):
        streamparse.derive_format(ChatTemplate(endless, render_timeout=0.3))
