"""A replaying upstream: `streamparse replay --format F` answers `/v1/completions` as vLLM does, with a
real output of format F (a bundled fixture, or `--output FILE`) streamed token by token, whatever the
prompt. With it `streamparse serve` can be tried, and its docs run, without an inference engine.

It answers `POST /v1/completions` (streamed or not; `n`, `max_tokens` → `finish_reason: "length"`,
`stream_options.include_usage`), `GET /v1/models` and `GET /health`. Usage counts are the replayer's
own: prompt tokens are the token ids sent (or the prompt's words), completion tokens the pieces sent.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..registry import get_format

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["Replay", "bundled_output", "create_replay_app", "pieces"]

_PACKAGE = Path(__file__).resolve().parent.parent
# Token-like pieces: a word with its leading space, a run of punctuation with its leading space, whitespace.
_PIECE = re.compile(r" ?\w+| ?[^\w\s]+|\s+")


def _fixtures_dir() -> Path:
    installed = _PACKAGE / "_fixtures"
    return installed if installed.is_dir() else _PACKAGE.parent / "fixtures"


def bundled_output(format: str) -> Path:
    """The bundled real output of `format` the replayer sends: the first fixture of its folder by name
    (`streamparse demo` streams the same outputs). A `ValueError` names the format when it has none."""
    name = get_format(format).name
    found = sorted((_fixtures_dir() / name).glob("*.txt"))
    if not found:
        raise ValueError(f"no bundled output for the format {name}: pass one with --output FILE")
    return found[0]


def pieces(text: str) -> list[str]:
    """`text` cut into token-like pieces that join back to it."""
    return _PIECE.findall(text)


@dataclass(frozen=True)
class Replay:
    """What the replayer answers: `output` for every prompt, `delay` seconds between pieces."""

    output: str
    model: str = "replay"
    delay: float = 0.0


def _prompt_tokens(prompt: Any) -> int:
    if isinstance(prompt, list):
        return len(prompt)
    return len(str(prompt).split())


def _count(body: dict[str, Any], key: str, default: int) -> int:
    value = body.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def create_replay_app(replay: Replay) -> Starlette:
    """The replayer's ASGI app."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    all_pieces = pieces(replay.output)

    def answer(body: dict[str, Any]) -> tuple[list[str], str, dict[str, int]]:
        sent = all_pieces[:_count(body, "max_tokens", len(all_pieces))]
        finish = "length" if len(sent) < len(all_pieces) else "stop"
        prompt = _prompt_tokens(body.get("prompt", ""))
        return sent, finish, {"prompt_tokens": prompt, "completion_tokens": len(sent),
                              "total_tokens": prompt + len(sent)}

    async def events(body: dict[str, Any], n: int) -> AsyncIterator[bytes]:
        sent, finish, usage = answer(body)
        base = {"id": "cmpl-replay", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model") or replay.model}
        for piece in sent:
            for index in range(n):  # the choices interleaved, as vLLM sends them
                chunk = {**base, "choices": [{"index": index, "text": piece, "logprobs": None,
                                              "finish_reason": None}], "usage": None}
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if replay.delay:
                await asyncio.sleep(replay.delay)
        for index in range(n):
            last = {**base, "choices": [{"index": index, "text": "", "logprobs": None, "finish_reason": finish}],
                    "usage": None}
            yield b"data: " + json.dumps(last).encode() + b"\n\n"
        if (body.get("stream_options") or {}).get("include_usage") is True:
            yield b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def completions(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError as error:
            return JSONResponse({"object": "error", "message": f"the body is not JSON: {error}", "code": 400},
                                status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"object": "error", "message": "the body must be a JSON object", "code": 400},
                                status_code=400)
        n = _count(body, "n", 1)
        if body.get("stream") is True:
            return StreamingResponse(events(body, n), media_type="text/event-stream")
        sent, finish, usage = answer(body)
        text = "".join(sent)
        return JSONResponse({"id": "cmpl-replay", "object": "text_completion", "created": int(time.time()),
                             "model": body.get("model") or replay.model, "usage": usage,
                             "choices": [{"index": i, "text": text, "logprobs": None, "finish_reason": finish}
                                         for i in range(n)]})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": replay.model, "object": "model",
                                                         "created": int(time.time()), "owned_by": "streamparse"}]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]),
                             Route("/v1/models", models, methods=["GET"]),
                             Route("/health", health, methods=["GET"])])
