"""Format detection from chat templates, and forced-open reasoning from prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CASES, FORMAT_NAMES

import streamparse
from streamparse import detect_format, thinking_forced_open

TEMPLATES = CASES.parent
# The format each real template in ../shared/templates writes (from its SOURCES.md / cases.json).
EXPECTED: dict[str, str | None] = {
    "DeepSeek-R1-0528.jinja": "deepseek_r1", "DeepSeek-R1-2025-01-20.jinja": "deepseek_r1",
    "DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_r1", "DeepSeek-R1.jinja": "deepseek_r1",
    "DeepSeek-V3-0324.jinja": "deepseek_r1", "DeepSeek-V3.jinja": "deepseek_r1",
    "DeepSeek-V3.1.jinja": "deepseek_v3_1", "DeepSeek-V3.2-llamacpp.jinja": "deepseek_v3_2",
    "Devstral-Small-2507-unsloth.jinja": "mistral", "Magistral-Small-2509-unsloth.jinja": "mistral",
    "Ministral-3-14B-Reasoning-2512.jinja": "mistral", "Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
    "Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes", "Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "QwQ-32B.jinja": "hermes", "Qwen2.5-7B-Instruct.jinja": "hermes", "Qwen3-0.6B.jinja": "hermes",
    "Qwen3-8B.jinja": "hermes", "Qwen3-Coder-30B-A3B-Instruct.jinja": "qwen3_coder",
    "Qwen3-Coder-30B-A3B-Instruct-2025-07-31.jinja": "qwen3_coder",
    # Second wave (cases_new_families.json, cases_more.json).
    "gpt-oss-120b.jinja": "gpt_oss", "GLM-4.5.jinja": "glm45", "GLM-4.6.jinja": "glm45", "GLM-4.7.jinja": "glm45",
    "Kimi-K2-Instruct.jinja": "kimi_k2", "Kimi-K2-Thinking.jinja": "kimi_k2", "MiniMax-M2.jinja": "minimax_m2",
    "Seed-OSS-36B-Instruct.jinja": "seed_oss", "Apertus-8B-Instruct-2509.jinja": "apertus",
    "LFM2-8B-A1B.jinja": "lfm2", "LFM2.5-8B-A1B.jinja": "lfm2", "Llama-3.1-8B-Instruct.jinja": "llama3_json",
    "Llama-3.2-3B-Instruct.jinja": "llama3_json", "Llama-3.3-70B-Instruct.jinja": "llama3_json",
    "Llama-4-Scout-17B-16E-Instruct.jinja": "llama3_json",
    "NVIDIA-Nemotron-3-Nano-30B-A3B.jinja": "qwen3_coder",
    "NVIDIA-Nemotron-Nano-9B-v2.jinja": "nemotron",
    "c4ai-command-r7b-12-2024-tool_use.jinja": "command_r7b", "granite-3.3-2b-instruct.jinja": "granite",
    "granite-4.0-llamacpp.jinja": "hermes",
    # Third wave (cases_wave3.json): the most specific markers win (Decision 24).
    "Solar-Open-100B.jinja": "solar_open", "functionary-medium-v3.1.jinja": "functionary_v3_1",
    "functionary-medium-v3.2.jinja": "functionary_v3_2",
    # Third wave (cases_wave3.json).
    "Kimi-K3.jinja": "kimi_k3",
    "gemma-4-31B-it.jinja": "gemma4", "gemma-4-31B-it-2026-04-04.jinja": "gemma4",
    "gemma-4-31B-it-interleaved.jinja": "gemma4",
}
# Third wave on the kinds we had (cases_wave3.json; Decision 24). Phi-4-mini's and the current
# Hunyuan-A13B templates name no call marker: None, those formats are named explicitly.
EXPECTED.update({
    "Hy3-preview.jinja": "hy_v3", "Cohere2MoE.jinja": "cohere_command", "LongCat-Flash-Chat.jinja": "longcat",
    "Apriel-1.5-15b-Thinker.jinja": "apriel", "Apriel-1.5-unsloth.jinja": "apriel",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel", "GigaChat3-10B-A1.8B.jinja": "gigachat3",
    "GigaChat3.1-10B-A1.8B.jinja": "gigachat3", "MiMo-VL.jinja": "hermes", "Reka-Edge.jinja": "hermes",
    "Step-3.5-Flash.jinja": "qwen3_coder", "Hunyuan-A13B-Instruct-2025-08-21.jinja": None,
    "Phi-4-mini-instruct.jinja": None,
})
# Fourth wave (cases_wave4.json; Decision 22): the aliases' templates stay with their format.
EXPECTED.update({
    "DeepSeek-V4.jinja": "deepseek_v3_2", "GigaChat3.5.jinja": "gigachat3_5", "EXAONE-4.0-32B.jinja": "hermes",
    "K-EXAONE-236B-A23B.jinja": "hermes", "Qwen3.6.jinja": "qwen3_coder", "Qwen3.8.jinja": "qwen3_coder",
    "StepFun3.7-Flash.jinja": "qwen3_coder", "MiniCPM5-1B.jinja": "minicpm5", "functiongemma.jinja": "function_gemma",
    "muse_glimmer_training.jinja": "muse_glimmer",
})
CASE_FORMATS = {"deepseek_v3_2_dsml": "deepseek_v3_2", "mistral_nemo": "mistral",
                "mistral_call_id": "mistral", "mistral_args": "mistral"}
shared = pytest.mark.skipif(not CASES.exists(), reason="../shared/templates is not beside this checkout")

HERMES_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}" \
                  "{% if tools %}<tool_call>\n{{ call | tojson }}\n</tool_call>{% endif %}"


@shared
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_real_template_is_detected(name: str) -> None:
    if EXPECTED[name] is not None and EXPECTED[name] not in streamparse.formats():
        pytest.skip(f"format {EXPECTED[name]} is not read yet")
    path = TEMPLATES / name
    assert detect_format(path.read_text()) == EXPECTED[name]
    assert detect_format(path) == EXPECTED[name]


@shared
def test_the_expected_table_covers_every_template_there() -> None:
    assert sorted(p.name for p in TEMPLATES.glob("*.jinja")) == sorted(EXPECTED)


@shared
@pytest.mark.parametrize("cases_file", ["cases.json", "cases_new_families.json", "cases_more.json"])
def test_thinking_forced_open_matches_every_real_prompt(cases_file: str) -> None:
    path = TEMPLATES / cases_file
    if not path.exists():
        pytest.skip(f"{cases_file} is not in ../shared/templates")
    cases = json.loads(path.read_text())
    checked = 0
    for case in cases:
        fmt = CASE_FORMATS.get(case["format"], case["format"])
        if fmt in FORMAT_NAMES:
            assert thinking_forced_open(case["prompt_tail"], fmt) == case["thinking_forced_open"], case["template"]
            checked += 1
    if cases_file == "cases.json":  # the first wave's formats are all read; later files skip formats not read yet
        assert checked == len(cases)


@shared
@pytest.mark.parametrize("cases_file", ["cases_more.json"])
def test_thinking_forced_open_matches_the_second_wave_prompts(cases_file: str) -> None:
    """The same on the second wave's cases, for the formats registered so far."""
    path = TEMPLATES / cases_file
    if not path.exists():
        pytest.skip(f"{cases_file} is not in ../shared/templates")
    checked = 0
    for case in json.loads(path.read_text()):
        if case["format"] in streamparse.formats():
            assert thinking_forced_open(case["prompt_tail"], case["format"]) == case["thinking_forced_open"], \
                (case["template"], case["case"])
            checked += 1
    if not checked:
        pytest.skip(f"no format of {cases_file} is registered yet")


