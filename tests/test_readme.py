"""The README's and the docs' Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
EXAMPLES = [(page, i, code) for page in PAGES for i, code in enumerate(BLOCK.findall(page.read_text()))]


@pytest.mark.parametrize(("page", "index", "code"), EXAMPLES,
                         ids=[f"{p.name}-{i}" for p, i, _ in EXAMPLES])
def test_example_runs(page: Path, index: int, code: str) -> None:
    namespace: dict[str, object] = {"__name__": f"example_{page.stem}_{index}"}
    exec(compile(code, f"{page.name}[{index}]", "exec"), namespace)
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value):
            value()  # examples that define a test also run it


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 3
