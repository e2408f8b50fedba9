"""`streamparse parse --jsonl` / `--parquet`: a file of many outputs parsed on every core, in input order.

JSON Lines: each line is an object whose `--field` holds the output; the same object is written back
with a `message` field (`Message.to_openai()` plus a `rejected` list). A line that is not such an
object, cannot be read (nested deeper than the JSON reader follows) or is longer than
`--max-line-bytes` (read no further than that: `/dev/zero` costs no memory) is reported on stderr
with its number and skipped. Parquet: the columns of `parse_batch`
(content, reasoning, tool_calls, rejected) are added to every row group. The work is done by the
workers of `batch.workers`; this module reads, writes and reports progress.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from typing import Any, BinaryIO, TextIO

from ..cli_flags import UsageError, options_from_flags
from ..options import Options
from .rows import RESULT_COLUMNS, message_row, parse_with, rejected_list
from .workers import check_workers, ordered_map

LINES_SKIPPED = 3  # exit status when input lines were skipped (1 stays --strict's "a call was rejected")
# The longest JSON Lines line read (its newline not counted), by default: a whole 1M-token output is
# about 4 MB of text, 24 MB at worst JSON-escaped (`\u00XX` per byte); 64 MiB holds it with room, and
# bounds what one line can cost (reading it, then a few times that decoded).
MAX_LINE_BYTES = 64 * 1024 * 1024
_SKIP_READ = 1024 * 1024  # the bytes read at a time while passing over a line that is too long
PARQUET_BATCH_ROWS = 4096


def add_file_flags(sub: argparse.ArgumentParser) -> None:
    """The flags of `parse` for files of many outputs."""
    source = sub.add_mutually_exclusive_group()
    source.add_argument("--jsonl", metavar="FILE",
                        help="JSON Lines of objects holding one output each ('-': stdin); writes each object "
                             "back with a 'message' field (the OpenAI message plus 'rejected')")
    source.add_argument("--parquet", metavar="FILE",
                        help="a Parquet file with one output per row (needs pyarrow: pip install "
                             "'streamparse[batch]'); writes it with content, reasoning, tool_calls, rejected added")
    sub.add_argument("--field", default="text", help="with --jsonl/--parquet: the field (column) holding the output")
    sub.add_argument("--workers", type=int,
                     help="with --jsonl/--parquet: processes that parse (default: every core; 1: this process)")
    sub.add_argument("--output", "-o", metavar="FILE",
                     help="with --jsonl: write here instead of stdout; with --parquet: the Parquet file to write")
    sub.add_argument("--max-line-bytes", type=int, metavar="N",
                     help=f"with --jsonl: a longer line is reported and skipped, never read whole "
                          f"(default {MAX_LINE_BYTES}: 64 MiB)")


class Progress:
    """`rows, rows/s, ETA` on one stderr line, redrawn at most 5 times a second; silent when not a terminal."""

    def __init__(self, total: int | None, stream: TextIO = sys.stderr, enabled: bool | None = None) -> None:
        self.total = total  # in the unit `update` counts `done` in (bytes read, or rows)
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self.start = self.last = time.monotonic()

    def update(self, rows: int, done: int, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and not final):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        line = f"{rows:,} rows  {rows / elapsed:,.0f} rows/s"
        if self.total:
            fraction = min(done / self.total, 1.0)
            eta = elapsed * (1 - fraction) / fraction if fraction > 0 else float("inf")
            line += f"  {fraction:4.0%}  ETA {_duration(eta)}"
        self.stream.write("\r" + line + ("\n" if final else "\x1b[K"))
        self.stream.flush()


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


# ----------------------------------------------------------------------------- JSON Lines

def _jsonl_row(field: str, options: Options, numbered: tuple[int, bytes]) -> tuple[bool, bytes | str, bool]:
    """One input line: `(True, output line as UTF-8, a call was rejected)`, or `(False, why it is skipped, False)`.

    The line goes back encoded, as it is written: the parent neither decodes nor encodes it."""
    number, line = numbered
    try:
        record = json.loads(line)
    except UnicodeDecodeError as error:
        return False, f"line {number}: not UTF-8 text (byte {line[error.start]:#04x} at {error.start})", False
    except ValueError as error:
        return False, f"line {number}: not JSON ({error})", False
    except RecursionError:
        return False, f"line {number}: nested too deeply for the JSON reader", False
    if not isinstance(record, dict):
        return False, f"line {number}: not a JSON object", False
    text = record.get(field)
    if not isinstance(text, str):
        what = "has no" if field not in record else "has a non-string"
        return False, f"line {number}: {what} field {field!r}", False
    if "message" in record:
        return False, f"line {number}: already has a 'message' field", False
    message = parse_with(options, text)
    record["message"] = {**message.to_openai(), "rejected": rejected_list(message)}
    try:
        written = json.dumps(record, ensure_ascii=False)
    except RecursionError:  # read at the reader's depth bound, one level deeper in the output
        return False, f"line {number}: nested too deeply for the JSON writer", False
    return True, (written + "\n").encode(), bool(message.rejected)


class _Encoding:
    """A text stream written to in UTF-8 bytes (for one without a binary buffer, such as a StringIO)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, data: bytes) -> None:
        self.out.write(data.decode())

    def flush(self) -> None:
        self.out.flush()


