"""What `streamparse serve` checks before it acts on a value it did not make: a client's request and an
upstream's answer.

A request that breaks a rule is an `InvalidRequest` naming the field (`messages[2].content[0].type`) and
what to do; the server answers it 400. An upstream answer that is not what the completions API promises
is an `InvalidUpstream`; the server answers it 502, or mid-stream an error event. Both are parsed with
jiter, which refuses a lone surrogate (escaped or raw), invalid UTF-8 and nesting deeper than 200; in a
request a `NaN`, `Infinity` or a number too large for a float (`1e400`) is refused by the walk below,
which names where it is. Cost: one pass over the containers of a request (not over its characters), and per
upstream chunk a check of its few fields; the non-finite repair walks a whole answer only when its bytes
could hold a non-finite number, and of a stream chunk only the parts sent on (`parse_chunk`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jiter

__all__ = ["MAX_DEPTH", "MAX_N", "InvalidRequest", "InvalidUpstream", "check_request", "check_upstream", "need",
           "optional", "parse_body", "parse_chunk", "parse_request", "parse_upstream", "type_name"]

MAX_DEPTH = 64          # nesting of a request below its top object: more is refused
MAX_N = 128             # choices per request, as OpenAI bounds `n`
MAX_TOP_LOGPROBS = 20   # as OpenAI bounds `top_logprobs`
_INT64 = 2 ** 63
_LOW_LOGPROB = -9999.0  # what vLLM sends for a logprob of -inf (serving_completion clamps to it)
# Bytes that may hold a non-finite number once Python reads them: NaN, Infinity, or an exponent of 3+ digits.
_MAYBE_NONFINITE = re.compile(rb"NaN|Infinity|[eE][+-]?\d{3}")


class InvalidRequest(ValueError):
    """A request field is wrong: `param` names it (None for the body as a whole)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class InvalidUpstream(ValueError):
    """The upstream's answer is not the shape the completions API promises."""


# -- the request --------------------------------------------------------------------------------------------


def parse_request(raw: bytes) -> dict[str, Any]:
    """The request body as a checked dict, or `InvalidRequest`."""
    body = parse_body(raw)
    check_request(body)
    return body


def parse_body(raw: bytes) -> dict[str, Any]:
    """Any API's request body as a dict: JSON as the proxy reads it, every number finite, nesting bounded;
    its fields are the API's to check."""
    try:
        body = jiter.from_json(raw, cache_mode="keys")  # NaN/Infinity read here, refused by _walk with their path
    except ValueError as error:
        raise InvalidRequest(f"the request body is not JSON as this proxy reads it (UTF-8 without lone "
                             f"surrogates, nested at most {MAX_DEPTH} deep): {error}") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    _walk(body, "", 0)
    return body


