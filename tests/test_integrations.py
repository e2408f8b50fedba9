"""The engine plugins' part that needs no engine: the parser names, and that `import streamparse`
imports neither engine (the plugins are imported by the engines, through their entry points)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

import streamparse
from streamparse.integrations import parser_names


def test_every_format_and_alias_has_a_parser_name() -> None:
    names = parser_names()
    assert sorted(names.values()) == sorted(streamparse.formats())
    assert all(name == "streamparse_" + fmt for name, fmt in names.items())


def test_importing_streamparse_imports_no_engine() -> None:
    code = "import sys, streamparse, streamparse.integrations; print(sorted({'vllm', 'sglang'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_entry_points_name_the_register_functions() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    vllm = text.split('[project.entry-points."vllm.general_plugins"]\n', 1)[1].split("\n", 1)[0]
    sglang = text.split('[project.entry-points."sglang.srt.plugins"]\n', 1)[1].split("\n", 1)[0]
    assert vllm == 'streamparse = "streamparse.integrations.vllm:register"'
    assert sglang == 'streamparse = "streamparse.integrations.sglang:register"'