@shared
def test_thinking_forced_open_matches_every_real_prompt_of_the_second_wave() -> None:
    """The second wave's cases; formats not registered yet are skipped."""
    checked = 0
    for name in ("cases_new_families.json", "cases_more.json"):
        for case in json.loads((TEMPLATES / name).read_text()):
            fmt = CASE_FORMATS.get(case["format"], case["format"])
            if fmt in FORMAT_NAMES:
                assert thinking_forced_open(case["prompt_tail"], fmt) == case["thinking_forced_open"], \
                    (case["template"], case["case"])
                checked += 1
    if not checked:
        pytest.skip("no format of the second wave is registered yet")


@shared
@pytest.mark.parametrize(("cases_file", "least"), [
    ("cases_wave3.json", 100),  # the formats of this wave declared on the kinds we had, and the aliases' renders
    ("cases_wave4.json", 127),  # GigaChat 3.5's, and the hermes, qwen3_coder and deepseek_v3_2 aliases' (Decision 21)
])
def test_thinking_forced_open_matches_every_real_prompt_of_the_third_and_fourth_waves(cases_file: str,
                                                                                       least: int) -> None:
    """cases_wave3.json and cases_wave4.json; formats not registered yet are skipped."""
    path = TEMPLATES / cases_file
    if not path.exists():
        pytest.skip(f"{cases_file} is not in ../shared/templates")
    checked = 0
    for case in json.loads(path.read_text()):
        if case["format"] in streamparse.formats():
            assert thinking_forced_open(case["prompt_tail"], case["format"]) == case["thinking_forced_open"], \
                (case["template"], case["case"])
            checked += 1
    assert checked >= least


