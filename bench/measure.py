"""Timing streamparse itself: streaming by chunks, `parse()`, and the held-back high-water mark.

Each measurement is the best of a few repetitions (the least disturbed run). `settle()` empties
the garbage collector and freezes what is alive (modules, the outputs), so that collections during
a timed run look only at what that run allocates, whatever else was imported (transformers is big).
The held-back count is taken in a separate, untimed pass, so that reading it does not slow the
timed loop.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamparse


@dataclass(frozen=True)
class Reps:
    """How often to repeat one measurement: at least `least` times, then until `budget` seconds
    were spent on it, at most `most` times."""

    least: int = 2
    most: int = 25
    budget: float = 0.25


DEFAULT_REPS = Reps()
PARSE_REPS = Reps(least=5, most=50)
# The long worst-case runs: the same count at both lengths, so that neither is favoured by the minimum.
WORST_REPS = Reps(least=2, most=2, budget=0.0)


def settle() -> None:
    """Collect garbage, then move every live object out of the collector's sight (`gc.freeze`)."""
    gc.collect()
    gc.freeze()


def best_of(run: Callable[[], object], reps: Reps = DEFAULT_REPS) -> float:
    """The fastest of several timed runs, in seconds."""
    best = float("inf")
    spent = 0.0
    done = 0
    while done < reps.most and (done < reps.least or spent < reps.budget):
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        spent += elapsed
        done += 1
    return best


def stream_once(format: str, chunks: list[str], emit: str) -> None:
    parser = streamparse.StreamParser(format, emit_calls=emit)
    feed = parser.feed
    for chunk in chunks:
        feed(chunk)
    parser.close()


def parse_once(format: str, text: str) -> None:
    streamparse.parse(text, format)


@dataclass(frozen=True)
class StreamTiming:
    seconds: float
    chunks: int

    @property
    def us_per_chunk(self) -> float:
        return self.seconds * 1e6 / max(1, self.chunks)

    @property
    def ms(self) -> float:
        return self.seconds * 1e3


def time_stream(format: str, chunks: list[str], emit: str, reps: Reps = DEFAULT_REPS) -> StreamTiming:
    seconds = best_of(lambda: stream_once(format, chunks, emit), reps)
    return StreamTiming(seconds, len(chunks))


def time_parse(format: str, text: str, reps: Reps = PARSE_REPS) -> float:
    """Seconds for `streamparse.parse(text)`."""
    return best_of(lambda: parse_once(format, text), reps)


def max_held_back(format: str, chunks: list[str], emit: str, samples: int | None = None) -> int:
    """The most characters outside envelopes held back after any chunk (untimed).

    `samples`: read `held_back` about that many times, evenly spread, instead of after every chunk
    (for the long worst cases), and always after the last chunk."""
    parser = streamparse.StreamParser(format, emit_calls=emit)
    every = 1 if samples is None else max(1, len(chunks) // samples)
    most = 0
    last = len(chunks) - 1
    for position, chunk in enumerate(chunks):
        parser.feed(chunk)
        if position % every == 0 or position == last:
            most = max(most, parser.held_back)
    parser.close()
    return most


def growth_per_4x(size_a: int, seconds_a: float, size_b: int, seconds_b: float) -> float:
    """How much the time grows when the length grows 4x, from two measurements (power-law fit).

    4.0 is linear; 16.0 is quadratic. Sizes that are not exactly 4x apart are normalized."""
    import math

    if seconds_a <= 0 or seconds_b <= 0 or size_a == size_b:
        return float("nan")
    exponent = math.log(seconds_b / seconds_a) / math.log(size_b / size_a)
    return float(4.0**exponent)
