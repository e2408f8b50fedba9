"""`streamparse serve`: an OpenAI-compatible chat endpoint in front of a raw `/v1/completions` server.

Per request: render the prompt with the model's chat template, call the upstream's completions
endpoint, read its text through `streamparse.openai` (one `StreamParser` per choice) and answer in
OpenAI's chat format. With the model's `tokenizer.json` the prompt goes upstream as token ids in
which request text never holds a control token (`ChatTemplate.encode`); `text_prompt` sends text.
The upstream must return special tokens as text (`skip_special_tokens: false` is sent for vLLM and
SGLang). Needs the `server` extra.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .chat_template import ChatTemplate, TemplateRenderError
from .openai import chat_chunks, chat_completion
from .options import OPTION_NAMES, Options
from .types import ReasoningField

__all__ = ["ServerConfig", "create_app", "serve"]

# Chat-only request keys: consumed here, never sent upstream. Everything else (temperature, top_p,
# max_tokens, stop, seed, n, presence_penalty, vLLM's extra sampling keys, ...) is forwarded as is.
_CHAT_KEYS = frozenset({"messages", "tools", "tool_choice", "chat_template_kwargs", "stream", "stream_options",
                        "parallel_tool_calls", "logprobs", "top_logprobs", "max_completion_tokens", "model",
                        "response_format", "functions", "function_call"})
_TOOL_CHOICES = ("auto", "none")


@dataclass(frozen=True)
class ServerConfig:
    """What one `streamparse serve` deployment is: the upstream, the template, the parser options."""

    upstream: str                       # base URL; URL/completions is called
    template: ChatTemplate
    options: Options = field(default_factory=Options)  # per request, tools and prompt are set
    model: str = "streamparse"          # the name in /v1/models and in answers when a request names none
    reasoning_field: ReasoningField = "both"
    upstream_timeout: float = 600.0     # seconds without a byte from the upstream before giving up
    text_prompt: bool = False           # send the prompt as text even with a tokenizer (open to injection)


class RequestError(Exception):
    """Something wrong in the request or upstream, answered as OpenAI error JSON with `status`."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 body: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.body = body

    def payload(self) -> dict[str, Any]:
        if self.body is not None:
            return dict(self.body)
        return {"error": {"message": str(self), "type": self.kind, "param": None, "code": self.status}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.payload(), status_code=self.status)


class UpstreamStreamError(Exception):
    """The upstream broke off or reported an error in the middle of a stream."""


def _error_body(status: int, raw: bytes) -> tuple[str, Mapping[str, Any] | None]:
    """The upstream's error message, and its body when it already is OpenAI error JSON."""
    try:
        data = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        return text or f"upstream answered HTTP {status}", None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message", "")), data
    if isinstance(data, dict) and isinstance(data.get("message"), str):  # vLLM's {"object": "error", ...}
        return data["message"], None
    return json.dumps(data), None


def _reasoning_both_ways(message: Mapping[str, Any]) -> dict[str, Any]:
    """Assistant messages sent back may carry `reasoning` or `reasoning_content`; templates read the latter."""
    item = dict(message)
    if "reasoning_content" not in item and "reasoning" in item:
        item["reasoning_content"] = item["reasoning"]
    return item


@dataclass
class _Prepared:
    stream: bool
    include_usage: bool
    model: str
    options: Options
    upstream_body: dict[str, Any]


def _prepare(config: ServerConfig, body: Any) -> _Prepared:
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestError(400, "'messages' must be a non-empty list of message objects")
    tools = body.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise RequestError(400, "'tools' must be a list of tool definitions")
    tool_choice = body.get("tool_choice", "auto")
    if tool_choice not in _TOOL_CHOICES:
        raise RequestError(400, f"tool_choice {tool_choice!r} is not supported; use one of {', '.join(_TOOL_CHOICES)}")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise RequestError(400, "'chat_template_kwargs' must be an object")
    template_tools = None if tool_choice == "none" else tools
    prompt, prompt_ids = _render_prompt(config, [_reasoning_both_ways(m) for m in messages], template_tools, kwargs)
    try:  # the tool schemas are checked and compiled here (a list seen before is reused), before anything is sent
        options = config.options.with_changes(prompt=prompt)
        if tool_choice == "none":  # nothing was offered: a call the model writes anyway comes back as text
            options = options.with_changes(tools=[], on_rejected="content")
        elif tools is not None:
            options = options.with_changes(tools=tools)
    except (ValueError, TypeError) as error:
        raise RequestError(400, f"invalid tools: {error}") from None

    stream = bool(body.get("stream", False))
    stream_options = body.get("stream_options") or {}
    include_usage = bool(isinstance(stream_options, dict) and stream_options.get("include_usage"))
    upstream_body = {key: value for key, value in body.items() if key not in _CHAT_KEYS}
    upstream_body.update(model=body.get("model") or config.model, prompt=prompt if prompt_ids is None else prompt_ids,
                         stream=stream,
                         skip_special_tokens=False)
    if "max_completion_tokens" in body and "max_tokens" not in body:
        upstream_body["max_tokens"] = body["max_completion_tokens"]
    if body.get("logprobs"):
        upstream_body["logprobs"] = int(body.get("top_logprobs") or 0)
    if stream:
        upstream_body["stream_options"] = {"include_usage": True}
    return _Prepared(stream, include_usage, str(body.get("model") or config.model), options, upstream_body)


