"""The `streamparse` command: parse, stream, formats, detect, demo, serve. A thin loop around `StreamParser`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO, get_args

from . import __version__
from .cli_flags import UsageError, add_option_flags, options_from_flags
from .detect import detect_format, detect_marker_suffix
from .engine import StreamParser
from .gguf_metadata import is_gguf, tokenizer_problem
from .registry import formats, get_format, register_format
from .serve.limits import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_MESSAGES,
    DEFAULT_PREPARE_TIMEOUT,
    DEFAULT_RENDER_TIMEOUT,
    Limits,
)
from .template_import import format_from_response_template
from .types import ReasoningField

_PACKAGE = Path(__file__).resolve().parent


_DEMO = "qwen3_reasoning_two_calls.txt"  # the Hermes demo; other formats show their first fixture


def _fixtures_dir() -> Path:
    installed = _PACKAGE / "_fixtures"
    return installed if installed.is_dir() else _PACKAGE.parent / "fixtures"


def _parser(opts: argparse.Namespace) -> StreamParser:
    try:
        return StreamParser.from_options(options_from_flags(opts))
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None


def _message_json(parser: StreamParser, openai: bool) -> dict[str, Any]:
    message = parser.message
    if openai:
        return message.to_openai()
    return {
        "content": message.content,
        "reasoning": message.reasoning,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "arguments_json": c.arguments_json}
            for c in message.tool_calls
        ],
        "rejected": [{"status": r.status, "errors": r.errors, "raw": r.raw, "name": r.name} for r in message.rejected],
    }


def _cmd_parse(opts: argparse.Namespace, out: TextIO) -> int:
    if opts.jsonl is not None or opts.parquet is not None:
        return _cmd_parse_files(opts, out)
    if opts.output is not None or opts.workers is not None:
        raise UsageError("--output and --workers go with --jsonl or --parquet")
    if opts.max_line_bytes is not None:
        raise UsageError("--max-line-bytes goes with --jsonl")
    parser = _parser(opts)
    try:
        data = Path(opts.file).read_bytes() if opts.file not in (None, "-") else sys.stdin.buffer.read()
    except OSError as error:
        raise UsageError(f"cannot read {opts.file}: {error}") from None
    parser.feed(data)
    parser.close()
    json.dump(_message_json(parser, opts.openai), out, ensure_ascii=False, indent=2)
    out.write("\n")
    return 1 if opts.strict and parser.message.rejected else 0


def _cmd_parse_files(opts: argparse.Namespace, out: TextIO) -> int:
    """`parse --jsonl` / `--parquet`: many outputs on every core (see `streamparse.batch.files`)."""
    from .batch import files

    return files.parse_jsonl(opts, out) if opts.jsonl is not None else files.parse_parquet(opts)


def _write_deltas(deltas: Sequence[Any], out: TextIO) -> None:
    for delta in deltas:
        out.write(json.dumps(delta.to_openai(), ensure_ascii=False) + "\n")
    out.flush()


def _cmd_stream(opts: argparse.Namespace, out: TextIO) -> int:
    parser = _parser(opts)
    binary = sys.stdin.buffer
    read = getattr(binary, "read1", binary.read)
    while chunk := read(4096):
        _write_deltas(parser.feed(chunk), out)
    _write_deltas(parser.close(), out)
    return 1 if opts.strict and parser.message.rejected else 0


def _cmd_formats(opts: argparse.Namespace, out: TextIO) -> int:
    if opts.show is not None:
        return _show_format(opts.show, out)
    for name in formats():
        out.write(name + "\n")
    return 0


def _show_format(name: str, out: TextIO) -> int:
    """A format's declaration as JSON: a name or alias (declared or registered), or a model directory /
    tokenizer_config.json / response_template JSON whose `response_template` is imported."""
    try:
        if name in formats():
            spec = get_format(name)
        else:
            template = _response_template_of(_template_source(name))
            if template is None:
                raise UsageError(f"{name} is neither a format name nor a file holding a response_template")
            spec = format_from_response_template(template)
    except (OSError, ValueError) as error:
        raise UsageError(str(error)) from None
    json.dump(_described(spec), out, ensure_ascii=False, indent=2)
    out.write("\n")
    return 0


def _described(value: Any) -> Any:
    """A declaration as JSON data: dataclasses as their kind and the fields that differ from the default."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        shown: dict[str, Any] = {"kind": type(value).__name__}
        for item in dataclasses.fields(value):
            found = getattr(value, item.name)
            default = item.default if item.default is not dataclasses.MISSING else None
            if (callable(found) and not dataclasses.is_dataclass(found)) or found == default or found in ((), ""):
                continue
            shown[item.name] = _described(found)
        return shown
    if isinstance(value, (tuple, list)):
        return [_described(item) for item in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _response_template_of(source: Path | str | dict[str, Any]) -> dict[str, Any] | None:
    """The `response_template` a tokenizer_config (dict or file) or a template's model directory holds."""
    if isinstance(source, Path):
        config = source if source.name.endswith(".json") else source.parent / "tokenizer_config.json"
        if not config.is_file():
            return None
        source = json.loads(config.read_text(encoding="utf-8"))
    if isinstance(source, dict):
        found = source.get("response_template", source if "fields" in source else None)
        return found if isinstance(found, dict) else None
    return None


# What a model directory holds its template in, in the order transformers reads them.
_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


def _template_source(name: str) -> Path | str | dict[str, Any]:
    """What `detect` and `serve` read: a template file, a model directory, or `-` (stdin: template text
    or tokenizer_config JSON)."""
    if name == "-":
        text = sys.stdin.read()
        try:
            data = json.loads(text)
        except ValueError:
            return text
        return data if isinstance(data, dict) else text
    path = Path(name)
    if path.is_dir():
        for candidate in _TEMPLATE_FILES:
            if (path / candidate).is_file():
                return path / candidate
        raise UsageError(f"no {', '.join(_TEMPLATE_FILES)} in the directory {name}")
    return path


def _cmd_detect(opts: argparse.Namespace, out: TextIO) -> int:
    try:
        source = _template_source(opts.template)
        found = None if opts.show else detect_format(source)
    except OSError as error:
        raise UsageError(f"cannot read {opts.template}: {error}") from None
    except ValueError as error:
        raise UsageError(str(error)) from None
    if found is None and not opts.show:
        template = _response_template_of(_template_source(opts.template))
        if template is not None:
            try:
                format_from_response_template(template)
            except ValueError as error:
                raise UsageError(f"no declared format matches {opts.template}, and its response_template cannot be "
                                 f"read: {error}") from None
            print(f"streamparse: no declared format matches {opts.template}; its checkpoint's response_template is "
                  f"read (streamparse formats --show {opts.template})", file=sys.stderr)
            found = "response_template"
    if found is not None:
        out.write(found + "\n")
        return 0
    from .derive import DeriveError, derive

    if not opts.show:
        print(f"streamparse: no declared format matches {opts.template}, and it ships no response_template; "
              "deriving one from its renders", file=sys.stderr)
    try:
        derivation = derive(source)
    except ImportError as error:
        raise UsageError(f"deriving a format needs the server extra (jinja2): {error}") from None
    except DeriveError as error:
        print(f"streamparse: no known format in {opts.template}, and none derived: {error}", file=sys.stderr)
        return 1
    out.write(derivation.summary() + "\n")
    return 0


def _derived_format(template: Any, origin: str) -> str:
    """`serve`'s format for a chat template no declared format matches: one derived from it, registered
    under its name (`streamparse.derive`); what was derived is logged."""
    from .derive import DeriveError, derive

    try:
        derivation = derive(template)
    except DeriveError as error:
        raise UsageError(f"no known format in the chat template {origin}, and none derived ({error}); "
                         "pass --format") from None
    register_format(derivation.spec, replace=True)
    print(f"streamparse serve: no declared format matches the chat template; using one derived from its renders:\n"
          f"{derivation.summary()}", file=sys.stderr, flush=True)
    return derivation.spec.name


def _cmd_demo(opts: argparse.Namespace, out: TextIO) -> int:
    """Stream a bundled fixture in 4-character chunks, one delta per line, with visible pacing."""
    try:
        folder = _fixtures_dir() / get_format(opts.format).name
    except ValueError as error:
        raise UsageError(str(error)) from None
    bundled = sorted(folder.glob("*.txt"), key=lambda p: (p.name != _DEMO, p.name))
    fixture = Path(opts.file) if opts.file else (bundled[0] if bundled else folder / _DEMO)
    if not fixture.is_file():
        raise UsageError(f"no demo fixture at {fixture}; pass a file with --file")
    tools_file = fixture.parent / "tools.json"
    if opts.tools is None and tools_file.is_file():
        opts.tools = str(tools_file)
    prompt_file = fixture.with_suffix(".prompt")  # the end of the prompt the output followed, if bundled
    if opts.prompt is None and not opts.forced_open and prompt_file.is_file():
        opts.prompt = "@" + str(prompt_file)  # forced-open reasoning is decided from it, as a server would
    parser = _parser(opts)
    text = fixture.read_text(encoding="utf-8")
    out.write(f"# streaming {fixture.name} ({len(text)} characters) as {opts.format}, 4 characters a chunk\n")
    for start in range(0, len(text), 4):
        for delta in parser.feed(text[start:start + 4]):
            out.write(json.dumps(delta.to_openai(), ensure_ascii=False) + "\n")
            out.flush()
        time.sleep(opts.delay)
    _write_deltas(parser.close(), out)
    out.write("# final message:\n")
    json.dump(_message_json(parser, openai=True), out, ensure_ascii=False, indent=2)
    out.write("\n")
    return 0


def _cmd_serve(opts: argparse.Namespace, out: TextIO) -> int:
    """Run the OpenAI-compatible proxy (the `server` extra) until interrupted."""
    try:
        from .serve.app import ServerConfig, serve
    except ImportError as error:
        raise UsageError(f"serve needs the server extra (pip install 'streamparse[server]'): {error}") from None
    if opts.prompt is not None:
        raise UsageError("serve renders each request's prompt itself; --prompt does not apply")
    from .serve.http import split_url

    try:
        split_url(opts.upstream)
    except ValueError as error:
        raise UsageError(f"--upstream: {error}") from None
    if opts.upstream_kind == "llama-cpp-python" and not opts.text_prompt:
        raise UsageError("--upstream-kind llama-cpp-python: llama_cpp.server's /v1/completions takes a prompt only as "
                         "text (it refuses token ids) and reads control tokens in it, so request text can become "
                         "one; pass --text-prompt to accept that, or serve the model with llama.cpp's llama-server "
                         "(--upstream-kind llama.cpp), which takes token ids")
    template = _load_template(opts)
    if opts.format is None:
        try:
            opts.format, chosen = template.choose_format()
        except ValueError as error:  # neither declared nor described by the checkpoint: derived
            print(f"streamparse serve: {error}; deriving one from its renders", file=sys.stderr, flush=True)
            opts.format = _derived_format(template, opts.chat_template)
        else:
            print(f"streamparse serve: {chosen}", file=sys.stderr, flush=True)
        if get_format(opts.format).marker_suffix is not None and Path(opts.chat_template).is_dir() \
                and detect_format(Path(opts.chat_template)) is None:
            raise UsageError(f"the tokenizer in {opts.chat_template} spells the {opts.format} markers with several "
                             "suffixes; pass --format and --marker-suffix")
    if opts.marker_suffix is None and get_format(opts.format).marker_suffix is not None:
        # The checkpoint's marker suffix, from its tokenizer or template (else each prompt, or the output, says it).
        opts.marker_suffix = detect_marker_suffix(Path(opts.chat_template), opts.format)
    if opts.on_rejected is None:  # progressive: a call rejected after it started comes back as text
        opts.on_rejected = "content" if opts.emit == "progressive" else "report"
    options = options_from_flags(opts)
    path = Path(opts.chat_template).resolve()
    generic = path.stem in ("chat_template", "tokenizer_config")  # then the model directory names the model
    model = opts.model or (path.name if path.is_dir() else path.parent.name if generic else path.stem)
    print(f"streamparse serve: {get_format(opts.format).name} format, model {model!r}, upstream {opts.upstream}, "
          f"on http://{opts.host}:{opts.port}/v1", file=sys.stderr, flush=True)
    print(f"streamparse serve: the template {template.capabilities.summary()}", file=sys.stderr, flush=True)
    if template.missing_special_tokens:
        print(f"streamparse serve: warning: the template reads {', '.join(sorted(template.missing_special_tokens))} "
              "and nothing beside it defines them (no tokenizer_config.json or special_tokens_map.json): they "
              "render empty, and requests where the template joins them to text fail; give the model directory "
              "or --special-token NAME=TEXT", file=sys.stderr, flush=True)
    if opts.max_upstream_line < 1024:
        raise UsageError("--max-upstream-line must be at least 1024 bytes")
    try:
        limits = Limits(opts.max_body_bytes, opts.max_messages, opts.max_header_bytes, opts.header_timeout,
                        opts.body_timeout)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if opts.shutdown_timeout < 0:
        raise UsageError("--shutdown-timeout must be 0 or more seconds")
    api_key, upstream_api_key = _secret(opts.api_key, "--api-key"), _secret(opts.upstream_api_key, "--upstream-api-key")
    print("streamparse serve: " + ("clients must send 'Authorization: Bearer' with the API key" if api_key else
                                   "no API key: anyone who reaches the port can use the upstream (--api-key)"),
          file=sys.stderr, flush=True)
    if template.tokenizer_file is None and not opts.text_prompt:
        if is_gguf(opts.chat_template):
            raise UsageError(f"{tokenizer_problem(opts.chat_template)}: the proxy sends prompts as token ids so "
                             "that request text can never become a control token")
        raise UsageError(f"no tokenizer.json beside --chat-template {opts.chat_template}: the proxy sends prompts "
                         "as token ids so that request text can never become a control token; give the model "
                         "directory holding tokenizer.json, or pass --text-prompt (prompts sent as text: open to "
                         "special-token injection)")
    try:
        if not opts.text_prompt and template.tokenizer is not None:
            print(f"streamparse serve: prompts sent as token ids ({template.tokenizer_file})", file=sys.stderr)
    except (OSError, ValueError, ImportError) as error:
        raise UsageError(f"cannot load {template.tokenizer_file}: {error}") from None
    if opts.text_prompt:
        print("streamparse serve: --text-prompt: prompts sent as text, open to special-token injection",
              file=sys.stderr)
    config = ServerConfig(opts.upstream, template, options, model, opts.reasoning_field, opts.upstream_timeout,
                          text_prompt=opts.text_prompt, max_upstream_line=opts.max_upstream_line,
                          upstream_token_ids=opts.upstream_token_ids, api_key=api_key,
                          upstream_api_key=upstream_api_key, limits=limits, upstream_kind=opts.upstream_kind,
                          prepare_timeout=opts.prepare_timeout)
    return serve(config, opts.host, opts.port, opts.log_level, _serve_workers(opts.workers), opts.shutdown_timeout)


def _serve_workers(asked: int | None) -> int:
    """--workers, checked: default one per core (one where several cannot share a port)."""
    from .serve.workers import default_workers, workers_supported

    if asked is not None and asked < 1:
        raise UsageError(f"--workers must be at least 1, not {asked}")
    if not workers_supported():
        if asked is not None and asked > 1:
            raise UsageError("--workers above 1 needs Linux (fork and SO_REUSEPORT); run one process per port "
                             "behind a load balancer instead")
        return 1
    return asked or default_workers()


def _secret(value: str | None, flag: str) -> str | None:
    """A key from its flag (already defaulted from its environment variable); an empty one is a mistake."""
    if value is None:
        return None
    if not value.strip():
        raise UsageError(f"{flag} is empty (or its environment variable is set to nothing): give the key, or unset it")
    if not all("!" <= char <= "~" for char in value):
        raise UsageError(f"{flag} must be printable ASCII without spaces (it goes into an HTTP header)")
    return value


def _load_template(opts: argparse.Namespace) -> Any:
    """The --chat-template, with --special-token values added, compiled and probed: any failure is one line."""
    from dataclasses import replace

    from .serve.template import DeadlineExceeded, load_chat_template

    extra = {}
    for item in opts.special_token or ():
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--special-token takes NAME=TEXT (e.g. bos_token=<s>), not {item!r}")
        extra[name] = text
    try:
        template = load_chat_template(opts.chat_template)
        template = replace(template, special_tokens={**template.special_tokens, **extra},
                           render_timeout=opts.render_timeout or None)
        template.capabilities  # noqa: B018 (compiles and probes now: a template that cannot compile fails at start)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot load --chat-template {opts.chat_template}: {error}") from None
    except DeadlineExceeded as error:
        raise UsageError(f"refusing --chat-template {opts.chat_template}: {error} (--render-timeout); a chat "
                         "template is code, and this one does not finish rendering a short conversation") from None
    return template


def _read_json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise UsageError(f"{what} is not JSON: {error}") from None


def _cmd_render(opts: argparse.Namespace, out: TextIO) -> int:
    """Print the prompt the proxy would send for the messages on stdin (as llama-server's /apply-template)."""
    try:
        from .serve.template import DeadlineExceeded, TemplateRenderError
    except ImportError as error:
        raise UsageError(f"render needs the server extra (pip install 'streamparse[server]'): {error}") from None
    template = _load_template(opts)
    messages = _read_json_arg(sys.stdin.read(), "stdin")
    if isinstance(messages, dict) and "messages" in messages:  # a whole request body is accepted too
        messages = messages["messages"]
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise UsageError("stdin must hold a JSON list of message objects (or a request with 'messages')")
    tools = None
    if opts.tools is not None:
        try:
            tools = _read_json_arg(Path(opts.tools).read_text(encoding="utf-8"), f"--tools {opts.tools}")
        except OSError as error:
            raise UsageError(f"cannot read --tools {opts.tools}: {error}") from None
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise UsageError(f"--tools {opts.tools} must hold a JSON list of tool definitions")
    kwargs = _read_json_arg(opts.kwargs, "--kwargs") if opts.kwargs is not None else {}
    if not isinstance(kwargs, dict):
        raise UsageError("--kwargs must be a JSON object (e.g. '{\"enable_thinking\": false}')")
    try:
        out.write(template.render(messages, tools, not opts.no_generation_prompt, **kwargs))
    except (TemplateRenderError, DeadlineExceeded) as error:
        raise UsageError(f"the chat template cannot render these messages: {error}") from None
    return 0


def _add_template_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--chat-template", required=True,
                     help="a .jinja template, a tokenizer_config.json, a model directory holding either, "
                          "or a GGUF model file")
    sub.add_argument("--special-token", action="append", metavar="NAME=TEXT",
                     help="a template variable such as bos_token=<s>, for a bare .jinja with no "
                          "tokenizer_config.json beside it (repeatable; wins over the config)")
    sub.add_argument("--render-timeout", type=float, default=DEFAULT_RENDER_TIMEOUT, metavar="S",
                     help="the longest one render of the chat template may take, in seconds (a template is code; "
                          f"0: no bound); past it the render fails (default {DEFAULT_RENDER_TIMEOUT:g})")


