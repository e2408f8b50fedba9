"""Ray Data, for real, on a local instance: `read_json`/`from_items` → `map_batches(ParseBatch)` gives
exactly `parse()` row by row, rejected calls included, one dataset per format."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corpus import Row, fixture_rows

import streamparse
from streamparse.batch import ParseBatch

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

# Ray's own DataContext reads its deprecated fields when it copies itself to the workers (ray/data/context.py):
# no argument of ours does that, and the handler below checks that none of ours is deprecated.
pytestmark = pytest.mark.filterwarnings(r"ignore:`use_\w+` is deprecated:DeprecationWarning:ray\.data\.context")

# Ray pickles the constructor's arguments for its actors; a bound method of a str is picklable by reference
# anywhere, unlike a function of this test module (not importable in a Ray worker).
IDS = "call_{}".format
ROWS = fixture_rows()


class Deprecations(logging.Handler):
    """Ray Data logs (not warns) that an argument is deprecated: collect what it logs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "deprecated" in record.getMessage():
            self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def no_deprecated_arguments() -> Iterator[None]:
    """What the docs show runs on the installed Ray without a deprecation (`concurrency=` is one since 2.51)."""
    handler = Deprecations()
    logger = logging.getLogger("ray.data")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert handler.messages == []


def expected(row: Row, prompt: str | None = None) -> dict[str, Any]:
    message = streamparse.parse(row.text, row.format, tools=row.tools, prompt=prompt, id_factory=IDS)
    return {"content": message.content, "reasoning": message.reasoning,
            "tool_calls": [c.to_openai() for c in message.tool_calls],
            "rejected": [{"status": r.status, "errors": r.errors, "raw": r.raw, "name": r.name}
                         for r in message.rejected]}


def decoded(record: dict[str, Any]) -> dict[str, Any]:
    return {"content": record["content"], "reasoning": record["reasoning"],
            "tool_calls": json.loads(record["tool_calls"]), "rejected": json.loads(record["rejected"])}


def test_one_dataset_per_format_from_items(local_ray: Any) -> None:
    formats = sorted({row.format for row in ROWS})
    for fmt in formats:  # several formats, each in its own dataset with its own options
        rows = [row for row in ROWS if row.format == fmt]
        items = [{"n": i, "text": row.text} for i, row in enumerate(rows)]
        dataset = local_ray.data.from_items(items).map_batches(
            ParseBatch, fn_constructor_kwargs={"format": fmt, "tools": rows[0].tools, "id_factory": IDS},
            compute=local_ray.data.ActorPoolStrategy(size=1), batch_size=4, batch_format="pyarrow")
        out = sorted(dataset.take_all(), key=lambda record: record["n"])
        assert [record["text"] for record in out] == [row.text for row in rows]
        assert [decoded(record) for record in out] == [expected(row) for row in rows], fmt
        assert any(record["rejected"] != "[]" for record in out)  # the cut-short rows are there, rejected


def test_read_json_with_two_actors_default_batches_and_a_prompt_column(local_ray: Any, tmp_path: Path) -> None:
    hermes = [row for row in ROWS if row.format == "hermes"]
    rows = [*hermes, Row("forced", "hermes", "Thinking first.\n</think>\n\nThen the answer.", hermes[0].tools)] * 5
    source = tmp_path / "completions.jsonl"
    prompts = ["<|im_start|>assistant\n<think>\n" if i % 2 else "<|im_start|>assistant\n" for i in range(len(rows))]
    source.write_text("".join(json.dumps({"n": i, "completion": row.text, "prompt": prompts[i]}) + "\n"
                              for i, row in enumerate(rows)), encoding="utf-8")
    dataset = local_ray.data.read_json(str(source)).map_batches(
        ParseBatch, fn_constructor_kwargs={"text_column": "completion", "prompt_column": "prompt",
                                           "tools": rows[0].tools, "id_factory": IDS},
        # Two actors of half a CPU each, so that the read task still has a CPU of the two this instance has.
        # Ray's default batch format: a dict of numpy arrays.
        compute=local_ray.data.ActorPoolStrategy(size=2), num_cpus=0.5, batch_size=3)
    out = sorted(dataset.take_all(), key=lambda record: record["n"])
    assert [decoded(record) for record in out] == [expected(row, prompts[i]) for i, row in enumerate(rows)]
    # The forced-open prompt decides that row: reasoning after a <think> prompt, all content after the other.
    assert {(r["reasoning"], r["content"]) for r in out if "Thinking first" in r["completion"]} == {
        ("Thinking first.", "Then the answer."), ("", "Thinking first.\n</think>\n\nThen the answer.")}


def test_pandas_batches_and_a_plain_function(local_ray: Any) -> None:
    from streamparse.batch import parse_batch

    rows = [row for row in ROWS if row.format == "qwen3_coder"]
    dataset = local_ray.data.from_items([{"text": row.text} for row in rows])
    out = dataset.map_batches(parse_batch, fn_kwargs={"format": "qwen3_coder", "tools": rows[0].tools,
                                                      "id_factory": IDS}, batch_format="pandas").take_all()
    assert sorted(json.dumps(decoded(r), sort_keys=True) for r in out) == sorted(
        json.dumps(expected(row), sort_keys=True) for row in rows)
