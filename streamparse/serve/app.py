"""`streamparse serve`: an OpenAI-compatible chat endpoint in front of a raw `/v1/completions` server.

Per request: render the prompt with the model's chat template, call the upstream's completions
endpoint, read its text through `streamparse.openai` (one `StreamParser` per choice) and answer in
OpenAI's chat format. With the model's `tokenizer.json` the prompt goes upstream as token ids in
which request text never holds a control token (`ChatTemplate.encode`); `text_prompt` sends text.
The upstream must return special tokens as text (`skip_special_tokens: false` is sent for vLLM and
SGLang). With a tokenizer the upstream is also asked for the generated ids (`return_token_ids`,
vLLM >= 0.10.2): a choice that carries them is read token-aware (`special_tokens="require"`: calls
only from real special tokens); one that does not is read as text. Needs the `server` extra.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..openai import _ChunkMaker, chat_completion
from ..options import OPTION_NAMES, Options
from ..registry import get_format
from ..types import ReasoningField
from ..validation import compiled_tools
from .access import RequireApiKey
from .checks import InvalidRequest, InvalidUpstream, check_upstream, parse_request, parse_upstream
from .constraints import Constraint, Unenforceable, constraint_of, kind_of_models, upstream_fields
from .deadline import DeadlineExceeded, within
from .http import HttpClient, HttpError, HttpResponse
from .limits import DEFAULT_PREPARE_TIMEOUT, Limits, OverLimit, check_messages, read_body
from .metrics import CONTENT_TYPE, Metrics, shared_between_workers
from .requests import RequestLog, RequestRecord, configure_logging
from .sse import ChunkWriter, EventStream, sse
from .template import CapabilityError, ChatTemplate, TemplateRenderError
from .tokens import PromptTokenizer
from .upstream import UpstreamEvents, UpstreamStreamError, error_message, joined, relayed_headers
from .workers import Tick, run_workers

__all__ = ["ServerConfig", "create_app", "serve"]

# Chat-only request keys: consumed here, never sent upstream. Everything else (temperature, top_p,
# max_tokens, stop, seed, n, presence_penalty, vLLM's extra sampling keys, ...) is forwarded as is.
_CHAT_KEYS = frozenset({"messages", "tools", "tool_choice", "chat_template_kwargs", "stream", "stream_options",
                        "parallel_tool_calls", "logprobs", "top_logprobs", "max_completion_tokens", "model",
                        "response_format", "functions", "function_call"})
logger = logging.getLogger("streamparse")
_T = TypeVar("_T")


@dataclass(frozen=True)
class ServerConfig:
    """What one `streamparse serve` deployment is: the upstream, the template, the parser options."""

    upstream: str                       # base URL; URL/completions is called
    template: ChatTemplate
    options: Options = field(default_factory=Options)  # per request, tools and prompt are set
    model: str = "streamparse"          # the name in /v1/models and in answers when a request names none
    reasoning_field: ReasoningField = "both"
    upstream_timeout: float = 600.0     # seconds without a byte from the upstream before giving up
    max_upstream_line: int = 1 << 20    # bytes in one upstream SSE line (and an error body): more is an error
    text_prompt: bool = False           # send the prompt as text even with a tokenizer (open to injection)
    # Ask for generated token ids and read choices that carry them token-aware: "auto" reads a choice
    # without ids as text, "on" makes a choice without ids an upstream error, "off" never asks.
    upstream_token_ids: Literal["auto", "on", "off"] = "auto"
    api_key: str | None = None          # clients send `Authorization: Bearer KEY`; None: open to all
    upstream_api_key: str | None = None  # sent upstream as `Authorization: Bearer KEY`
    limits: Limits = field(default_factory=Limits)  # request body bytes, number of messages
    # The engine behind `upstream` ("vllm", "sglang", "llama.cpp"): how a tool_choice or response_format
    # is sent for it to enforce (`constraints`); None: found from its /v1/models when a request needs it.
    upstream_kind: str | None = None
    # Seconds a request's preparation may take (rendering, marking, tokenizing, compiling its tools,
    # building its grammar), counted from its arrival; past it a 504 names the step.
    prepare_timeout: float = DEFAULT_PREPARE_TIMEOUT


class RequestError(Exception):
    """Something wrong in the request or upstream, answered as OpenAI error JSON with `status`."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 body: Mapping[str, Any] | None = None, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.body = body
        self.param = param
        self.headers = headers  # sent with the answer (an upstream error's Retry-After)

    def payload(self) -> dict[str, Any]:
        if self.body is not None:
            return dict(self.body)
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.status}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.payload(), status_code=self.status, headers=self.headers)


