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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar, cast

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..openai import _ChunkMaker, chat_completion
from ..options import OPTION_NAMES, Options
from ..registry import get_format
from ..spec import FormatSpec
from ..types import ReasoningField
from ..validation import compiled_tools
from .access import RequireApiKey
from .apis import ApiError, ChatRequest, anthropic, llama_server, ollama, responses
from .apis.answer import Part, answer_parts
from .checks import (
    InvalidRequest,
    InvalidUpstream,
    check_request,
    check_upstream,
    parse_body,
    parse_request,
    parse_upstream,
)
from .constraints import Constraint, Unenforceable, constraint_of, kind_of_models, reads_as_text, upstream_fields
from .deadline import DeadlineExceeded, LoopBudget, within
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
    # The engine behind `upstream` (`constraints.UPSTREAM_KINDS`): how a tool_choice or response_format
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


def _id_tokenizer(config: ServerConfig, spec: FormatSpec) -> PromptTokenizer | None:
    """The tokenizer generated ids are read with, or None when the stream is read as text: no
    tokenizer, `--text-prompt`, `--upstream-token-ids off`, or a format whose calls do not all start
    at special tokens (`FormatSpec.calls_start_at_special_tokens`: read token-aware, its calls that
    start with text would be lost)."""
    tokenizer = config.template.tokenizer
    if tokenizer is None or config.text_prompt or config.upstream_token_ids == "off":
        return None
    if not spec.calls_start_at_special_tokens:
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
    kwargs = _template_kwargs(config, body)
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
    if spec.stops:  # the format's stops beyond the tokenizer's EOS: a raw engine does not know them
        upstream_body["stop"] = _merged_stops(body.get("stop"), spec.stops)
    if "max_completion_tokens" in body and "max_tokens" not in body:
        upstream_body["max_tokens"] = body["max_completion_tokens"]
    if body.get("logprobs"):
        upstream_body["logprobs"] = int(body.get("top_logprobs") or 0)
    if stream:
        upstream_body["stream_options"] = {"include_usage": True}
    tokenizer = _id_tokenizer(config, spec)
    if tokenizer is not None:
        upstream_body["return_token_ids"] = True  # vLLM; engines that do not know it ignore it
        options = options.with_changes(special_tokens="require")
    model = str(body.get("model") or config.model)
    return _Prepared(body.get("n") or 1, stream, include_usage, model, options, upstream_body, tokenizer, constraint)


def _template_kwargs(config: ServerConfig, body: dict[str, Any]) -> dict[str, Any]:
    """The request's `chat_template_kwargs`, none of them a variable the proxy sets."""
    kwargs: dict[str, Any] = body.get("chat_template_kwargs") or {}
    for key in config.template.reserved_variables.intersection(kwargs):
        raise RequestError(400, f"'chat_template_kwargs.{key}' is set by the proxy from the model's tokenizer "
                                "and template; a request cannot replace it", param=f"chat_template_kwargs.{key}")
    return kwargs


def _merged_stops(asked: str | list[str] | None, declared: tuple[str, ...]) -> list[str]:
    """The request's own `stop` (a string or a list), then the format's declared stops it lacks."""
    own = [] if asked is None else [asked] if isinstance(asked, str) else list(asked)
    return own + [stop for stop in declared if stop not in own]


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


def _render_text(config: ServerConfig, messages: list[dict[str, Any]], tools: list[Any] | None,
                 kwargs: dict[str, Any]) -> str:
    """The prompt text without the generation prompt (llama-server's `/apply-template` asked so)."""
    try:
        return config.template.render(messages, tools, False, **kwargs)
    except CapabilityError as error:
        raise RequestError(400, f"the chat template cannot render {error.capability}: {error}") from None
    except TemplateRenderError as error:
        raise RequestError(400, f"the chat template rejected the request: {error}") from None


def _holds_output(delta: Mapping[str, Any]) -> bool:
    """Whether an answer delta carries generated text or a call (not the role delta, not a finish)."""
    return bool(delta) and "role" not in delta


def _unexpected(request_id: str, error: BaseException) -> dict[str, Any]:
    """The last line of defence: one log line (no traceback) and an OpenAI error body naming the request."""
    logger.error("request %s: unexpected %s: %s", request_id, type(error).__name__, error)
    return {"error": {"message": f"internal error in streamparse serve (request {request_id}): {type(error).__name__}",
                      "type": "internal_error", "param": None, "code": 500}}


