"""`streamparse parse --jsonl` / `--parquet`: every line is exactly `parse()` of its field, in input order."""

from __future__ import annotations

import io
import json
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ids
from corpus import Row, fixture_rows

import streamparse
from streamparse.batch.files import LINES_SKIPPED, Progress

SCRIPT = shutil.which("streamparse", path=str(Path(sys.executable).parent))  # this Python's own, not one on PATH
pytestmark = pytest.mark.skipif(SCRIPT is None, reason="install the package first: pip install -e '.[test]'")
ROWS = fixture_rows()
FORMATS = sorted({row.format for row in ROWS})


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT is not None
    return subprocess.run([SCRIPT, *args], check=False, input=stdin, capture_output=True, text=True, timeout=120)


def expected_message(row: Row) -> dict[str, Any]:
    message = streamparse.parse(row.text, row.format, tools=row.tools, id_factory=ids)
    rejected = [{"status": r.status, "errors": r.errors, "raw": r.raw, "name": r.name} for r in message.rejected]
    return {**message.to_openai(), "rejected": rejected}


def write_jsonl(path: Path, rows: list[Row], field: str = "text") -> Path:
    path.write_text("".join(json.dumps({"n": i, field: row.text}) + "\n" for i, row in enumerate(rows)),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_line_is_exactly_its_parse_in_input_order(fmt: str, tmp_path: Path) -> None:
    rows = [row for row in ROWS if row.format == fmt] * 3
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(rows[0].tools), encoding="utf-8")
    done = run("parse", "--jsonl", str(source), "--format", fmt, "--tools", str(tools), "--ids", "ordinal",
               "--workers", "2")
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert [record["n"] for record in out] == list(range(len(rows)))
    for row, record in zip(rows, out, strict=True):
        assert record["text"] == row.text
        assert record["message"] == expected_message(row)


def test_stdin_another_field_an_output_file_and_strict(tmp_path: Path) -> None:
    rows = [row for row in ROWS if row.format == "hermes"]
    source = write_jsonl(tmp_path / "in.jsonl", rows, field="completion")
    target = tmp_path / "out.jsonl"
    done = run("parse", "--jsonl", "-", "--field", "completion", "--ids", "ordinal", "--workers", "1",
               "--output", str(target), stdin=source.read_text(encoding="utf-8"))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    out = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [r["message"] for r in out] == [expected_message(Row(r.label, "hermes", r.text, None)) for r in rows]
    strict = run("parse", "--jsonl", str(source), "--field", "completion", "--strict", "--workers", "1")
    assert strict.returncode == 1  # the cut-short outputs have truncated calls


def test_a_bad_line_is_reported_with_its_number_skipped_and_the_exit_status_says_so(tmp_path: Path) -> None:
    lines = ['{"text": "first"}', "not json", '{"body": "no text field"}', "", '["a list"]', '{"text": 7}',
             '{"text": "x", "message": {}}', '{"text": "last"}']
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run("parse", "--jsonl", str(source), "--workers", "2")
    assert done.returncode == LINES_SKIPPED == 3
    assert [json.loads(line)["message"]["content"] for line in done.stdout.splitlines()] == ["first", "last"]
    err = done.stderr
    for reported in ("line 2: not JSON", "line 3: has no field 'text'", "line 5: not a JSON object",
                     "line 6: has a non-string field 'text'", "line 7: already has a 'message' field",
                     "5 of 7 lines skipped"):
        assert reported in err, err
    assert "line 4" not in err  # a blank line is no record
    assert "rows/s" not in err  # no progress bar when stderr is not a terminal


def test_parquet_in_parquet_out(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [row for row in ROWS if row.format == "mistral"] * 2
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"n": list(range(len(rows) + 1)), "text": [*(r.text for r in rows), None]}), source)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(rows[0].tools), encoding="utf-8")
    done = run("parse", "--parquet", str(source), "--output", str(target), "--format", "mistral", "--tools",
               str(tools), "--ids", "ordinal", "--workers", "2")
    assert done.returncode == 0, done.stderr
    out = pq.read_table(target).to_pylist()
    assert [r["n"] for r in out] == list(range(len(rows) + 1))
    for row, record in zip(rows, out[:-1], strict=True):
        want = expected_message(row)
        assert (record["content"], record["reasoning"]) == (want["content"] or "", want["reasoning_content"] or "")
        assert json.loads(record["tool_calls"]) == want.get("tool_calls", [])
        assert json.loads(record["rejected"]) == want["rejected"]
    assert out[-1]["content"] is None  # a null text stays a row, with null results


