"""Columns in, columns out: parse a batch of finished outputs where data pipelines hold them.

`parse_batch` takes what Ray Data's `map_batches` and Hugging Face `datasets.map(batched=True)` hand
over (a `pyarrow.Table`, a pandas `DataFrame`, or a mapping of column name to values) and returns the
same kind with four columns added: `content`, `reasoning`, `tool_calls` (the JSON text of the OpenAI
`tool_calls` list) and `rejected` (the JSON text of `[{status, errors, raw, name}]`). Every row is
exactly `parse(row[text_column], **options)`. `ParseBatch` is the same as a callable class, so Ray
builds its state once per actor. pyarrow and pandas are imported only when such a batch arrives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..options import OptionFields, Options, ToolsLike, make_options
from ..spec import FormatLike
from .rows import RESULT_COLUMNS, collector_paused, message_row, parse_with

if TYPE_CHECKING:
    from typing_extensions import Unpack

Batch = TypeVar("Batch")

def _missing(value: object) -> bool:
    """A null cell: None, or the NaN pandas puts in an object column."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _kind(batch: object) -> str:
    module = type(batch).__module__.split(".")[0]
    if module == "pyarrow" and hasattr(batch, "column_names"):
        return "arrow"
    if module == "pandas" and hasattr(batch, "columns"):
        return "pandas"
    if isinstance(batch, Mapping):
        return "mapping"
    raise TypeError("a batch is a pyarrow.Table, a pandas.DataFrame or a mapping of column name to values; "
                    f"got {type(batch).__name__}")


def _column_names(batch: Any, kind: str) -> list[str]:
    if kind == "arrow":
        return list(batch.column_names)
    if kind == "pandas":
        return [str(name) for name in batch.columns]
    return [str(name) for name in batch]


def _column(batch: Any, kind: str, name: str) -> list[Any]:
    if kind == "arrow":
        return list(batch.column(name).to_pylist())
    if kind == "pandas":
        return list(batch[name].tolist())
    return list(batch[name])


class ParseBatch:
    """`parse_batch` as a callable class: options checked (and state built) once, then one call per batch.

    For Ray Data: `ds.map_batches(ParseBatch, fn_constructor_kwargs={"format": "hermes", "tools": tools},
    compute=ray.data.ActorPoolStrategy(size=8))`. `prompt_column` names a column holding each row's
    rendered prompt, which decides per row whether the output starts inside an open reasoning block
    (the `prompt` option)."""

    def __init__(
        self,
        *,
        text_column: str = "text",
        prompt_column: str | None = None,
        format: FormatLike = "hermes",
        tools: ToolsLike = None,
        thinking_forced_open: bool = False,
        **options: Unpack[OptionFields],
    ) -> None:
        self.options: Options = make_options(format, tools, thinking_forced_open, options)
        if not isinstance(text_column, str):
            raise TypeError(f"text_column must be a column name (str); got {text_column!r}")
        if prompt_column is not None and not isinstance(prompt_column, str):
            raise TypeError(f"prompt_column must be a column name (str) or None; got {prompt_column!r}")
        if prompt_column is not None and self.options.prompt is not None:
            raise ValueError("give either prompt (one prompt for every row) or prompt_column (one per row), not both")
        self.text_column = text_column
        self.prompt_column = prompt_column

    def _options_for(self, prompt: object) -> Options:
        if _missing(prompt):
            return self.options
        if not isinstance(prompt, str):
            raise TypeError(f"column {self.prompt_column!r} must hold prompt text (str); got {type(prompt).__name__}")
        return self.options.with_changes(prompt=prompt)

    def __call__(self, batch: Batch) -> Batch:
        kind = _kind(batch)
        names = _column_names(batch, kind)
        for wanted in filter(None, (self.text_column, self.prompt_column)):
            if wanted not in names:
                raise ValueError(f"the batch has no column {wanted!r}; its columns are: {', '.join(names)}")
        for taken in RESULT_COLUMNS:
            if taken in names:
                raise ValueError(f"the batch already has a column {taken!r}, which parse_batch would overwrite; "
                                 f"rename it first (the result columns are {', '.join(RESULT_COLUMNS)})")
        texts = _column(batch, kind, self.text_column)
        prompts = _column(batch, kind, self.prompt_column) if self.prompt_column else [None] * len(texts)
        with collector_paused():  # one batch at a time: its little cyclic garbage is collected after it
            rows: list[tuple[str, str, str, str] | tuple[None, None, None, None]] = [
                (None, None, None, None) if _missing(text) else message_row(parse_with(self._options_for(prompt), text))
                for text, prompt in zip(texts, prompts, strict=True)
            ]
        columns = {name: [row[i] for row in rows] for i, name in enumerate(RESULT_COLUMNS)}
        return _with_columns(batch, kind, columns, self.text_column)  # type: ignore[no-any-return]


def _with_columns(batch: Any, kind: str, columns: dict[str, list[str | None]], text_column: str) -> Any:
    """The batch, of the same kind, with the result columns appended."""
    if kind == "arrow":
        import pyarrow as pa

        for name, values in columns.items():
            batch = batch.append_column(name, pa.array(values, type=pa.string()))
        return batch
    if kind == "pandas":
        out = batch.copy(deep=False)
        for name, values in columns.items():
            out[name] = values
        return out
    result: dict[str, Any] = dict(batch)
    as_numpy = type(batch[text_column]).__module__ == "numpy"  # Ray's default batches: a dict of numpy arrays
    for name, values in columns.items():
        if as_numpy:
            import numpy as np

            array = np.empty(len(values), dtype=object)
            array[:] = values
            result[name] = array
        else:
            result[name] = values
    return result


def parse_batch(
    batch: Batch,
    *,
    text_column: str = "text",
    prompt_column: str | None = None,
    format: FormatLike = "hermes",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    **options: Unpack[OptionFields],
) -> Batch:
    """The batch with `content`, `reasoning`, `tool_calls`, `rejected` added: each row `parse(row[text_column])`.

    A null text gives nulls in the four columns. A result column that already exists is a `ValueError`."""
    parse = ParseBatch(text_column=text_column, prompt_column=prompt_column, format=format, tools=tools,
                       thinking_forced_open=thinking_forced_open, **options)
    return parse(batch)