def _walk(value: Any, path: str, depth: int) -> None:
    """Every number finite and the nesting bounded, anywhere in the body (forwarded keys too)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequest(f"'{path}' is NaN, infinite or too large for a float; send a finite number", path)
    elif isinstance(value, (dict, list)):
        if depth >= MAX_DEPTH:
            raise InvalidRequest(f"{path} is nested deeper than {MAX_DEPTH} levels", path)
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, (dict, list, float)):
                    _walk(item, f"{path}.{key}" if path else key, depth + 1)
        else:
            for i, item in enumerate(value):
                if isinstance(item, (dict, list, float)):
                    _walk(item, f"{path}[{i}]", depth + 1)


def _kind(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _need(ok: bool, param: str, value: Any, what: str) -> None:
    if not ok:
        raise InvalidRequest(f"'{param}' must be {what}, not {_kind(value)}", param)


def _optional(body: Mapping[str, Any], key: str, test: Callable[[Any], bool], what: str, prefix: str = "") -> Any:
    """`body[key]` when present and not null, checked with `test`."""
    value = body.get(key)
    if value is not None:
        _need(test(value), prefix + key, value, what)
    return value


# The same checks for the other APIs' translators (`serve/apis/`), which name their own fields.
need, optional, type_name = _need, _optional, _kind


def _int_in(low: int, high: int) -> Callable[[Any], bool]:
    return lambda value: _is_int(value) and low <= value <= high


_SAMPLING_NUMBERS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
                     "min_p")
_RENDER_ARGUMENTS = frozenset({"messages", "tools", "add_generation_prompt"})  # ChatTemplate.render's own
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})  # OpenAI's chat roles
_NOT_TEXT = {"image_url": "images", "input_image": "images", "image": "images", "input_audio": "audio",
             "audio_url": "audio", "video_url": "video", "file": "files"}


def check_request(body: Mapping[str, Any]) -> None:
    """Every field the proxy reads or forwards by name has the type the chat API gives it; the first
    wrong one is an `InvalidRequest`. Keys it does not know are left to the upstream."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest(f"'messages' must be a non-empty list of message objects, not {_kind(messages)}"
                             f"{' (empty)' if messages == [] else ''}", "messages")
    for i, message in enumerate(messages):
        _check_message(message, f"messages[{i}]")
    tools = _optional(body, "tools", lambda value: isinstance(value, list), "a list of tool definitions")
    for i, tool in enumerate(tools or ()):
        _check_tool(tool, f"tools[{i}]")
    _check_tool_choice(body.get("tool_choice"), [tool["function"]["name"] for tool in tools or ()])
    _check_response_format(body.get("response_format"))
    for key in ("parallel_tool_calls", "stream", "logprobs"):
        _optional(body, key, lambda value: isinstance(value, bool), "true or false")
    options = _optional(body, "stream_options", lambda value: isinstance(value, dict), "an object")
    if options:
        _optional(options, "include_usage", lambda value: isinstance(value, bool), "true or false", "stream_options.")
    _optional(body, "n", _int_in(1, MAX_N), f"an integer from 1 to {MAX_N}")
    _optional(body, "top_logprobs", _int_in(0, MAX_TOP_LOGPROBS), f"an integer from 0 to {MAX_TOP_LOGPROBS}")
    for key in ("max_tokens", "max_completion_tokens"):
        _optional(body, key, _int_in(1, _INT64 - 1), "a positive integer")
    for key in _SAMPLING_NUMBERS:
        _optional(body, key, _is_number, "a finite number")
    _optional(body, "top_k", _int_in(-1, _INT64 - 1), "an integer (-1 for no limit)")
    _optional(body, "seed", _int_in(-_INT64, _INT64 - 1), "a 64-bit integer")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str):
        _need(isinstance(stop, list), "stop", stop, "a string or a list of strings")
        for i, item in enumerate(stop):
            _need(isinstance(item, str), f"stop[{i}]", item, "a string")
    kwargs = _optional(body, "chat_template_kwargs", lambda value: isinstance(value, dict), "an object")
    for key in _RENDER_ARGUMENTS.intersection(kwargs or ()):
        raise InvalidRequest(f"'chat_template_kwargs.{key}' is set by the proxy from the request; send it as the "
                             "request's own field, not as a template kwarg", f"chat_template_kwargs.{key}")
    _optional(body, "model", lambda value: isinstance(value, str), "a string")


_NAMED = "{'type': 'function', 'function': {'name': ...}}"
_ALLOWED = ("{'type': 'allowed_tools', 'allowed_tools': {'mode': 'auto' or 'required', 'tools': [" + _NAMED
            + ", ...]}}")


def _check_tool_choice(choice: Any, names: list[str]) -> None:
    """`tool_choice` is "auto", "none", "required", a named function or OpenAI's allowed_tools, and
    every tool it names is among the request's tools."""
    if choice is None or choice in ("auto", "none"):
        return
    if choice == "required":
        if not names:
            raise InvalidRequest("tool_choice 'required' needs tools: send 'tools', or use 'auto' or 'none'",
                                 "tool_choice")
        return
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools")
        entries = allowed.get("tools") if isinstance(allowed, dict) else None
        if not isinstance(allowed, dict) or allowed.get("mode") not in ("auto", "required") \
                or not isinstance(entries, list) or not entries:
            raise InvalidRequest(f"'tool_choice' of type allowed_tools must look like {_ALLOWED}", "tool_choice")
        for i, entry in enumerate(entries):
            _named(entry, names, f"tool_choice.allowed_tools.tools[{i}]")
        return
    if isinstance(choice, dict):
        _named(choice, names, "tool_choice")
        return
    raise InvalidRequest(f"'tool_choice' must be 'auto', 'none', 'required', {_NAMED} or allowed_tools, "
                         f"not {choice!r}", "tool_choice")


