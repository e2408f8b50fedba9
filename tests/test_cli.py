"""The `streamparse` command, run as the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import FIXTURES, FORMAT_NAMES

from streamparse.registry import get_format

SCRIPT = shutil.which("streamparse", path=str(Path(sys.executable).parent))  # this Python's own, not one on PATH
pytestmark = pytest.mark.skipif(SCRIPT is None, reason="install the package first: pip install -e '.[test]'")
TWO_CALLS = FIXTURES / "hermes" / "qwen3_reasoning_two_calls.txt"
TRICKY = FIXTURES / "hermes" / "tricky_calls.txt"
TOOLS = FIXTURES / "hermes" / "tools.json"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT is not None
    return subprocess.run([SCRIPT, *args], check=False, input=stdin, capture_output=True, text=True, timeout=60)


def test_parse_prints_the_message_and_the_openai_shape() -> None:
    done = run("parse", str(TWO_CALLS), "--tools", str(TOOLS))
    assert done.returncode == 0, done.stderr
    message = json.loads(done.stdout)
    assert message["content"] == "Let me check both for you."
    assert [c["name"] for c in message["tool_calls"]] == ["get_weather", "get_time"]
    openai = json.loads(run("parse", "--openai", stdin=TWO_CALLS.read_text()).stdout)
    assert openai["role"] == "assistant" and len(openai["tool_calls"]) == 2


def test_strict_exits_1_when_a_call_was_rejected() -> None:
    assert run("parse", str(TRICKY), "--tools", str(TOOLS)).returncode == 0
    done = run("parse", str(TRICKY), "--tools", str(TOOLS), "--strict")
    assert done.returncode == 1
    assert [r["status"] for r in json.loads(done.stdout)["rejected"]] == ["schema_violation", "truncated"]


def test_stream_prints_one_delta_per_line() -> None:
    done = run("stream", "--emit", "progressive", stdin=TWO_CALLS.read_text())
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert "".join(d.get("reasoning_content", "") for d in lines).startswith("The user wants")
    assert {c["function"].get("name") for d in lines for c in d.get("tool_calls", [])} >= {"get_weather", "get_time"}


def test_stream_flushes_deltas_as_input_arrives() -> None:
    assert SCRIPT is not None
    proc = subprocess.Popen([SCRIPT, "stream"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    watchdog = threading.Timer(30, proc.kill)  # a regression must fail the test, not hang it
    watchdog.start()
    try:
        proc.stdin.write("Hello there")
        proc.stdin.flush()
        first = proc.stdout.readline()  # arrives before stdin is closed
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        watchdog.cancel()
    assert json.loads(first) == {"content": "Hello there"}


def test_formats_detect_and_demo() -> None:
    assert "hermes" in run("formats").stdout.split()
    template = FIXTURES / "hermes" / "chat_template.jinja"
    assert run("detect", str(template)).stdout.strip() == "hermes"
    demo = run("demo", "--delay", "0")
    assert demo.returncode == 0 and '"tool_calls"' in demo.stdout and "final message" in demo.stdout
    for fmt in ("qwen3_coder", "deepseek_r1", "deepseek_v3_1", "deepseek_v3_2", "mistral", "granite", "nemotron",
                "command_r7b", "apertus"):
        demo = run("demo", "--format", fmt, "--delay", "0")
        assert demo.returncode == 0 and '"tool_calls"' in demo.stdout, (fmt, demo.stderr)


def test_misuse_exits_2_with_a_message_on_stderr() -> None:
    done = run("parse", "--format", "gpt9", str(TWO_CALLS))
    assert done.returncode == 2 and "known formats" in done.stderr
    done = run("parse", str(TWO_CALLS), "--tools", str(TWO_CALLS))
    assert done.returncode == 2 and "not JSON" in done.stderr
    assert run("nonsense").returncode == 2


def test_python_dash_m_is_the_same_command() -> None:
    done = subprocess.run([sys.executable, "-m", "streamparse", "formats"], capture_output=True, text=True, check=True)
    assert "hermes" in done.stdout.split()


def test_version_and_detect_on_a_model_directory_and_on_stdin(tmp_path: Path) -> None:
    import streamparse

    assert run("--version").stdout.strip() == f"streamparse {streamparse.__version__}"
    template = (FIXTURES / "hermes" / "chat_template.jinja").read_text()
    assert run("detect", str(FIXTURES / "hermes")).stdout.strip() == "hermes"       # holds chat_template.jinja
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "eos_token": "<|im_end|>"}))
    assert run("detect", str(tmp_path)).stdout.strip() == "hermes"                   # holds tokenizer_config.json
    assert run("detect", "-", stdin=template).stdout.strip() == "hermes"             # template text on stdin
    assert run("detect", "-", stdin=json.dumps({"chat_template": template})).stdout.strip() == "hermes"
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run("detect", str(empty))
    assert done.returncode == 2 and "no chat_template.jinja" in done.stderr


def test_serve_misuse_is_reported_before_it_listens(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("jinja2")
    done = run("serve", "--upstream", "http://127.0.0.1:9/v1", "--chat-template", str(tmp_path / "missing.jinja"))
    assert done.returncode == 2 and "cannot load --chat-template" in done.stderr
    (tmp_path / "t.jinja").write_text("{{ messages[0].content }}")
    done = run("serve", "--upstream", "http://127.0.0.1:9/v1", "--chat-template", str(tmp_path / "t.jinja"))
    assert done.returncode == 2 and "pass --format" in done.stderr
    hermes = str(FIXTURES / "hermes" / "chat_template.jinja")
    done = run("serve", "--upstream", "ftp://127.0.0.1:9/v1", "--chat-template", hermes, "--text-prompt")
    assert done.returncode == 2 and "--upstream: the upstream URL must be http://" in done.stderr
    done = run("serve", "--upstream", "http://127.0.0.1:9/v1", "--chat-template", hermes, "--text-prompt",
               "--workers", "0")
    assert done.returncode == 2 and "--workers must be at least 1" in done.stderr


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_the_demo_of_every_format_streams_its_fixture_right(fmt: str) -> None:
    """A fixture that starts inside reasoning comes with the end of its prompt (`NAME.prompt`): the demo
    decides forced-open reasoning from it, so no reasoning and no closer leak into the content."""
    done = subprocess.run([sys.executable, "-m", "streamparse", "demo", "--format", fmt, "--delay", "0"],
                          capture_output=True, text=True, timeout=60, check=True)
    final = json.loads(done.stdout.split("# final message:\n", 1)[1])
    spec = get_format(fmt)
    closers = [closer for _, closer in spec.reasoning]
    assert not any(closer in (final["content"] or "") for closer in closers), final["content"][:200]
    fixtures = sorted((FIXTURES / fmt).glob("*.txt"))
    first = next((p for p in fixtures if p.name == "qwen3_reasoning_two_calls.txt"), fixtures[0])
    if first.with_suffix(".prompt").exists():
        assert final["reasoning_content"], "the fixture starts inside reasoning"
