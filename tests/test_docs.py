"""The README's and the docs' snippets run as pasted: each page's `sh` and `python` blocks, in order.

The `sh` blocks of a page go to one bash, as a reader pastes them into one terminal: a line ending in
`&` starts a server that later blocks use (the test waits until the `--port` it names answers
`/health`), and whatever is still running when the page ends is stopped. `pip install` lines are
skipped: the test environment is installed from pyproject.toml already. The ports 8000 and 8001 of
the pages are replaced by free ones, so that the test runs beside anything else on the machine.
A `python` block runs in a fresh namespace (a `test_` function it defines is called too).
A block the line before of which is `<!-- not run: why -->` is shown, not run (it needs the reader's
own files, a cluster, or takes minutes); `text` and `py` blocks are shapes, never run.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:^(<!-- not run: [^>]+-->)\n)?^```(sh|python)\n(.*?)^```", re.S | re.M)
PORTS = ("8000", "8001")
_DONE = "__streamparse_docs_block_done__"


def blocks(page: Path) -> list[tuple[str, str]]:
    """The (kind, code) of a page's blocks that run, in order."""
    return [(kind, code) for skip, kind, code in BLOCK.findall(page.read_text()) if not skip]


RUNNABLE = [page for page in PAGES if blocks(page)]


def _free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


class Terminal:
    """One bash, fed a page's `sh` blocks one after the other."""

    def __init__(self, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        self.process = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def run(self, code: str, timeout: float = 120) -> str:
        """Run one block; its output, once its last command returned 0 (a failure or a hang fails)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        lines = [line for line in code.splitlines() if not line.lstrip().startswith("pip install")]
        self.process.stdin.write(("\n".join(lines) + f"\necho {_DONE} $?\n").encode())
        self.process.stdin.flush()
        out, deadline = b"", time.monotonic() + timeout
        while _DONE.encode() not in out:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"the block took over {timeout} s:\n{code}\n{out.decode(errors='replace')}"
            data = os.read(self.process.stdout.fileno(), 65536)
            assert data, f"bash ended in the block:\n{code}\n{out.decode(errors='replace')}"
            out += data
        text, _, status = out.decode(errors="replace").partition(_DONE)
        assert status.split()[0] == "0", f"the block failed:\n{code}\n{text}"
        for port in re.findall(r"^[^#\n]*--port (\d+)[^\n]*&\s*(?:#.*)?$", "\n".join(lines), re.M):
            _wait_for(int(port))
        return text

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=20)


def _wait_for(port: int) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"nothing answered /health on port {port} within 60 s")


@pytest.mark.parametrize("page", RUNNABLE, ids=[page.name for page in RUNNABLE])
def test_the_pages_snippets_run_as_pasted(page: Path) -> None:
    ports = {port: _free_port() for port in PORTS}
    terminal = None
    try:
        for index, (kind, pasted) in enumerate(blocks(page)):
            code = pasted
            for port, free in ports.items():
                code = re.sub(rf"\b{port}\b", free, code)
            if kind == "sh":
                if "streamparse serve" in code:
                    pytest.importorskip("uvicorn")
                terminal = terminal or Terminal(ROOT)
                terminal.run(code)
                continue
            if "from openai import" in code:
                pytest.importorskip("openai")
            namespace: dict[str, object] = {"__name__": f"example_{page.stem}_{index}"}
            exec(compile(code, f"{page.name}[{index}]", "exec"), namespace)
            for name, value in list(namespace.items()):
                if name.startswith("test_") and callable(value):
                    value()  # examples that define a test also run it
    finally:
        if terminal is not None:
            terminal.close()


def test_every_page_with_a_command_or_an_example_runs_some() -> None:
    assert {page.name for page in RUNNABLE} >= {"README.md", "server.md", "streaming.md"}
    assert sum(len(blocks(page)) for page in PAGES) >= 8