def _named(entry: Any, names: list[str], path: str) -> None:
    function = entry.get("function") if isinstance(entry, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(entry, dict) or entry.get("type") != "function" or not isinstance(name, str):
        raise InvalidRequest(f"'{path}' must look like {_NAMED}, not {entry!r}", path)
    if name not in names:
        listed = ", ".join(map(repr, names)) or "none were sent"
        raise InvalidRequest(f"'{path}' names the function {name!r}, which is not among the request's tools "
                             f"({listed}); name one of them, or add it to 'tools'", f"{path}.function.name")


def _check_response_format(value: Any) -> None:
    """`response_format` is {"type": "text"}, {"type": "json_object"} or {"type": "json_schema",
    "json_schema": {"name": ..., "schema": {...}, "strict": ...}}."""
    if value is None:
        return
    _need(isinstance(value, dict), "response_format", value, "an object ({'type': 'text', 'json_object' or "
                                                             "'json_schema'})")
    kind = value.get("type")
    if kind in ("text", "json_object"):
        return
    if kind != "json_schema":
        raise InvalidRequest(f"'response_format.type' must be 'text', 'json_object' or 'json_schema', not {kind!r}",
                             "response_format.type")
    spec = value.get("json_schema")
    _need(isinstance(spec, dict), "response_format.json_schema", spec,
          "an object ({'name': ..., 'schema': {...}, 'strict': true})")
    _optional(spec, "name", lambda item: isinstance(item, str), "a string", "response_format.json_schema.")
    _optional(spec, "strict", lambda item: isinstance(item, bool), "true or false", "response_format.json_schema.")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequest(f"'response_format.json_schema.schema' must be a JSON Schema object, not {_kind(schema)}"
                             " (send the schema the answer must follow)", "response_format.json_schema.schema")


def _check_message(message: Any, path: str) -> None:
    _need(isinstance(message, dict), path, message, "a message object")
    role = message.get("role")
    _need(isinstance(role, str) and bool(role), f"{path}.role", role,
          "a string ('system', 'developer', 'user', 'assistant' or 'tool')")
    if role not in _ROLES:  # a template would leave the message out: a safety policy could vanish unseen
        hint = f"; roles are lower case: {role.lower()!r}" if role.lower() in _ROLES else ""
        raise InvalidRequest(f"'{path}.role' is {role!r}, which no chat template renders: send one of 'system', "
                             f"'developer', 'user', 'assistant' or 'tool'{hint}", f"{path}.role")
    if role == "function":
        raise InvalidRequest(f"'{path}.role' is 'function', the chat API's deprecated function result, which chat "
                             "templates do not render: send it as a 'tool' message with the call's tool_call_id",
                             f"{path}.role")
    content = message.get("content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            _check_part(part, f"{path}.content[{j}]")
    elif content is not None:
        _need(isinstance(content, str), f"{path}.content", content, "a string, null or a list of text parts")
    for key in ("name", "tool_call_id", "reasoning", "reasoning_content", "thinking", "refusal"):
        _optional(message, key, lambda value: isinstance(value, str), "a string", f"{path}.")
    calls = _optional(message, "tool_calls", lambda value: isinstance(value, list), "a list of tool calls",
                      f"{path}.")
    for j, call in enumerate(calls or ()):
        where = f"{path}.tool_calls[{j}]"
        _need(isinstance(call, dict), where, call, "a tool call object ({'id', 'type', 'function'})")
        _optional(call, "id", lambda value: isinstance(value, str), "a string", f"{where}.")
        _optional(call, "type", lambda value: value == "function", "'function'", f"{where}.")
        function = call.get("function")
        _need(isinstance(function, dict), f"{where}.function", function, "an object with 'name' and 'arguments'")
        name = function.get("name")
        _need(isinstance(name, str) and bool(name), f"{where}.function.name", name, "a non-empty string")
        _optional(function, "arguments", lambda value: isinstance(value, (str, dict)),
                  "a string of JSON text or an object", f"{where}.function.")


def _check_part(part: Any, path: str) -> None:
    _need(isinstance(part, dict), path, part, "a content part object ({'type': 'text', 'text': ...})")
    kind = part.get("type")
    if kind == "text":
        _need(isinstance(part.get("text"), str), f"{path}.text", part.get("text"), "a string")
        return
    if kind in _NOT_TEXT:
        raise InvalidRequest(f"{path} is a {kind!r} part: {_NOT_TEXT[kind]} are not supported by this proxy "
                             "(text only); send the content as text parts or a string", f"{path}.type")
    raise InvalidRequest(f"'{path}.type' must be 'text', not {kind!r}", f"{path}.type")


def _check_tool(tool: Any, path: str) -> None:
    _need(isinstance(tool, dict), path, tool, "a tool object ({'type': 'function', 'function': {...}})")
    _optional(tool, "type", lambda value: value == "function", "'function'", f"{path}.")
    function = tool.get("function")
    _need(isinstance(function, dict), f"{path}.function", function, "an object with 'name' and 'parameters'")
    name = function.get("name")
    _need(isinstance(name, str) and bool(name), f"{path}.function.name", name, "a non-empty string")
    _optional(function, "description", lambda value: isinstance(value, str), "a string", f"{path}.function.")
    _optional(function, "parameters", lambda value: isinstance(value, dict), "a JSON Schema object",
              f"{path}.function.")
    _optional(function, "strict", lambda value: isinstance(value, bool), "true or false", f"{path}.function.")


# -- the upstream's answer ----------------------------------------------------------------------------------


def parse_upstream(raw: bytes | str) -> Any:
    """An upstream JSON value with every non-finite number made finite JSON: a logprob of -inf (which
    an engine may write as `-Infinity`) becomes -9999.0 as vLLM clamps it; NaN and +inf become null."""
    try:
        value = jiter.from_json(raw.encode() if isinstance(raw, str) else raw, cache_mode="keys")
    except ValueError as error:
        raise InvalidUpstream(f"the upstream sent JSON that cannot be read: {error}") from None
    if _MAYBE_NONFINITE.search(raw.encode() if isinstance(raw, str) else raw):
        value = _finite(value)
    return value


def parse_chunk(raw: bytes, n: int) -> dict[str, Any]:
    """One event of an upstream stream, checked (`check_upstream`) unless it is an error object (the
    caller reports those); the parts the proxy forwards (`logprobs`, `usage`) made finite as in
    `parse_upstream`. Per event this is a jiter parse and a check of a few fields: the bytes are not
    searched again, and nothing is walked that holds no number sent on."""
    try:
        value = jiter.from_json(raw, cache_mode="keys")
    except ValueError as error:
        raise InvalidUpstream(f"the upstream sent JSON that cannot be read: {error}") from None
    if isinstance(value, dict) and ("error" in value or value.get("object") == "error"):
        return value
    check_upstream(value, n)
    for choice in value["choices"]:
        if choice.get("logprobs") is not None:
            choice["logprobs"] = _finite(choice["logprobs"])
    if value.get("usage") is not None:
        value["usage"] = _finite(value["usage"])
    return value  # type: ignore[no-any-return]


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return _LOW_LOGPROB if value < 0 else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def check_upstream(answer: Any, n: int) -> None:
    """`answer` (a whole completion or one stream chunk) has the completions shape the proxy reads:
    an object with a `choices` list whose entries have a string `text`, an `index` below `n`, a string
    or null `finish_reason` and completions-shaped `logprobs`; `usage` an object of integer counts."""
    if not isinstance(answer, dict):
        raise InvalidUpstream(f"the upstream answer is {_kind(answer)}, not a completion object")
    choices = answer.get("choices")
    if not isinstance(choices, list):
        raise InvalidUpstream(f"the upstream answer's 'choices' is {_kind(choices)}, not a list")
    for i, choice in enumerate(choices):
        if (type(choice) is dict and type(choice.get("text")) is str and choice.get("logprobs") is None
                and type(choice.get("finish_reason", "")) in (str, type(None))
                and type(index := choice.get("index", i)) is int and 0 <= index < n):
            continue  # the shape of nearly every stream chunk, told in one test
        if not isinstance(choice, dict):
            raise InvalidUpstream(f"the upstream's choices[{i}] is {_kind(choice)}, not an object")
        index = choice.get("index", i)
        if not _is_int(index) or not 0 <= index < n:
            raise InvalidUpstream(f"the upstream's choices[{i}].index is {index!r}, not an integer below n={n}")
        if not isinstance(choice.get("text"), str):
            raise InvalidUpstream(f"the upstream's choices[{i}].text is {_kind(choice.get('text'))}, not a string")
        if choice.get("finish_reason") is not None and not isinstance(choice["finish_reason"], str):
            raise InvalidUpstream(f"the upstream's choices[{i}].finish_reason is not a string")
        _check_logprobs(choice.get("logprobs"), f"choices[{i}].logprobs")
    usage = answer.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise InvalidUpstream(f"the upstream's usage is {_kind(usage)}, not an object")
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if usage.get(key) is not None and not _is_int(usage[key]):
                raise InvalidUpstream(f"the upstream's usage.{key} is {_kind(usage[key])}, not an integer")


def _check_logprobs(logprobs: Any, path: str) -> None:
    """Completions-shaped logprobs are converted (so checked); another object (llama.cpp's chat shape)
    passes as it is."""
    if logprobs is None:
        return
    if not isinstance(logprobs, dict):
        raise InvalidUpstream(f"the upstream's {path} is {_kind(logprobs)}, not an object")
    if "tokens" not in logprobs:
        return
    tokens, values, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
        raise InvalidUpstream(f"the upstream's {path}.tokens is not a list of strings")
    if values is not None and not (isinstance(values, list) and _numbers(values)):
        raise InvalidUpstream(f"the upstream's {path}.token_logprobs is not a list of numbers")
    if tops is not None and not (isinstance(tops, list) and all(
            top is None or (isinstance(top, dict) and _numbers(top.values())) for top in tops)):
        raise InvalidUpstream(f"the upstream's {path}.top_logprobs is not a list of token → logprob objects")


def _numbers(values: Iterable[Any]) -> bool:
    return all(value is None or _is_number(value) for value in values)