@dataclass
class _Prepared:
    n: int
    stream: bool
    include_usage: bool
    model: str
    options: Options
    upstream_body: dict[str, Any]
    tokenizer: PromptTokenizer | None = None  # the generated ids are read with it (token-aware)
    constraint: Constraint | None = None  # what the upstream must enforce (its fields added once the engine is known)


def _id_tokenizer(config: ServerConfig) -> PromptTokenizer | None:
    """The tokenizer generated ids are read with, or None when the stream is read as text: no
    tokenizer, `--text-prompt`, `--upstream-token-ids off`, or a format with no special delimiters."""
    tokenizer = config.template.tokenizer
    if tokenizer is None or config.text_prompt or config.upstream_token_ids == "off":
        return None
    if not get_format(config.options.format).special:
        return None
    return tokenizer


class UnreadableTokenIds(Exception):
    """A choice's generated ids cannot be read: `upstream_token_ids="on"` and it came without
    `token_ids`, or one is outside the tokenizer's vocabulary."""


def _prepare(config: ServerConfig, body: dict[str, Any]) -> _Prepared:
    """The upstream request for a checked body (`checks.parse_request`)."""
    messages = body["messages"]
    tools = body.get("tools") or None
    tool_choice = body.get("tool_choice") or "auto"
    kwargs = body.get("chat_template_kwargs") or {}
    for key in config.template.reserved_variables.intersection(kwargs):
        raise RequestError(400, f"'chat_template_kwargs.{key}' is set by the proxy from the model's tokenizer "
                                "and template; a request cannot replace it", param=f"chat_template_kwargs.{key}")
    template_tools = None if tool_choice == "none" else tools
    prompt, prompt_ids = _render_prompt(config, messages, template_tools, kwargs)
    try:  # the tool schemas are checked and compiled here (a list seen before is reused), before anything is sent
        options = config.options.with_changes(prompt=prompt)
        if tool_choice == "none":  # nothing was offered: a call the model writes anyway comes back as text
            options = options.with_changes(tools=[], on_rejected="content")
        elif tools is not None:
            options = options.with_changes(tools=tools)
    except (ValueError, TypeError) as error:
        raise RequestError(400, f"invalid tools: {error}", param="tools") from None
    declared = get_format(options.format).marker_suffix
    if options.marker_suffix is None and declared is not None and declared.in_prompt(prompt) is not None:
        # The prompt's spelling of the markers (FORMATS.md, fourth wave, Decision 7): the parser and a
        # grammar the upstream enforces both read it.
        options = options.with_changes(marker_suffix=declared.in_prompt(prompt))
    spec = get_format(options.format, options.marker_suffix)
    forced_open = options.thinking_forced_open or spec.ends_inside_reasoning(prompt)
    try:
        constraint = constraint_of(body, None if options.tools is None else compiled_tools(options.tools), forced_open)
    except Unenforceable as error:
        raise RequestError(400, str(error), param=error.param) from None

    stream = body.get("stream") is True
    include_usage = (body.get("stream_options") or {}).get("include_usage") is True
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
    tokenizer = _id_tokenizer(config)
    if tokenizer is not None:
        upstream_body["return_token_ids"] = True  # vLLM; engines that do not know it ignore it
        options = options.with_changes(special_tokens="require")
    model = str(body.get("model") or config.model)
    return _Prepared(body.get("n") or 1, stream, include_usage, model, options, upstream_body, tokenizer, constraint)


def _with_tokens(chunk: dict[str, Any], tokenizer: PromptTokenizer, required: bool) -> dict[str, Any]:
    """`chunk` with the `text` of each choice that carries `token_ids` as its `Token`s (a choice
    without ids keeps its text, and is read as text; with `required` it is an `UnreadableTokenIds`, as
    is an id outside the vocabulary)."""
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return chunk
    out = []
    for choice in choices:
        ids = choice.get("token_ids") if isinstance(choice, dict) else None
        text = choice.get("text") if isinstance(choice, dict) else None
        if isinstance(ids, list) and all(isinstance(i, int) for i in ids) and isinstance(text, str):
            try:
                out.append({**choice, "text": tokenizer.generated(ids, text)})
            except ValueError as error:  # an id outside the vocabulary
                raise UnreadableTokenIds(str(error)) from None
            continue
        if required and text:  # an empty text (a finish chunk) holds nothing to misread
            raise UnreadableTokenIds("the upstream sent a choice without token_ids (--upstream-token-ids on); "
                                  "it must support return_token_ids (vLLM >= 0.10.2), or use "
                                  "--upstream-token-ids auto")
        out.append(choice)
    return {**chunk, "choices": out}