class _Writer(Protocol):
    """An API's answer events, written from the chat chunks the parser's deltas come in."""

    def begin(self, chunks: list[dict[str, Any]]) -> bytes: ...
    def write(self, chunk: dict[str, Any]) -> bytes: ...
    def end(self) -> bytes: ...
    def fail(self, body: dict[str, Any]) -> bytes: ...


class _ChatWriter:
    """Chat completions: the chunks themselves, as server-sent events, then `[DONE]`."""

    def __init__(self, maker: _ChunkMaker, prepared: _Prepared, asked: ChatRequest) -> None:
        self.chunks = ChunkWriter(maker.id, maker.created, maker.model)
        self.include_usage = prepared.include_usage

    def begin(self, chunks: list[dict[str, Any]]) -> bytes:
        return b"".join(self.chunks.write(chunk) for chunk in chunks)

    def write(self, chunk: dict[str, Any]) -> bytes:
        return self.chunks.write(chunk) if chunk["choices"] or self.include_usage else b""

    def end(self) -> bytes:
        return b"data: [DONE]\n\n"

    def fail(self, body: dict[str, Any]) -> bytes:
        return sse(body) + b"data: [DONE]\n\n"


class _Stream(Protocol):
    def start(self) -> bytes: ...
    def feed(self, part: Part) -> bytes: ...
    def end(self) -> bytes: ...
    def failed(self, message: str) -> bytes: ...


class _PartsWriter:
    """Another API: its stream object fed the parts each chat chunk carries (`apis.answer`)."""

    def __init__(self, stream: _Stream) -> None:
        self.stream = stream

    def begin(self, chunks: list[dict[str, Any]]) -> bytes:
        return self.stream.start()

    def write(self, chunk: dict[str, Any]) -> bytes:
        return b"".join(self.stream.feed(part) for part in answer_parts(chunk))

    def end(self) -> bytes:
        return self.stream.end()

    def fail(self, body: dict[str, Any]) -> bytes:
        return self.stream.failed(str(body["error"]["message"]))


@dataclass(frozen=True)
class _Api:
    """One API the proxy speaks: how its request becomes the chat request (None: it is one), its error
    shape, and how the answer is written back, streamed and whole."""

    name: str
    to_chat: Callable[[dict[str, Any]], ChatRequest] | None
    error: Callable[[int, str, str | None, str | None], dict[str, Any]]
    writer: Callable[[_ChunkMaker, _Prepared, ChatRequest], _Writer]
    whole: Callable[[dict[str, Any], _Prepared, ChatRequest, float], dict[str, Any]]
    media_type: str = "text/event-stream"
    reasoning_field: ReasoningField | None = "reasoning_content"  # None: the server's --reasoning-field


def _stopped_by(asked: ChatRequest) -> str | None:
    """The stop sequence that ended the answer, when the upstream named one of the request's (vLLM's
    `stop_reason`)."""
    found = asked.extra.get("stopped_by")
    return found if isinstance(found, str) and found in (asked.extra.get("stop_sequences") or ()) else None


_APIS: dict[str, _Api] = {api.name: api for api in (
    _Api("chat", None, lambda status, message, param, kind: {}, _ChatWriter,
         lambda answer, prepared, asked, started: answer, reasoning_field=None),
    _Api("responses", responses.to_chat,
         lambda status, message, param, kind: responses.error_body(status, message, param,
                                                                    kind or "invalid_request_error"),
         lambda maker, prepared, asked: _PartsWriter(responses.ResponseStream(prepared.model, asked.extra)),
         lambda answer, prepared, asked, started: responses.whole(answer, prepared.model, asked.extra)),
    _Api("anthropic", anthropic.to_chat, anthropic.error_body,
         lambda maker, prepared, asked: _PartsWriter(
             anthropic.MessageStream(prepared.model, lambda: _stopped_by(asked))),
         lambda answer, prepared, asked, started: anthropic.whole(answer, prepared.model, _stopped_by(asked))),
    _Api("ollama", ollama.to_chat, ollama.error_body,
         lambda maker, prepared, asked: _PartsWriter(ollama.ChatLines(prepared.model)),
         lambda answer, prepared, asked, started: ollama.whole(answer, prepared.model, started),
         media_type="application/x-ndjson"),
)}
# count_tokens takes a Messages request without its `max_tokens`
_COUNT_TOKENS = replace(_APIS["anthropic"], name="anthropic",
                        to_chat=lambda body: anthropic.to_chat({"max_tokens": 1, **body}))
OLLAMA_VERSION = "0.12.0"  # what /api/version answers: clients check it is recent enough for tools and thinking