def _bytes_of(out: TextIO) -> BinaryIO | _Encoding:
    """Where the output lines go as bytes: `out`'s binary buffer (after what was written as text), or `out`."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        return _Encoding(out)
    out.flush()
    return buffer  # type: ignore[no-any-return]


def _numbered_lines(source: BinaryIO, read: list[int], limit: int, skipped: list[int]) -> Iterator[tuple[int, bytes]]:
    """The lines that are not blank, numbered. One longer than `limit` bytes (its newline not counted)
    is reported when its first `limit + 1` bytes are read, counted in `skipped[0]`, and passed over
    `_SKIP_READ` bytes at a time: no line is held whole past the bound."""
    number = 0
    while line := source.readline(limit + 1):
        number += 1
        read[0] += len(line)
        if len(line) > limit and not line.endswith(b"\n"):
            skipped[0] += 1
            print(f"streamparse: line {number}: longer than --max-line-bytes ({limit} bytes); skipped",
                  file=sys.stderr, flush=True)
            while (rest := source.readline(_SKIP_READ)) and not rest.endswith(b"\n"):
                read[0] += len(rest)
            read[0] += len(rest)
        elif line.strip():  # blank lines are not records (a trailing one is common): passed over silently
            yield number, line


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path) if path != "-" else None
    except OSError:
        return None


def _not_the_input(source: str, output: str | None) -> None:
    """Writing the output over the input would truncate what is still to be read: a `UsageError`."""
    if output is None or source == "-":
        return
    try:
        same = os.path.samefile(source, output)
    except OSError:  # one of them does not exist (yet): not the same file
        return
    if same:
        raise UsageError(f"--output {output} is the input file; write the results to another file")


def _max_line_bytes(opts: argparse.Namespace) -> int:
    if opts.max_line_bytes is None:
        return MAX_LINE_BYTES
    if opts.max_line_bytes < 1:
        raise UsageError(f"--max-line-bytes must be at least 1, not {opts.max_line_bytes}")
    return int(opts.max_line_bytes)


def parse_jsonl(opts: argparse.Namespace, out: TextIO) -> int:
    options = _checked_options(opts)
    workers = _workers(opts)
    limit = _max_line_bytes(opts)
    _not_the_input(opts.jsonl, opts.output)
    read, too_long = [0], [0]
    progress = Progress(_size(opts.jsonl))
    rows = skipped = rejected = 0
    with ExitStack() as stack:
        try:
            source = sys.stdin.buffer if opts.jsonl == "-" else stack.enter_context(open(opts.jsonl, "rb"))
            sink = stack.enter_context(open(opts.output, "wb")) if opts.output else _bytes_of(out)
        except OSError as error:
            raise UsageError(str(error)) from None
        lines = _numbered_lines(source, read, limit, too_long)
        results = ordered_map(partial(_jsonl_row, opts.field), lines, options, workers)
        for _, written, was_rejected in results:
            if isinstance(written, bytes):  # (a skipped line's reason is text)
                sink.write(written)
                rows += 1
                rejected += was_rejected
            else:
                skipped += 1
                print(f"streamparse: {written}; skipped", file=sys.stderr)
            progress.update(rows, read[0])
        sink.flush()
    progress.update(rows, read[0], final=True)
    return _exit_status(opts, rows, skipped + too_long[0], rejected)


def _exit_status(opts: argparse.Namespace, rows: int, skipped: int, rejected: int) -> int:
    if skipped:
        print(f"streamparse: {skipped} of {rows + skipped} lines skipped", file=sys.stderr)
        return LINES_SKIPPED
    return 1 if opts.strict and rejected else 0


def _checked_options(opts: argparse.Namespace) -> Options:
    if opts.file is not None:
        raise UsageError("give the input either as FILE or with --jsonl/--parquet, not both")
    return options_from_flags(opts)


def _workers(opts: argparse.Namespace) -> int:
    try:
        return check_workers(opts.workers)
    except ValueError as error:
        raise UsageError(f"--workers: {error}") from None


# ----------------------------------------------------------------------------- Parquet

def _parquet_row(options: Options, text: Any) -> tuple[str, str, str, str] | None:
    if text is None:
        return None
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"the --field column must hold text, got {type(text).__name__}")
    return message_row(parse_with(options, text))


def parse_parquet(opts: argparse.Namespace) -> int:
    options = _checked_options(opts)
    workers = _workers(opts)
    if not opts.output:
        raise UsageError("--parquet needs --output FILE (the Parquet file to write)")
    if opts.max_line_bytes is not None:
        raise UsageError("--max-line-bytes goes with --jsonl (a Parquet file has no lines)")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("--parquet needs pyarrow: pip install 'streamparse[batch]'") from None
    try:
        reader = pq.ParquetFile(opts.parquet)
    except (OSError, pa.ArrowException) as error:
        raise UsageError(f"cannot read {opts.parquet}: {error}") from None
    names = reader.schema_arrow.names
    if opts.field not in names:
        raise UsageError(f"{opts.parquet} has no column {opts.field!r}; its columns are: {', '.join(names)}")
    kind = reader.schema_arrow.field(opts.field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind)):
        raise UsageError(f"the column {opts.field!r} of {opts.parquet} holds {kind}, not text; "
                         "name the column with the outputs with --field")
    for taken in RESULT_COLUMNS:
        if taken in names:
            raise UsageError(f"{opts.parquet} already has a column {taken!r}; rename it first")
    _not_the_input(opts.parquet, opts.output)

    batches: deque[Any] = deque()

    def texts() -> Iterator[Any]:
        for batch in reader.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            if batch.num_rows:
                batches.append(batch)
            yield from batch.column(opts.field).to_pylist()

    results = ordered_map(_parquet_row, texts(), options, workers)
    progress = Progress(reader.metadata.num_rows)
    schema = reader.schema_arrow
    for name in RESULT_COLUMNS:
        schema = schema.append(pa.field(name, pa.string()))
    rows = rejected = 0
    parsed: list[tuple[str, str, str, str] | None] = []
    try:
        writer = pq.ParquetWriter(opts.output, schema)
    except (OSError, pa.ArrowException) as error:
        raise UsageError(f"cannot write {opts.output}: {error}") from None
    with writer:
        for row in results:
            parsed.append(row)
            if len(parsed) < batches[0].num_rows:
                continue
            batch = batches.popleft()
            columns = [[None if row is None else row[i] for row in parsed] for i in range(len(RESULT_COLUMNS))]
            arrays = [*batch.columns, *(pa.array(values, type=pa.string()) for values in columns)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            rows += batch.num_rows
            rejected += len([row for row in parsed if row is not None and row[3] != "[]"])
            parsed = []
            progress.update(rows, rows)
    progress.update(rows, rows, final=True)
    return _exit_status(opts, rows, 0, rejected)
