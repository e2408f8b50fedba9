"""The real-template oracle: the assistant turns the models' own chat templates render (every cases file).

Runs `../shared/templates/check_project.py` for each implemented format when `../shared` exists
(a user's checkout has none: then the module is skipped)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import CASES, FORMAT_NAMES, ROOT

if not CASES.exists():
    pytest.skip("../shared/templates/cases.json is not beside this checkout", allow_module_level=True)

CASE_FORMATS = {"hermes": "hermes", "qwen3_coder": "qwen3_coder", "deepseek_r1": "deepseek_r1",
                "deepseek_v3_1": "deepseek_v3_1", "deepseek_v3_2_dsml": "deepseek_v3_2",
                "mistral_nemo": "mistral", "mistral_call_id": "mistral", "mistral_args": "mistral"}
# Every cases file beside cases.json (the second wave's formats are named as they stand).
ALL_CASES = [c for name in ("cases.json", "cases_new_families.json", "cases_more.json", "cases_wave3.json",
                           "cases_wave4.json")
             if (CASES.parent / name).exists() for c in json.loads((CASES.parent / name).read_text())]
IN_CASES = sorted({CASE_FORMATS.get(c["format"], c["format"]) for c in ALL_CASES} & set(FORMAT_NAMES))


@pytest.mark.parametrize("fmt", IN_CASES)
def test_every_real_template_case_parses_and_streams(fmt: str) -> None:
    script = CASES.parent / "check_project.py"
    done = subprocess.run([sys.executable, str(script), "--only", fmt, "--splits", "10"], check=False,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "template round-trip: parse" in done.stdout
