"""`parse_batch` / `ParseBatch`: the batch comes back of the same kind, each row exactly `parse()` of its text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import ids
from corpus import Row, case_rows, fixture_rows, groups

import streamparse
from streamparse.batch import RESULT_COLUMNS, ParseBatch, parse_batch

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

FIXTURE_GROUPS = groups(fixture_rows())
CASES = case_rows()


def expected_columns(message: streamparse.Message) -> dict[str, Any]:
    """What the four result columns hold for one message, decoded."""
    return {
        "content": message.content,
        "reasoning": message.reasoning,
        "tool_calls": [call.to_openai() for call in message.tool_calls],
        "rejected": [{"status": r.status, "errors": r.errors, "raw": r.raw, "name": r.name} for r in message.rejected],
    }


def decoded(record: dict[str, Any]) -> dict[str, Any]:
    return {"content": record["content"], "reasoning": record["reasoning"],
            "tool_calls": json.loads(record["tool_calls"]), "rejected": json.loads(record["rejected"])}


def make_batch(kind: str, columns: dict[str, list[Any]]) -> Any:
    if kind == "arrow":
        return pa.table(columns)
    if kind == "pandas":
        return pd.DataFrame(columns)
    if kind == "numpy":  # Ray Data's default batch format
        return {name: np.array(values, dtype=object) for name, values in columns.items()}
    return dict(columns)  # Hugging Face datasets.map(batched=True): a dict of lists


def records(kind: str, batch: Any) -> list[dict[str, Any]]:
    if kind == "arrow":
        assert isinstance(batch, pa.Table)
        return list(batch.to_pylist())
    if kind == "pandas":
        assert isinstance(batch, pd.DataFrame)
        return list(batch.to_dict("records"))
    assert isinstance(batch, dict)
    if kind == "numpy":
        assert all(isinstance(values, np.ndarray) for values in batch.values())
    names = list(batch)
    return [dict(zip(names, values, strict=True)) for values in zip(*batch.values(), strict=True)]


KINDS = ["arrow", "pandas", "numpy", "dict"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("key", list(FIXTURE_GROUPS), ids=lambda key: key[0])
def test_every_fixture_row_is_exactly_its_parse(kind: str, key: tuple[str, str, bool]) -> None:
    rows = FIXTURE_GROUPS[key]
    fmt, tools = rows[0].format, rows[0].tools
    batch = make_batch(kind, {"id": [r.label for r in rows], "text": [r.text for r in rows]})
    out = records(kind, parse_batch(batch, format=fmt, tools=tools, id_factory=ids))
    assert [list(record) for record in out] == [["id", "text", *RESULT_COLUMNS]] * len(rows)
    for row, record in zip(rows, out, strict=True):
        assert record["id"] == row.label and record["text"] == row.text
        want = expected_columns(streamparse.parse(row.text, fmt, tools=tools, id_factory=ids))
        assert decoded(record) == want
        # the JSON columns as json.dumps writes them, to the character (spaces, non-ASCII kept as is)
        assert [record["tool_calls"], record["rejected"]] == [
            json.dumps(want["tool_calls"], ensure_ascii=False), json.dumps(want["rejected"], ensure_ascii=False)]
    assert any(record["rejected"] != "[]" for record in out)  # the cut-short rows have rejected calls


def _by_format_and_tools(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    grouped: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        grouped.setdefault((row.format, json.dumps(row.tools, sort_keys=True)), []).append(row)
    return grouped


@pytest.mark.skipif(not CASES, reason="../shared/templates is not beside this checkout")
@pytest.mark.parametrize("kind", ["arrow", "dict"])
def test_every_real_template_case_is_exactly_its_parse_with_the_prompt_per_row(kind: str) -> None:
    for (fmt, _), rows in _by_format_and_tools(CASES).items():
        tools = rows[0].tools
        batch = make_batch(kind, {"text": [r.text for r in rows], "prompt": [r.prompt for r in rows]})
        parse = ParseBatch(prompt_column="prompt", format=fmt, tools=tools, id_factory=ids)
        for row, record in zip(rows, records(kind, parse(batch)), strict=True):
            want = streamparse.parse(row.text, fmt, tools=tools, prompt=row.prompt, id_factory=ids)
            assert decoded(record) == expected_columns(want), row.label


def test_the_prompt_column_decides_forced_open_thinking_per_row() -> None:
    batch = {"text": ["I think so.\n</think>\n\nYes.", "I think so.\n</think>\n\nYes."],
             "prompt": ["<|im_start|>assistant\n<think>\n", None]}
    out = parse_batch(batch, prompt_column="prompt")
    assert out["reasoning"] == ["I think so.", ""]
    assert out["content"][0] == "Yes."
    with pytest.raises(ValueError, match="not both"):
        ParseBatch(prompt_column="prompt", prompt="<think>\n")


def test_a_null_text_gives_null_results_and_the_row_stays() -> None:
    out = parse_batch(pa.table({"text": ["hi", None]}))
    assert out.column("content").to_pylist() == ["hi", None]
    assert out.column("rejected").to_pylist() == ["[]", None]
    frame = parse_batch(pd.DataFrame({"text": ["hi", None]}))
    assert frame["tool_calls"].tolist()[0] == "[]" and frame["tool_calls"].isna().tolist() == [False, True]


def test_another_text_column_and_an_empty_batch() -> None:
    out = parse_batch({"completion": ["<think>\nr\n</think>\n\nc"]}, text_column="completion", format="deepseek_r1")
    assert (out["reasoning"], out["content"]) == (["r"], ["c"])
    empty = parse_batch(pa.table({"text": pa.array([], pa.string())}))
    assert empty.column_names == ["text", *RESULT_COLUMNS] and empty.num_rows == 0


def test_misuse_names_the_column_or_the_option() -> None:
    with pytest.raises(ValueError, match="already has a column 'content'"):
        parse_batch(pd.DataFrame({"text": ["x"], "content": ["y"]}))
    with pytest.raises(ValueError, match="no column 'text'; its columns are: body"):
        parse_batch(pa.table({"body": ["x"]}))
    with pytest.raises(ValueError, match="no column 'prompt'"):
        parse_batch({"text": ["x"]}, prompt_column="prompt")
    with pytest.raises(TypeError, match=r"pyarrow\.Table, a pandas\.DataFrame or a mapping"):
        parse_batch(["x"])
    with pytest.raises(ValueError, match="emit_calls"):
        ParseBatch(emit_calls="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown option"):
        ParseBatch(workers=2)  # type: ignore[call-arg]


def test_a_parse_batch_is_built_once_and_called_per_batch() -> None:
    tools = FIXTURE_GROUPS[next(iter(FIXTURE_GROUPS))][0].tools
    parse = ParseBatch(tools=tools, id_factory=ids)
    first = parse({"text": ['<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>']})
    second = parse({"text": ['<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>']})
    assert json.loads(first["tool_calls"][0])[0]["function"]["name"] == "get_weather"
    assert json.loads(second["rejected"][0])[0]["status"] == "unknown_tool"