def test_misuse_exits_2(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    assert run("parse", str(source), "--jsonl", str(source)).returncode == 2
    assert run("parse", "--jsonl", str(source), "--parquet", str(source)).returncode == 2
    assert "--output and --workers go with" in run("parse", str(source), "--workers", "2").stderr
    assert "--workers" in run("parse", "--jsonl", str(source), "--workers", "0").stderr
    assert "needs --output" in run("parse", "--parquet", str(source)).stderr
    assert run("parse", "--jsonl", str(tmp_path / "missing.jsonl")).returncode == 2


def one_clear_line(done: subprocess.CompletedProcess[str], *wanted: str) -> None:
    """Exit 2 with one line on stderr that says what is wrong, no traceback."""
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    for words in wanted:
        assert words in done.stderr, done.stderr


def test_careless_inputs_of_the_files_path_end_with_one_clear_line(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    numbers, texts = tmp_path / "numbers.parquet", tmp_path / "texts.parquet"
    pq.write_table(pa.table({"text": [1, 2, 3], "completion": ["a", "b", "c"]}), numbers)
    pq.write_table(pa.table({"text": ["<think>\nhm\n</think>\n\nhi"]}), texts)
    empty, folder = tmp_path / "empty.parquet", tmp_path / "folder"
    empty.write_bytes(b"")
    folder.mkdir()
    out = str(tmp_path / "out.parquet")
    one_clear_line(run("parse", "--parquet", str(numbers), "-o", out), "'text'", "int64, not text", "--field")
    one_clear_line(run("parse", "--parquet", str(numbers), "-o", out, "--field", "nope"), "no column 'nope'",
                   "text, completion")
    one_clear_line(run("parse", "--parquet", str(empty), "-o", out), "cannot read", "0 bytes")
    one_clear_line(run("parse", "--parquet", str(folder), "-o", out), "cannot read", "directory")
    one_clear_line(run("parse", "--parquet", str(texts), "-o", str(folder)), "cannot write", "directory")
    before = texts.read_bytes()
    one_clear_line(run("parse", "--parquet", str(texts), "-o", str(texts)), "is the input file")
    assert texts.read_bytes() == before  # not truncated
    assert run("parse", "--parquet", str(numbers), "-o", out, "--field", "completion").returncode == 0

    source = write_jsonl(tmp_path / "in.jsonl", ROWS[:2])
    before_text = source.read_text(encoding="utf-8")
    one_clear_line(run("parse", "--jsonl", str(source), "-o", str(source)), "is the input file")
    assert source.read_text(encoding="utf-8") == before_text
    one_clear_line(run("parse", "--jsonl", str(folder)), "directory")
    one_clear_line(run("parse", "--jsonl", str(source), "-o", str(folder)), "directory")
    (tmp_path / "nothing.jsonl").write_bytes(b"")
    assert run("parse", "--jsonl", str(tmp_path / "nothing.jsonl")).stdout == ""  # no lines: nothing to do

    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    done = run("parse", "--jsonl", str(latin))
    assert done.returncode == LINES_SKIPPED and len(done.stdout.splitlines()) == 1
    assert "line 2: not UTF-8 text (byte 0xe9 at 13); skipped" in done.stderr


# ----------------------------------------------------------------------------- lines that cannot be read (#39)


def module_run(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI as `python -m streamparse`, with this test run's Python."""
    return subprocess.run([sys.executable, "-m", "streamparse", *args], check=False, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_line_nested_too_deeply_is_skipped_and_the_rows_around_it_are_written(tmp_path: Path,
                                                                                 workers: str) -> None:
    """Issue 39: one line nested 100,000 deep was a RecursionError traceback and exit 1, and the good
    rows of its chunk were lost (0 of 2 written)."""
    source = tmp_path / "deep.jsonl"
    deep = '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}"
    source.write_text('{"text": "first"}\n' + deep + '\n{"text": "last"}\n', encoding="utf-8")
    done = module_run("parse", "--jsonl", str(source), "--workers", workers)
    assert done.returncode == LINES_SKIPPED and "Traceback" not in done.stderr, done.stderr
    assert [json.loads(line)["message"]["content"] for line in done.stdout.splitlines()] == ["first", "last"]
    assert "line 2: nested too deeply for the JSON reader; skipped" in done.stderr
    assert "1 of 3 lines skipped" in done.stderr


def test_a_line_longer_than_max_line_bytes_is_skipped(tmp_path: Path) -> None:
    at_bound = json.dumps({"text": "a" * 100})  # exactly the bound: read
    assert len(at_bound) == 112
    source = tmp_path / "long.jsonl"
    source.write_text("\n".join(['{"text": "first"}', json.dumps({"text": "b" * 5000}), at_bound,
                                 json.dumps({"text": "c" * 101}), '{"text": "last"}']), encoding="utf-8")
    done = module_run("parse", "--jsonl", str(source), "--workers", "1", "--max-line-bytes", "112")
    assert done.returncode == LINES_SKIPPED, done.stderr
    assert [json.loads(line)["message"]["content"] for line in done.stdout.splitlines()] == [
        "first", "a" * 100, "last"]
    assert "line 2: longer than --max-line-bytes (112 bytes); skipped" in done.stderr
    assert "line 4: longer than --max-line-bytes (112 bytes); skipped" in done.stderr  # one byte over
    assert "2 of 5 lines skipped" in done.stderr
    everything = module_run("parse", "--jsonl", str(source), "--workers", "1")  # the default: 64 MiB
    assert everything.returncode == 0 and len(everything.stdout.splitlines()) == 5, everything.stderr


def _rss_and_read(pid: int) -> tuple[int, int]:
    rss = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS"))
    read = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/io").read_text().splitlines()
                if line.startswith("rchar"))
    return rss, read


@pytest.mark.skipif(not Path("/dev/zero").exists() or not Path("/proc/self/io").exists(), reason="Linux /proc")
def test_an_endless_line_is_reported_at_once_and_passed_over_in_bounded_memory() -> None:
    """Issue 39: `--jsonl /dev/zero` read its one line without bound (a MemoryError traceback). Now
    the line is reported once it passes the bound and read on without being held: after reading
    more than 50 times the bound, the process holds less than that."""
    process = subprocess.Popen([sys.executable, "-m", "streamparse", "parse", "--jsonl", "/dev/zero", "--workers",
                                "1", "--max-line-bytes", str(4 * 1024 * 1024)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        assert select.select([process.stderr], [], [], 120)[0], "nothing reported"
        reported = process.stderr.readline()
        assert reported == "streamparse: line 1: longer than --max-line-bytes (4194304 bytes); skipped\n"
        deadline = time.monotonic() + 120
        while _rss_and_read(process.pid)[1] < 200 * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.1)
        rss, read = _rss_and_read(process.pid)
        assert read >= 200 * 1024 * 1024 and rss < 150 * 1024 * 1024 and process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_max_line_bytes_is_checked(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    one_clear_line(module_run("parse", "--jsonl", str(source), "--max-line-bytes", "0"), "at least 1")
    one_clear_line(module_run("parse", str(source), "--max-line-bytes", "10"), "--max-line-bytes goes with --jsonl")
    one_clear_line(module_run("parse", "--parquet", str(source), "-o", str(tmp_path / "o"), "--max-line-bytes", "9"),
                   "--max-line-bytes goes with --jsonl")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_rows_per_second_and_an_eta_on_a_terminal() -> None:
    terminal = _Terminal()
    progress = Progress(total=1_000, stream=terminal)
    progress.update(rows=10, done=500, final=True)
    shown = terminal.getvalue()
    assert "10 rows" in shown and "rows/s" in shown and "50%" in shown and "ETA" in shown
    quiet = io.StringIO()
    Progress(total=None, stream=quiet).update(rows=10, done=0, final=True)
    assert quiet.getvalue() == ""