def _add_render(commands: Any) -> None:
    render = commands.add_parser("render", help="print the prompt a chat template renders for messages on stdin")
    _add_template_flags(render)
    render.add_argument("--tools", help="a JSON file holding the request's tool list")
    render.add_argument("--kwargs", help="template kwargs as a JSON object, e.g. '{\"enable_thinking\": false}'")
    render.add_argument("--no-generation-prompt", action="store_true", help="leave out the assistant header")
    # --parts (which spans came from the request) belongs with ChatTemplate.render_parts (input marking).


def _cmd_replay(opts: argparse.Namespace, out: TextIO) -> int:
    """Run the replaying upstream (the `server` extra) until interrupted."""
    try:
        import uvicorn

        from .serve.replay import Replay, bundled_output, create_replay_app
    except ImportError as error:
        raise UsageError(f"replay needs the server extra (pip install 'streamparse[server]'): {error}") from None
    try:
        model = f"replay-{get_format(opts.format).name}"
        path = Path(opts.output) if opts.output else bundled_output(opts.format)
    except ValueError as error:
        raise UsageError(str(error)) from None
    try:
        output = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read the output to replay, {path}: {error}") from None
    if opts.delay < 0:
        raise UsageError("--delay must be 0 or more seconds")
    print(f"streamparse replay: {path.name} ({len(output)} characters) for every prompt, as {model!r}, "
          f"on http://{opts.host}:{opts.port}/v1", file=sys.stderr, flush=True)
    uvicorn.run(create_replay_app(Replay(output, model, opts.delay)), host=opts.host, port=opts.port,
                log_level=opts.log_level)
    return 0


