"""A fake raw-completion server: a real HTTP server on 127.0.0.1 answering `/v1/completions` as vLLM does,
streaming token by token from scripted outputs or recorded llama.cpp / vLLM streams.

A request picks its script by a key written in the prompt as `[[key]]` (so concurrent requests never
share one). Every request body is recorded by key, and so is a stream the client went away from.
`/v1/models` names the engine given as `owned_by` (404 without one), as vLLM, SGLang and llama-server do.
Run alone (`python tests/upstream.py PORT`) it serves the bench's scripts.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

STREAMS = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
_KEY = re.compile(r"\[\[([^\]]+)\]\]")
_SIZES = (1, 3, 2, 5, 4, 1, 7, 2)  # a token-like chunking that splits delimiters in every way


def tokens(text: str) -> list[str]:
    """`text` cut into token-sized pieces of 1 to 7 characters."""
    pieces, start, i = [], 0, 0
    while start < len(text):
        size = _SIZES[i % len(_SIZES)]
        pieces.append(text[start:start + size])
        start, i = start + size, i + 1
    return pieces


@dataclass
class Script:
    """What the upstream answers for one key."""

    outputs: list[str] = field(default_factory=lambda: [""])  # one per choice (n)
    finish_reason: str = "stop"
    replay: str | None = None        # a recorded stream in fixtures/streams (its .jsonl name), sent verbatim
    status: int | None = None        # answer this HTTP error status instead
    message: str = "upstream refused"
    headers: dict[str, str] = field(default_factory=dict)  # sent with a `status` or `raw` answer
    break_after: int | None = None   # drop the connection after this many chunks
    error_event_after: int | None = None  # send an error event after this many chunks
    delay: float = 0.0               # seconds between chunks
    raw: list[bytes] | None = None   # answer these bytes verbatim, piece by piece (a shape the API does not promise)
    raw_status: int = 200            # the HTTP status of a `raw` answer
    # With `return_token_ids` asked for: each choice carries `token_ids`, the output encoded by
    # `Upstream.encoders[token_ids]` ("special": added tokens as their ids; "ordinary": spelled by
    # ordinary tokens), streamed a few ids a chunk with the text they decode to. None: no ids sent.
    token_ids: str | None = None


class Upstream:
    """The fake upstream in a thread of the test process."""

    def __init__(self, owned_by: str | None = None) -> None:
        self.owned_by = owned_by  # /v1/models names this owner (as vLLM "vllm", llama-server "llamacpp"); None: 404
        self.models_asked = 0     # how many times /v1/models was asked
        self.scripts: dict[str, Script] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.cancelled: set[str] = set()
        self.authorization: dict[str, str | None] = {}  # the Authorization header of each key's last request
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.decode: Callable[[list[int]], str] | None = None  # reads a token-id prompt (for its [[key]])
        self.encoders: dict[str, Callable[[str], list[int]]] = {}  # Script.token_ids -> how output is encoded

    def script(self, key: str, script: Script) -> str:
        self.scripts[key] = script
        return f"[[{key}]]"

    def last(self, key: str) -> dict[str, Any]:
        return self.requests[key][-1]

    # -- the app ------------------------------------------------------------------------------
    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            body = await request.json()
            prompt = body.get("prompt", "")
            if self.decode is not None and isinstance(prompt, list) and all(isinstance(i, int) for i in prompt):
                prompt = self.decode(prompt)
            found = _KEY.search(str(prompt))
            key = found.group(1) if found else ""
            self.requests.setdefault(key, []).append(body)
            self.authorization[key] = request.headers.get("authorization")
            script = self.scripts.get(key)
            if script is None:
                return JSONResponse({"object": "error", "message": f"no script for key {key!r}", "type": "BadRequest",
                                     "code": 400}, status_code=400)
            if script.status is not None:
                return JSONResponse({"object": "error", "message": script.message, "type": "BadRequestError",
                                     "code": script.status}, status_code=script.status, headers=script.headers)
            if script.raw is not None:
                return self._raw(script, body)
            if body.get("stream"):
                return StreamingResponse(self._events(key, script, body), media_type="text/event-stream")
            return JSONResponse(self._whole(script, body))

        async def health(request: Request) -> Response:
            return JSONResponse({"status": "ok"})

        async def models(request: Request) -> Response:
            self.models_asked += 1
            if self.owned_by is None:
                return JSONResponse({"detail": "Not Found"}, status_code=404)
            return JSONResponse({"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 1764460000, "owned_by": self.owned_by}]})

        return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]),
                                 Route("/v1/models", models), Route("/health", health)])

    @staticmethod
    def _raw(script: Script, body: dict[str, Any]) -> Response:
        async def pieces() -> AsyncIterator[bytes]:
            for piece in script.raw or ():
                yield piece
        media_type = "text/event-stream" if body.get("stream") else "application/json"
        return StreamingResponse(pieces(), status_code=script.raw_status, media_type=media_type,
                                 headers=script.headers)

    @staticmethod
    def _logprobs(piece: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if body.get("logprobs") is None:
            return None
        return {"tokens": [piece], "token_logprobs": [-0.25], "top_logprobs": [{piece: -0.25}], "text_offset": [0]}

    def _ids(self, script: Script, body: dict[str, Any]) -> Callable[[str], list[int]] | None:
        if script.token_ids is None or not body.get("return_token_ids"):
            return None
        return self.encoders[script.token_ids]

    def _token_pieces(self, text: str, encode: Callable[[str], list[int]]) -> list[tuple[str, list[int]]]:
        """`text` as its ids three at a time, each group with the new text they complete, as vLLM's
        incremental detokenizer sends it: a cut-off character is held back until its last byte."""
        assert self.decode is not None, "token ids need Upstream.decode"
        ids = encode(text)
        pieces, sent = [], 0
        for start in range(0, len(ids), 3):
            end = start + 3
            done = self.decode(ids[:end])
            if done.endswith("\ufffd") and end < len(ids):
                pieces.append(("", ids[start:end]))
                continue
            pieces.append((done[sent:], ids[start:end]))
            sent = len(done)
        assert "".join(piece for piece, _ in pieces) == text, "the fake upstream's ids must decode to the output"
        return pieces

    def _whole(self, script: Script, body: dict[str, Any]) -> dict[str, Any]:
        n = int(body.get("n") or 1)
        outputs = (script.outputs * n)[:n]
        encode = self._ids(script, body)
        choices = [{"index": i, "text": text, "logprobs": self._logprobs(text, body),
                    "finish_reason": script.finish_reason} for i, text in enumerate(outputs)]
        if encode is not None:
            for choice, text in zip(choices, outputs, strict=True):
                choice["token_ids"] = encode(text)
        return {"id": "cmpl-fake", "object": "text_completion", "created": int(time.time()), "model": body.get("model"),
                "choices": choices, "usage": {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}}

    async def _events(self, key: str, script: Script, body: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            for sent, chunk in enumerate(self._chunks(script, body)):
                if script.break_after is not None and sent >= script.break_after:
                    raise ConnectionAbortedError("the fake upstream drops the connection")
                if script.error_event_after is not None and sent >= script.error_event_after:
                    error = {"error": {"message": "CUDA out of memory", "type": "InternalServerError", "code": 500}}
                    yield f"data: {json.dumps(error)}\n\n".encode()
                    return
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                await asyncio.sleep(script.delay)
            yield b"data: [DONE]\n\n"
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled.add(key)
            raise

    def _chunks(self, script: Script, body: dict[str, Any]) -> list[dict[str, Any]]:
        if script.replay is not None:
            return [json.loads(line) for line in (STREAMS / f"{script.replay}.jsonl").read_text().splitlines()]
        n = int(body.get("n") or 1)
        outputs = (script.outputs * n)[:n]
        encode = self._ids(script, body)
        if encode is None:
            per_choice: list[list[tuple[str, list[int] | None]]] = [
                [(piece, None) for piece in tokens(text)] for text in outputs]
        else:
            per_choice = [list(self._token_pieces(text, encode)) for text in outputs]
        chunks = []
        base = {"id": "cmpl-fake", "object": "text_completion", "created": 1764460000, "model": body.get("model")}
        for step in range(max(map(len, per_choice), default=0)):  # the choices interleaved, as vLLM sends them
            for index, pieces in enumerate(per_choice):
                if step < len(pieces):
                    piece, ids = pieces[step]
                    choice = {"index": index, "text": piece, "logprobs": self._logprobs(piece, body),
                              "finish_reason": None, "stop_reason": None}
                    if ids is not None:
                        choice["token_ids"] = ids
                    chunks.append({**base, "choices": [choice], "usage": None})
        for index in range(n):
            last: dict[str, Any] = {"index": index, "text": "", "logprobs": None,
                                    "finish_reason": script.finish_reason, "stop_reason": None}
            if encode is not None:
                last["token_ids"] = []
            chunks.append({**base, "choices": [last], "usage": None})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 22,
                                                            "total_tokens": 33}})
        return chunks

    # -- running ------------------------------------------------------------------------------
    def start(self, tls: tuple[str, str] | None = None) -> Upstream:
        """Serve in a thread; with `tls` (a certificate chain file and its key file) over HTTPS."""
        certificate, key = tls or (None, None)
        config = uvicorn.Config(self.app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
                                ssl_certfile=certificate, ssl_keyfile=key)
        if tls:
            self.url = f"https://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake upstream did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


def bench_output() -> str:
    """What `python -m bench.server` streams: reasoning, content and one call, about 2,000 characters."""
    call = json.dumps({"name": "get_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}})
    return ("<think>\n" + "The user asks for the weather in Paris; I should call the tool. " * 12 + "\n</think>\n\n"
            + "Let me check that for you, and then summarise what I find in plain words. " * 12
            + f"\n<tool_call>\n{call}\n</tool_call>")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    import sys

    upstream = Upstream()
    upstream.port = int(sys.argv[1])
    upstream.scripts["bench"] = Script([bench_output()])
    uvicorn.run(upstream.app(), host="127.0.0.1", port=upstream.port, log_level="warning")