def _set_thinking(template: ChatTemplate, asked: ChatRequest) -> None:
    """An API's thinking switch and effort, set on the template's own variables where it reads them
    (`enable_thinking` Qwen3, `thinking` DeepSeek V3.1, `reasoning_effort` gpt-oss); a request's own
    `chat_template_kwargs` win."""
    read = template.capabilities.kwargs
    kwargs = dict(asked.body.get("chat_template_kwargs") or {})
    if asked.thinking is not None:
        for name in ("enable_thinking", "thinking"):
            if name in read:
                kwargs.setdefault(name, asked.thinking)
    if asked.effort is not None and "reasoning_effort" in read:
        kwargs.setdefault("reasoning_effort", asked.effort)
    if kwargs:
        asked.body["chat_template_kwargs"] = kwargs


def create_app(config: ServerConfig) -> Starlette:
    """The ASGI app: `POST /v1/chat/completions`, `GET /v1/models`, the other APIs (`apis/`) and llama-server's
    `/apply-template`, `/tokenize`, `/detokenize` (with `config.api_key`, all need it), `GET /health`,
    `GET /metrics`; every request gets an id, a log line and its metrics (`RequestLog`)."""
    completions_url = config.upstream.rstrip("/") + "/completions"
    headers = {"Authorization": f"Bearer {config.upstream_api_key}"} if config.upstream_api_key else None
    client = HttpClient(config.upstream, config.upstream_timeout, connect_timeout=10.0, headers=headers)
    metrics = Metrics(get_format(config.options.format).name)
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
                               "llamacpp): start serve with --upstream-kind vllm|sglang|llama.cpp|llama-cpp-python")
        found_kind.append(kind)
        return kind

    # A request's preparation is tried on the event loop for at most `LoopBudget.budget` (5 ms; most
    # requests need 0.2-2 ms); what runs longer (a long conversation through a template that branches on
    # its text, a large tool list) is stopped there and done again in a preparing thread, so it never
    # holds up /health or other requests. Threads, not processes: the work is bounded in size and, by
    # `deadline.within`, in time.
    preparing = ThreadPoolExecutor(max_workers=4, thread_name_prefix="streamparse-prepare")
    on_loop = LoopBudget()

    async def off_loop(expiry: float, step: str, work: Callable[[], _T]) -> _T:
        """`work()` on the loop within its budget, else in the preparing threads, ended
        (`DeadlineExceeded`) at `expiry` (a monotonic time); the time a request waited for a thread
        counts too."""
        if expiry <= time.monotonic():
            raise DeadlineExceeded(step, config.prepare_timeout)
        done, result = on_loop.attempt(work)
        if done:
            metrics.preparations.labels("event_loop").inc()
            return cast(_T, result)
        metrics.preparations.labels("thread").inc()

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
        if prepared.tokenizer is not None and reads_as_text(kind, constraint):
            # The engine held the answer to a grammar of text: read it as text, as the grammar did.
            prepared.tokenizer = None
            prepared.options = prepared.options.with_changes(special_tokens=config.options.special_tokens)
            del prepared.upstream_body["return_token_ids"]

    def tokens(prepared: _Prepared, chunk: dict[str, Any]) -> dict[str, Any]:
        if prepared.tokenizer is None:
            return chunk
        notice.check(chunk)
        return _with_tokens(chunk, prepared.tokenizer, required)

    async def stream_answer(prepared: _Prepared, response: HttpResponse, record: RequestRecord,
                            api: _Api, asked: ChatRequest) -> AsyncGenerator[bytes, None]:
        """The answer's events as the upstream's arrive, in `api`'s shape: what one upstream read completes
        is parsed and sent in one write, at once (nothing waits for more)."""
        maker = _ChunkMaker(prepared.options, prepared.model, None, api.reasoning_field or config.reasoning_field,
                            text_fallback=not required)
        writer = api.writer(maker, prepared, asked)
        events = UpstreamEvents(prepared.n, config.max_upstream_line)
        out = [writer.begin(list(maker.start(0)))]

        def answer(chunks: Any) -> None:
            for chunk in chunks:
                if chunk["choices"]:
                    if record.first_token is None and _holds_output(chunk["choices"][0]["delta"]):
                        record.mark_first_token()
                elif chunk.get("usage") is not None:
                    record.add_usage(chunk["usage"])
                out.append(writer.write(chunk))

        failure: dict[str, Any] | None = None
        try:
            yield b"".join(out)  # the answer's start, before the upstream's first byte
            out.clear()
            async for data in response.pieces():
                for chunk in joined(events.feed(data)):
                    for choice in chunk.get("choices") or ():
                        if isinstance(choice, dict) and choice.get("stop_reason") is not None:
                            asked.extra["stopped_by"] = choice["stop_reason"]
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
            failure = {"error": {"message": str(error), "type": "upstream_error", "param": None, "code": 502}}
        except HttpError as error:
            if not response.aborted:  # else the client went away, and nobody reads this
                record.upstream_error = "stream"
                failure = {"error": {"message": f"the upstream stream broke off: {error}", "type": "upstream_error",
                                     "param": None, "code": 502}}
        except Exception as error:  # the last line of defence: every known failure is handled above
            failure = _unexpected(record.id, error)
        finally:
            await response.aclose()  # on a client disconnect too: the upstream request is cancelled
        out.append(writer.end() if failure is None else writer.fail(failure))
        yield b"".join(out)

    def error_response(api: _Api, error: RequestError) -> Response:
        if api.name == "chat":
            return error.response()
        return JSONResponse(api.error(error.status, str(error), error.param, error.kind), status_code=error.status,
                            headers=error.headers)

    async def chat_request(request: Request, api: _Api) -> tuple[ChatRequest, float]:
        """The request, read within the bounds and translated to the one chat request; its preparation's expiry."""
        try:
            raw = await read_body(request.stream(), request.headers.get("content-length"),
                                  config.limits.max_body_bytes, config.limits.body_timeout)
            expiry = time.monotonic() + config.prepare_timeout
            if api.to_chat is None:
                asked = ChatRequest(parse_request(raw))
            else:
                asked = api.to_chat(parse_body(raw))
                check_request(asked.body)  # what it translated to is checked as any chat request is
                _set_thinking(config.template, asked)
            check_messages(asked.body, config.limits.max_messages)
        except InvalidRequest as error:
            raise RequestError(400, str(error), param=error.param) from None
        except ApiError as error:
            raise RequestError(error.status, str(error), param=error.param) from None
        except OverLimit as error:
            raise RequestError(error.status, str(error), param=error.param) from None
        except ClientDisconnect:  # the body ended before its Content-Length: nobody is left to answer
            raise RequestError(400, "the connection closed before the request body ended") from None
        return asked, expiry

    async def serve_api(request: Request, api: _Api) -> Response:
        """One request of any API: translated to the chat request, prepared, sent upstream, and answered
        in the API's own shape (`serve/apis/`)."""
        record: RequestRecord = request.state.record
        try:
            asked, expiry = await chat_request(request, api)
            body = asked.body
            prepared = await off_loop(expiry, "preparing the request", lambda: _prepare(config, body))
            await constrain(prepared, expiry)
            if prepared.stream:
                response = await open_upstream(prepared, record)
                # `close` closes the upstream stream however the answer ends, also when the client went
                # away before the first byte (then the generator never ran its finally).
                return EventStream(stream_answer(prepared, response, record, api, asked),
                                   {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                                   on_disconnect=response.abort, close=response.aclose, media_type=api.media_type)
            started = time.monotonic()
            response = await open_upstream(prepared, record)
            try:
                completion = parse_upstream(await response.read())
                check_upstream(completion, prepared.n)
                if isinstance(completion, dict):
                    record.add_usage(completion.get("usage"))
                    completion = tokens(prepared, completion)
                    for choice in completion.get("choices") or ():
                        if isinstance(choice, dict) and choice.get("stop_reason") is not None:
                            asked.extra["stopped_by"] = choice["stop_reason"]
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
            answer = chat_completion(completion, prepared.options.format, model=prepared.model,
                                     reasoning_field=api.reasoning_field or config.reasoning_field,
                                     text_fallback=not required, **_parser_options(prepared.options))
            return JSONResponse(api.whole(answer, prepared, asked, started))
        except RequestError as error:
            return error_response(api, error)
        except DeadlineExceeded as error:
            return error_response(api, RequestError(
                504, f"{error} (--prepare-timeout {config.prepare_timeout:g} s): send a shorter conversation or "
                     "fewer tools, or raise the bound", "timeout_error"))
        except Exception as error:  # the last line of defence: every known failure is a RequestError above
            body = _unexpected(record.id, error)
            return error_response(api, RequestError(500, body["error"]["message"], "internal_error"))

    async def count_tokens(request: Request) -> Response:
        """`POST /v1/messages/count_tokens`: the prompt's length in the model's own tokens, exactly the ids
        the proxy would send."""
        api = _COUNT_TOKENS
        try:
            asked, expiry = await chat_request(request, api)
            tokenizer = config.template.tokenizer
            if tokenizer is None or config.text_prompt:
                raise RequestError(400, "counting tokens needs the model's tokenizer.json beside --chat-template "
                                        "(the proxy sends prompts as token ids only then)")
            body = asked.body
            prepared = await off_loop(expiry, "counting the prompt's tokens", lambda: _prepare(config, body))
            prompt = prepared.upstream_body["prompt"]
            return JSONResponse({"input_tokens": len(prompt) if isinstance(prompt, list) else 0})
        except RequestError as error:
            return error_response(api, error)
        except DeadlineExceeded as error:
            return error_response(api, RequestError(504, str(error), "timeout_error"))

    async def apply_template(request: Request) -> Response:
        """llama-server's `POST /apply-template`: `{"prompt"}`, the text the chat path renders for the request."""
        api = _APIS["chat"]
        try:
            asked, expiry = await chat_request(request, api)
            body = asked.body
            if llama_server.add_generation_prompt(body):
                prepared = await off_loop(expiry, "rendering the prompt", lambda: _prepare(config, body))
                return JSONResponse({"prompt": prepared.options.prompt})
            tools = None if body.get("tool_choice") == "none" else body.get("tools") or None
            prompt = await off_loop(expiry, "rendering the prompt", lambda: _render_text(
                config, body["messages"], tools, _template_kwargs(config, body)))
            return JSONResponse({"prompt": prompt})
        except InvalidRequest as error:
            return error_response(api, RequestError(400, str(error), param=error.param))
        except RequestError as error:
            return error_response(api, error)
        except DeadlineExceeded as error:
            return error_response(api, RequestError(504, str(error), "timeout_error"))

    async def token_endpoint(request: Request, what: str,
                             work: Callable[[PromptTokenizer, dict[str, Any]], dict[str, Any]]) -> Response:
        """llama-server's `/tokenize` or `/detokenize` (`apis.llama_server`) with the model's tokenizer."""
        try:
            raw = await read_body(request.stream(), request.headers.get("content-length"),
                                  config.limits.max_body_bytes, config.limits.body_timeout)
            expiry = time.monotonic() + config.prepare_timeout
            body = parse_body(raw)
            tokenizer = config.template.tokenizer
            if tokenizer is None:
                raise RequestError(400, f"{what} {llama_server.NEEDS_TOKENIZER}")
            return JSONResponse(await off_loop(expiry, what, lambda: work(tokenizer, body)))
        except (InvalidRequest, ApiError) as error:
            return RequestError(400, str(error), param=error.param).response()
        except OverLimit as error:
            return RequestError(error.status, str(error), param=error.param).response()
        except ClientDisconnect:
            return RequestError(400, "the connection closed before the request body ended").response()
        except RequestError as error:
            return error.response()
        except DeadlineExceeded as error:
            return RequestError(504, str(error), "timeout_error").response()

    async def tokenize(request: Request) -> Response:
        return await token_endpoint(request, "tokenizing", lambda tokenizer, body: llama_server.tokenize(
            tokenizer, llama_server.tokenize_request(body)))

    async def detokenize(request: Request) -> Response:
        return await token_endpoint(request, "detokenizing", lambda tokenizer, body: llama_server.detokenize(
            tokenizer, llama_server.detokenize_ids(body)))

    def route(api: _Api) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await serve_api(request, api)
        return endpoint

    loaded = time.time()

    async def ollama_tags(request: Request) -> Response:
        return JSONResponse(ollama.tags(config.model, loaded))

    async def ollama_show(request: Request) -> Response:
        caps = config.template.capabilities
        spec = get_format(config.options.format)
        capabilities = ["completion", *(["tools"] if caps.tools or caps.tool_calls else []),
                        *(["thinking"] if spec.reasoning else [])]
        return JSONResponse(ollama.show(config.model, config.template.text, capabilities))

    async def ollama_version(request: Request) -> Response:
        return JSONResponse({"version": OLLAMA_VERSION})

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
        Route("/v1/chat/completions", route(_APIS["chat"]), methods=["POST"]),
        Route("/v1/responses", route(_APIS["responses"]), methods=["POST"]),
        Route("/v1/messages", route(_APIS["anthropic"]), methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/api/chat", route(_APIS["ollama"]), methods=["POST"]),
        Route("/api/tags", ollama_tags, methods=["GET"]),
        Route("/api/show", ollama_show, methods=["POST"]),
        Route("/api/version", ollama_version, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/apply-template", apply_template, methods=["POST"]),  # llama-server's (apis/llama_server.py)
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/detokenize", detokenize, methods=["POST"]),
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