class _TextNotice:
    """Logs once per server that an upstream sent no generated ids (its answers are read as text)."""

    def __init__(self) -> None:
        self.said = False

    def check(self, chunk: Mapping[str, Any]) -> None:
        if self.said:
            return
        for choice in chunk.get("choices") or ():
            if isinstance(choice, Mapping) and choice.get("text") and not isinstance(choice.get("token_ids"), list):
                self.said = True
                logger.warning("the upstream returns no token_ids (return_token_ids is vLLM's, >= 0.10.2): its "
                               "answers are read as text, so a call delimiter spelled by ordinary tokens counts "
                               "as a call (see docs/server.md)")
                return


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
    except CapabilityError as error:
        raise RequestError(400, f"the chat template cannot render {error.capability}: {error}") from None
    except TemplateRenderError as error:
        raise RequestError(400, f"the chat template rejected the request: {error}") from None
    except ValueError as error:  # the tokenizer's vocabulary reaches a control token from ordinary text
        raise RequestError(400, f"the prompt cannot be tokenized safely: {error}") from None


def _holds_output(delta: Mapping[str, Any]) -> bool:
    """Whether an answer delta carries generated text or a call (not the role delta, not a finish)."""
    return bool(delta) and "role" not in delta


def _unexpected(request_id: str, error: BaseException) -> dict[str, Any]:
    """The last line of defence: one log line (no traceback) and an OpenAI error body naming the request."""
    logger.error("request %s: unexpected %s: %s", request_id, type(error).__name__, error)
    return {"error": {"message": f"internal error in streamparse serve (request {request_id}): {type(error).__name__}",
                      "type": "internal_error", "param": None, "code": 500}}