def test_tokenizer_config_dict_and_file(tmp_path: Path) -> None:
    config = {"chat_template": [{"name": "default", "template": "<|im_start|>"},
                                {"name": "tool_use", "template": HERMES_TEMPLATE}]}
    assert detect_format(config) == "hermes"
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"chat_template": "[INST]{{ m }}[/INST][TOOL_CALLS]"}))
    assert detect_format(path) == "mistral"
    assert detect_format("{{ messages }}") is None
    with pytest.raises(ValueError, match="no 'chat_template'"):
        detect_format({"eos_token": "</s>"})


def test_detected_names_are_accepted_formats_of_the_fixtures() -> None:
    assert detect_format(HERMES_TEMPLATE) in streamparse.formats()


@pytest.mark.parametrize(("prompt", "forced"), [
    ("<|im_start|>assistant\n<think>\n", True),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),
    ("<|im_start|>assistant\n", False),
    ("<think>old</think><|im_start|>assistant\n", False),
])
def test_thinking_forced_open_from_a_prompt(prompt: str, forced: bool) -> None:
    assert thinking_forced_open(prompt, "hermes") is forced
    assert bool(streamparse.parse("r</think>c", prompt=prompt).reasoning) is forced


def test_prose_that_mentions_a_marker_names_no_format(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("Mistral models write [TOOL_CALLS] before calls, Qwen writes <tool_call>.\n")
    assert detect_format(readme) is None
    assert detect_format("The model writes [TOOL_CALLS] then a JSON list.") is None


def test_detection_reads_each_formats_declared_markers() -> None:
    from streamparse.families import FAMILIES

    for spec in FAMILIES:
        for markers in spec.detect:
            template = "{% for m in messages %}" + " ".join(markers) + "{% endfor %}"
            assert detect_format(template) == spec.name, (spec.name, markers)


@shared
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_real_template_is_detected_in_its_tokenizer_config_form(name: str, tmp_path: Path) -> None:
    if EXPECTED[name] is not None and EXPECTED[name] not in streamparse.formats():
        pytest.skip(f"format {EXPECTED[name]} is not read yet")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": (TEMPLATES / name).read_text(), "eos_token": "</s>"}))
    assert detect_format(config) == EXPECTED[name]