def _render_prompt(config: ServerConfig, messages: list[dict[str, Any]], tools: list[Any] | None,
                   kwargs: dict[str, Any]) -> tuple[str, list[int] | None]:
    """The prompt text, and its token ids when the template has a tokenizer (and not `text_prompt`):
    request text is encoded with no control tokens (`ChatTemplate.encode`)."""
    template = config.template
    tokenizer = None if config.text_prompt else template.tokenizer
    try:
        if tokenizer is None:
            return template.render(messages, tools, True, **kwargs), None
        parts = template.render_parts(messages, tools, True, **kwargs)
        return "".join(part.text for part in parts), tokenizer.encode_parts(parts)
    except TemplateRenderError as error:
        raise RequestError(400, f"the chat template rejected the request: {error}") from None
    except ValueError as error:  # the tokenizer's vocabulary reaches a control token from ordinary text
        raise RequestError(400, f"the prompt cannot be tokenized safely: {error}") from None


async def _upstream_chunks(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects of an upstream server-sent-event stream, up to `[DONE]`."""
    try:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                chunk = json.loads(data)
            except ValueError:
                raise UpstreamStreamError(f"the upstream sent an event that is not JSON: {data[:200]!r}") from None
            if isinstance(chunk, dict) and ("error" in chunk or chunk.get("object") == "error"):
                message, _ = _error_body(502, data.encode())
                raise UpstreamStreamError(f"the upstream reported an error mid-stream: {message}")
            yield chunk
    except httpx.HTTPError as error:
        raise UpstreamStreamError(f"the upstream stream broke off: {type(error).__name__}: {error}") from None
    raise UpstreamStreamError("the upstream stream ended without [DONE]")


def _sse(data: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def create_app(config: ServerConfig) -> Starlette:
    """The ASGI app: `POST /v1/chat/completions`, `GET /v1/models`, `GET /health`."""
    completions_url = config.upstream.rstrip("/") + "/completions"
    timeout = httpx.Timeout(config.upstream_timeout, connect=10.0)
    state: dict[str, httpx.AsyncClient] = {}

    def client() -> httpx.AsyncClient:
        if "client" not in state:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
            state["client"] = httpx.AsyncClient(timeout=timeout, limits=limits)
        return state["client"]

    async def open_upstream(prepared: _Prepared) -> httpx.Response:
        request = client().build_request("POST", completions_url, json=prepared.upstream_body)
        try:
            response = await client().send(request, stream=True)
        except httpx.HTTPError as error:
            raise RequestError(502, f"cannot reach the upstream at {completions_url}: {type(error).__name__}: "
                                    f"{error}", "upstream_error") from None
        if response.status_code >= 400:
            raw = await response.aread()
            await response.aclose()
            message, body = _error_body(response.status_code, raw)
            raise RequestError(response.status_code, f"upstream: {message}", "upstream_error", body)
        return response

    async def stream_answer(prepared: _Prepared, response: httpx.Response) -> AsyncIterator[bytes]:
        chunks = cast(AsyncGenerator[dict[str, Any], None], chat_chunks(
            _upstream_chunks(response), prepared.options.format, model=prepared.model,
            reasoning_field=config.reasoning_field, **_parser_options(prepared.options)))
        try:
            async for chunk in chunks:
                if not chunk["choices"] and not prepared.include_usage:
                    continue
                yield _sse(chunk)
        except UpstreamStreamError as error:
            yield _sse({"error": {"message": str(error), "type": "upstream_error", "param": None, "code": 502}})
        finally:
            await chunks.aclose()
            await response.aclose()  # on a client disconnect too: the upstream request is cancelled
        yield b"data: [DONE]\n\n"

    async def chat(request: Request) -> Response:
        try:
            try:
                body = json.loads(await request.body())
            except ValueError as error:
                raise RequestError(400, f"the request body is not JSON: {error}") from None
            prepared = _prepare(config, body)
            if prepared.stream:
                response = await open_upstream(prepared)
                # The background task closes the upstream stream however the response ends, also when the
                # client went away before the first byte (then the generator never ran its finally).
                return StreamingResponse(stream_answer(prepared, response), media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                                         background=BackgroundTask(response.aclose))
            response = await open_upstream(prepared)
            try:
                completion = json.loads(await response.aread())
            except (ValueError, httpx.HTTPError) as error:
                raise RequestError(502, f"the upstream answer could not be read: {error}", "upstream_error") from None
            finally:
                await response.aclose()
            return JSONResponse(chat_completion(completion, prepared.options.format, model=prepared.model,
                                                reasoning_field=config.reasoning_field,
                                                **_parser_options(prepared.options)))
        except RequestError as error:
            return error.response()

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": config.model, "object": "model", "created": int(time.time()), "owned_by": "streamparse"}]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if "client" in state:
            await state.pop("client").aclose()

    return Starlette(lifespan=lifespan, routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ])


def _parser_options(options: Options) -> dict[str, Any]:
    """`options` as the adapters' keywords (every option but the positional `format`)."""
    return {name: getattr(options, name) for name in OPTION_NAMES if name != "format"}


def serve(config: ServerConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run the app with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(config), host=host, port=port, log_level=log_level)
