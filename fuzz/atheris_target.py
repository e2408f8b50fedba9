"""Coverage-guided fuzzing of every format with atheris (optional; not run in CI).

    pip install atheris
    python fuzz/atheris_target.py -max_total_time=600

Checks what tests/test_fuzz.py checks, on inputs atheris evolves: no exception, stream == parse.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import streamparse
    from streamparse.families import FAMILIES

FORMATS = [spec.name for spec in FAMILIES]


def ids(ordinal: int) -> str:
    return f"call_{ordinal}"


def test_one_input(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    fmt = FORMATS[provider.ConsumeIntInRange(0, len(FORMATS) - 1)]
    forced = provider.ConsumeBool()
    step = provider.ConsumeIntInRange(1, 16)
    raw = provider.ConsumeBytes(provider.remaining_bytes())
    whole = streamparse.parse(raw, fmt, thinking_forced_open=forced, id_factory=ids)
    parser = streamparse.StreamParser(fmt, thinking_forced_open=forced, emit_calls="progressive", id_factory=ids)
    for start in range(0, len(raw), step):
        parser.feed(raw[start:start + step])
    parser.close()
    if parser.message != whole:
        raise AssertionError(f"stream != parse for {fmt}: {raw!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