def _add_replay(commands: Any) -> None:
    replay = commands.add_parser("replay", help="a stand-in upstream: answers /v1/completions with a real output "
                                                "of a format, token by token, whatever the prompt (to try serve "
                                                "without an inference engine; needs the server extra)")
    replay.add_argument("--format", "-f", default="hermes", help="whose bundled output to send (default hermes)")
    replay.add_argument("--output", help="send the text of this file instead of the bundled output")
    replay.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    replay.add_argument("--port", type=int, default=8001, help="port to listen on (default 8001)")
    replay.add_argument("--delay", type=float, default=0.01, help="seconds between pieces (default 0.01)")
    replay.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))


def _add_serve(commands: Any) -> None:
    serve_cmd = commands.add_parser("serve", help="an OpenAI-compatible /v1/chat/completions in front of a raw "
                                                  "/v1/completions server (needs the server extra)")
    serve_cmd.add_argument("--upstream", required=True,
                           help="base URL of the completions server; URL/completions is called "
                                "(e.g. http://127.0.0.1:8080/v1)")
    _add_template_flags(serve_cmd)
    serve_cmd.add_argument("--model", help="the model name in /v1/models and answers (default: the template's "
                                           "folder name); a request's own model is passed upstream")
    serve_cmd.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve_cmd.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve_cmd.add_argument("--reasoning-field", choices=get_args(ReasoningField), default="both",
                           help="the key(s) reasoning is sent under (default both: reasoning_content and reasoning)")
    serve_cmd.add_argument("--upstream-timeout", type=float, default=600.0,
                           help="seconds to wait for the upstream's next bytes (default 600)")
    serve_cmd.add_argument("--max-upstream-line", type=int, default=1 << 20, metavar="BYTES",
                           help="the longest upstream event line (and error body) read, in bytes; a longer "
                                "line ends the stream with an error event (default 1048576, 1 MiB)")
    serve_cmd.add_argument("--text-prompt", action="store_true",
                           help="send the rendered prompt as text, not token ids (needed without a tokenizer.json; "
                                "open to special-token injection: request text can become control tokens)")
    serve_cmd.add_argument("--upstream-kind", choices=("vllm", "sglang", "llama.cpp", "llama-cpp-python"),
                           help="the engine behind --upstream, which decides how tool_choice 'required', a named "
                                "function, allowed_tools, parallel_tool_calls false, strict tools and "
                                "response_format are sent for it to enforce (default: found from its /v1/models "
                                "when a request needs it); llama-cpp-python: llama_cpp.server, which needs "
                                "--text-prompt")
    serve_cmd.add_argument("--upstream-token-ids", choices=("auto", "on", "off"), default="auto",
                           help="ask the upstream for generated token ids (return_token_ids, vLLM >= 0.10.2) and "
                                "take calls only from real special tokens; auto (default): an answer without ids "
                                "is read as text; on: it is an error; off: never ask")
    serve_cmd.add_argument("--api-key", default=os.environ.get("STREAMPARSE_API_KEY"), metavar="KEY",
                           help="clients must send 'Authorization: Bearer KEY' (401 otherwise; /health and /metrics "
                                "stay open); default: the STREAMPARSE_API_KEY environment variable, which keeps the "
                                "key out of the process list")
    serve_cmd.add_argument("--upstream-api-key", default=os.environ.get("STREAMPARSE_UPSTREAM_API_KEY"),
                           metavar="KEY", help="sent upstream as 'Authorization: Bearer KEY' (vLLM --api-key); "
                                               "default: the STREAMPARSE_UPSTREAM_API_KEY environment variable")
    serve_cmd.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, metavar="BYTES",
                           help="the largest request body, counted as it arrives; larger is a 413 (default 8388608, "
                                "8 MiB)")
    serve_cmd.add_argument("--max-messages", type=int, default=DEFAULT_MAX_MESSAGES, metavar="N",
                           help=f"the most messages in one request; more is a 400 (default {DEFAULT_MAX_MESSAGES})")
    serve_cmd.add_argument("--prepare-timeout", type=float, default=DEFAULT_PREPARE_TIMEOUT, metavar="S",
                           help="the longest a request's preparation (rendering, marking, tokenizing, compiling "
                                "tools, building a grammar) may take before it is sent upstream, in seconds; past "
                                f"it a 504 names the step (default {DEFAULT_PREPARE_TIMEOUT:g})")
    serve_cmd.add_argument("--max-header-bytes", type=int, default=DEFAULT_MAX_HEADER_BYTES, metavar="BYTES",
                           help="the largest request line and headers, counted as they arrive; larger is a 431 "
                                f"and the connection closed (default {DEFAULT_MAX_HEADER_BYTES}, 16 KiB)")
    serve_cmd.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT, metavar="S",
                           help="seconds for a request line and headers to arrive, from the connection or the "
                                f"request's first byte; slower is a 408 and the connection closed (default "
                                f"{DEFAULT_HEADER_TIMEOUT:g})")
    serve_cmd.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT, metavar="S",
                           help="seconds between two reads of a request body; a body that stops short is a 408 "
                                f"(default {DEFAULT_BODY_TIMEOUT:g})")
    serve_cmd.add_argument("--shutdown-timeout", type=int, default=30, metavar="S",
                           help="on SIGTERM, stop accepting and let open answers finish for up to S seconds, then "
                                "exit (default 30)")
    serve_cmd.add_argument("--workers", type=int, metavar="N",
                           help="processes answering on the one port (default: one per core; Linux); each "
                                "request and its stream stay in one")
    serve_cmd.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                           help="info (default) logs one line per request: its id, status, duration and tokens")
    add_option_flags(serve_cmd)
    # The format comes from the template unless given; on_rejected depends on --emit (see _cmd_serve).
    serve_cmd.set_defaults(format=None, on_rejected=None)


