"""Where streaming time goes: cProfile over the benchmark output, 4-character chunks."""

from __future__ import annotations

import cProfile
import io
import pstats

from streamparse.registry import get_format

from . import measure, outputs
from .table import size_label


def profile_streaming(format: str, size: int = 203_000, chunk: int = 4, top: int = 20) -> str:
    """The top functions (by own time, then by cumulative time) for each emit mode."""
    output = outputs.benchmark_output(get_format(format), size)
    chunks = outputs.fixed_chunks(output.text, chunk)
    report = io.StringIO()
    for emit in ("validated", "progressive"):
        profiler = cProfile.Profile()
        profiler.enable()
        measure.stream_once(format, chunks, emit)
        profiler.disable()
        print(f"=== {format}, {size_label(len(output.text))} characters, {len(chunks):,} chunks of {chunk}, "
              f"emit_calls={emit!r}", file=report)
        for order in ("tottime", "cumulative"):
            stats = pstats.Stats(profiler, stream=report)
            stats.strip_dirs().sort_stats(order).print_stats(top)
    return report.getvalue()