def create_app(config: ServerConfig) -> Starlette:
    """The ASGI app: `POST /v1/chat/completions`, `GET /v1/models` (with `config.api_key`, both need it),
    `GET /health`, `GET /metrics`; every request gets an id, a log line and its metrics (`RequestLog`)."""
    completions_url = config.upstream.rstrip("/") + "/completions"
    headers = {"Authorization": f"Bearer {config.upstream_api_key}"} if config.upstream_api_key else None
    client = HttpClient(config.upstream, config.upstream_timeout, connect_timeout=10.0, headers=headers)
    metrics = Metrics(config.options.format)
    metrics.count_rejected_calls(logger)

    async def open_upstream(prepared: _Prepared, record: RequestRecord) -> HttpResponse:
        request = json.dumps(prepared.upstream_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        try:
            response = await client.post("completions", request.encode())
        except HttpError as error:
            record.upstream_error = "unreachable"
            raise RequestError(502, f"cannot reach the upstream at {completions_url}: {error}",
                               "upstream_error") from None
        if not 200 <= response.status_code < 300:
            try:
                raw = await response.read(config.max_upstream_line)
            except HttpError:
                raw = b""
            finally:
                await response.aclose()
            message, body = error_message(response.status_code, raw)
            record.upstream_error = "status"
            relayed = relayed_headers(response.headers)  # when to try again
            if 400 <= response.status_code < 500:  # the upstream refused the request: its status and words
                raise RequestError(response.status_code, f"upstream: {message}", "upstream_error", body,
                                   headers=relayed)
            raise RequestError(502, f"the upstream answered HTTP {response.status_code}: {message}",
                               "upstream_error", headers=relayed) from None
        return response

    notice = _TextNotice()
    required = config.upstream_token_ids == "on"
    found_kind: list[str] = [config.upstream_kind] if config.upstream_kind else []

    async def upstream_kind() -> str:
        """The upstream engine's kind: `config.upstream_kind`, or what its /v1/models names (asked once)."""
        if found_kind:
            return found_kind[0]
        try:
            response = await client.get("models")
            try:
                raw = await response.read(config.max_upstream_line)
            finally:
                await response.aclose()
            kind = kind_of_models(parse_upstream(raw)) if 200 <= response.status_code < 300 else None
        except HttpError as error:
            raise RequestError(502, f"cannot reach the upstream at {config.upstream} to ask its /v1/models which "
                               f"engine it is (needed to enforce the request's constraint): {error}",
                               "upstream_error") from None
        except InvalidUpstream:
            kind = None
        if kind is None:
            raise RequestError(400, "the request's tool_choice, parallel_tool_calls, strict tools or response_format "
                               "need the upstream to enforce a grammar, and the engine behind "
                               f"{config.upstream} is not known from its /v1/models (owned_by vllm, sglang or "
                               "llamacpp): start serve with --upstream-kind vllm|sglang|llama.cpp")
        found_kind.append(kind)
        return kind

    # A request's preparation runs here, off the event loop: a costly one (a long conversation through a
    # template that branches on its text, a large tool list) never holds up /health or other requests.
    # Threads, not processes: the work is bounded in size and, by `deadline.within`, in time.
    preparing = ThreadPoolExecutor(max_workers=4, thread_name_prefix="streamparse-prepare")

    async def off_loop(expiry: float, step: str, work: Callable[[], _T]) -> _T:
        """`work()` in the preparing threads, ended (`DeadlineExceeded`) at `expiry` (a monotonic time);
        the time a request waited for a thread counts too."""
        def bounded() -> _T:
            remaining = expiry - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded(step, config.prepare_timeout)
            with within(remaining, step):
                return work()
        return await asyncio.get_running_loop().run_in_executor(preparing, bounded)

    async def constrain(prepared: _Prepared, expiry: float) -> None:
        if prepared.constraint is None:
            return
        kind = await upstream_kind()
        constraint = prepared.constraint
        try:
            fields = await off_loop(expiry, "building the grammar",
                                    lambda: upstream_fields(kind, prepared.options.format, constraint,
                                                            prepared.options.marker_suffix))
        except Unenforceable as error:
            raise RequestError(400, str(error), param=error.param) from None
        prepared.upstream_body.update(fields)

    def tokens(prepared: _Prepared, chunk: dict[str, Any]) -> dict[str, Any]:
        if prepared.tokenizer is None:
            return chunk
        notice.check(chunk)
        return _with_tokens(chunk, prepared.tokenizer, required)

    async def stream_answer(prepared: _Prepared, response: HttpResponse,
                            record: RequestRecord) -> AsyncGenerator[bytes, None]:
        """The answer's events as the upstream's arrive: what one upstream read completes is parsed and
        sent in one write, at once (nothing waits for more)."""
        maker = _ChunkMaker(prepared.options, prepared.model, None, config.reasoning_field, text_fallback=not required)
        writer = ChunkWriter(maker.id, maker.created, maker.model)
        events = UpstreamEvents(prepared.n, config.max_upstream_line)
        out = [writer.write(chunk) for chunk in maker.start(0)]

        def answer(chunks: Any) -> None:
            for chunk in chunks:
                if chunk["choices"]:
                    if record.first_token is None and _holds_output(chunk["choices"][0]["delta"]):
                        record.mark_first_token()
                elif chunk.get("usage") is not None:
                    record.add_usage(chunk["usage"])
                if chunk["choices"] or prepared.include_usage:
                    out.append(writer.write(chunk))

        try:
            yield b"".join(out)  # the role delta, before the upstream's first byte
            out.clear()
            async for data in response.pieces():
                for chunk in joined(events.feed(data)):
                    try:
                        answer(maker.read(tokens(prepared, chunk)))
                    except UnreadableTokenIds as error:
                        raise UpstreamStreamError(str(error)) from None
                if out:
                    yield b"".join(out)
                    out.clear()
                events.check()
                if events.done:
                    response.finish()  # the body's end is read in the background: the connection is kept
                    break
            events.end()
            answer(maker.end())
        except UpstreamStreamError as error:
            record.upstream_error = "stream"
            out.append(sse({"error": {"message": str(error), "type": "upstream_error", "param": None, "code": 502}}))
        except HttpError as error:
            if not response.aborted:  # else the client went away, and nobody reads this
                record.upstream_error = "stream"
                out.append(sse({"error": {"message": f"the upstream stream broke off: {error}",
                                          "type": "upstream_error", "param": None, "code": 502}}))
        except Exception as error:  # the last line of defence: every known failure is handled above
            out.append(sse(_unexpected(record.id, error)))
        finally:
            await response.aclose()  # on a client disconnect too: the upstream request is cancelled
        out.append(b"data: [DONE]\n\n")
        yield b"".join(out)

    async def chat(request: Request) -> Response:
        record: RequestRecord = request.state.record
        try:
            try:
                raw = await read_body(request.stream(), request.headers.get("content-length"),
                                      config.limits.max_body_bytes, config.limits.body_timeout)
                body = parse_request(raw)
                check_messages(body, config.limits.max_messages)
            except InvalidRequest as error:
                raise RequestError(400, str(error), param=error.param) from None
            except OverLimit as error:
                raise RequestError(error.status, str(error), param=error.param) from None
            except ClientDisconnect:  # the body ended before its Content-Length: nobody is left to answer
                raise RequestError(400, "the connection closed before the request body ended") from None
            expiry = time.monotonic() + config.prepare_timeout
            prepared = await off_loop(expiry, "preparing the request", lambda: _prepare(config, body))
            await constrain(prepared, expiry)
            if prepared.stream:
                response = await open_upstream(prepared, record)
                # `close` closes the upstream stream however the answer ends, also when the client went
                # away before the first byte (then the generator never ran its finally).
                return EventStream(stream_answer(prepared, response, record),
                                   {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                                   on_disconnect=response.abort, close=response.aclose)
            response = await open_upstream(prepared, record)
            try:
                completion = parse_upstream(await response.read())
                check_upstream(completion, prepared.n)
                if isinstance(completion, dict):
                    record.add_usage(completion.get("usage"))
                    completion = tokens(prepared, completion)
            except UnreadableTokenIds as error:
                record.upstream_error = "answer"
                raise RequestError(502, str(error), "upstream_error") from None
            except InvalidUpstream as error:
                record.upstream_error = "answer"
                raise RequestError(502, str(error), "upstream_error") from None
            except HttpError as error:
                record.upstream_error = "answer"
                raise RequestError(502, f"the upstream answer could not be read: {error}", "upstream_error") from None
            finally:
                await response.aclose()
            return JSONResponse(chat_completion(completion, prepared.options.format, model=prepared.model,
                                                reasoning_field=config.reasoning_field, text_fallback=not required,
                                                **_parser_options(prepared.options)))
        except RequestError as error:
            return error.response()
        except DeadlineExceeded as error:
            return RequestError(504, f"{error} (--prepare-timeout {config.prepare_timeout:g} s): send a shorter "
                                     "conversation or fewer tools, or raise the bound", "timeout_error").response()
        except Exception as error:  # the last line of defence: every known failure is a RequestError above
            return JSONResponse(_unexpected(record.id, error), status_code=500)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": config.model, "object": "model", "created": int(time.time()), "owned_by": "streamparse"}]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics_text(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        metrics.close()
        await client.aclose()
        preparing.shutdown(wait=False, cancel_futures=True)

    middleware = [Middleware(RequestLog, metrics=metrics)]  # outermost: a refused request is logged too
    if config.api_key:
        middleware.append(Middleware(RequireApiKey, key=config.api_key))
    return Starlette(lifespan=lifespan, middleware=middleware, routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ])


def _parser_options(options: Options) -> dict[str, Any]:
    """`options` as the adapters' keywords (every option but the positional `format`)."""
    return {name: getattr(options, name) for name in OPTION_NAMES if name != "format"}


def serve(config: ServerConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          workers: int = 1, shutdown_timeout: int = 30) -> int:
    """Run the app with uvicorn until interrupted, in `workers` processes on one port (`serve.workers`);
    the exit status. On SIGTERM (or Ctrl-C) each stops accepting, lets its open answers finish for up
    to `shutdown_timeout` seconds, cancels what is left, and ends; several workers share their metrics
    (`metrics.shared_between_workers`)."""
    import signal

    import uvicorn

    from .connection import bounded_protocol

    configure_logging(log_level)

    def settings(app: Starlette, tick: Tick | None = None) -> uvicorn.Config:
        # The HTTP protocol bounds each request head (`connection`); the app has no websockets.
        return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                              timeout_graceful_shutdown=shutdown_timeout, callback_notify=tick, timeout_notify=1,
                              http=bounded_protocol(config.limits), ws="none")

    if workers == 1:
        # uvicorn raises a caught SIGTERM again once it has shut down; with this handler in place before
        # it, that second one is ignored, so a drained server exits 0 as a supervisor expects.
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        server = uvicorn.Server(settings(create_app(config)))
        try:
            server.run()
        finally:
            signal.signal(signal.SIGTERM, previous)
        return 0 if server.started else 3  # as uvicorn.run: it never got to serve

    def serve_on(sock: socket.socket, tick: Tick) -> bool:
        server = uvicorn.Server(settings(create_app(config), tick))
        server.run(sockets=[sock])
        return server.started

    with shared_between_workers():
        return run_workers(serve_on, host, port, workers)