def build_argparser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="streamparse", description=__doc__)
    top.add_argument("--version", action="version", version=f"streamparse {__version__}")
    commands = top.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        add_option_flags(sub)
        sub.add_argument("--strict", action="store_true", help="exit 1 when any call was rejected")

    parse_cmd = commands.add_parser("parse", help="parse a finished output (file or stdin) into a message")
    parse_cmd.add_argument("file", nargs="?", help="the output text; stdin when absent or -")
    parse_cmd.add_argument("--openai", action="store_true", help="print the OpenAI chat message shape")
    common(parse_cmd)
    from .batch.files import add_file_flags

    add_file_flags(parse_cmd)
    stream_cmd = commands.add_parser("stream", help="read stdin incrementally, print one delta per line (JSON Lines)")
    common(stream_cmd)
    formats_cmd = commands.add_parser("formats", help="list the accepted format names")
    formats_cmd.add_argument("--show", metavar="NAME", help="print the declaration of a format (a name, or a model "
                                                          "directory / tokenizer_config.json with a response_template)")
    detect = commands.add_parser("detect", help="name the format of a chat template or tokenizer_config.json")
    detect.add_argument("template", help="a .jinja chat template, a tokenizer_config.json, a model directory, "
                                         "a GGUF model file, or - (the template or the JSON on stdin)")
    detect.add_argument("--show", action="store_true",
                        help="derive the format from the template's renders and print what was found, even where "
                             "a declared format matches (the derivation is the fallback for templates none matches)")
    demo = commands.add_parser("demo", help="stream a bundled fixture with visible pacing")
    demo.add_argument("--file", help="stream this file instead of the bundled fixture")
    demo.add_argument("--delay", type=float, default=0.02, help="seconds between chunks")
    common(demo)
    _add_serve(commands)
    _add_replay(commands)
    _add_render(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_argparser().parse_args(argv)
    handlers = {"parse": _cmd_parse, "stream": _cmd_stream, "formats": _cmd_formats, "demo": _cmd_demo,
                "detect": _cmd_detect, "serve": _cmd_serve, "replay": _cmd_replay, "render": _cmd_render}
    try:
        return handlers[opts.command](opts, sys.stdout)
    except UsageError as error:
        print(f"streamparse: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
