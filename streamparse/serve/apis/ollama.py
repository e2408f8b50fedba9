"""Ollama's chat API (`POST /api/chat`, with `GET /api/tags`, `POST /api/show` and `GET /api/version`
as far as Ollama's clients need them to start).

In: `messages` (with `thinking`, and `tool_calls` whose `arguments` are objects; a tool result's
`tool_name`), `tools`, `think` (true/false or an effort), `format` (`"json"` or a JSON Schema),
`options` (mapped to the sampling fields: `num_predict` is `max_tokens`, `repeat_penalty`
`repetition_penalty`), `stream` (default true). Out: NDJSON lines `{"model", "created_at", "message",
"done": false}` as the answer comes, a call in one line once it is whole (Ollama's clients read them
so), then `{"done": true, "done_reason", ...counts}`. Errors are `{"error": "..."}`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from ..checks import need, optional
from . import ApiError, ChatRequest
from .answer import Answer, Part

__all__ = ["ChatLines", "error_body", "show", "tags", "to_chat", "whole"]

_OPTIONS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p", "seed": "seed",
            "stop": "stop", "num_predict": "max_tokens", "repeat_penalty": "repetition_penalty",
            "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty"}
# Options about the model's loading and the machine: the upstream engine decides them, not a request.
_ENGINE_OPTIONS = frozenset({"num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "use_mmap", "use_mlock",
                             "numa", "low_vram", "vocab_only", "num_keep", "typical_p", "repeat_last_n", "mirostat",
                             "mirostat_tau", "mirostat_eta", "penalize_newline", "tfs_z"})
_KNOWN = frozenset({"model", "messages", "tools", "think", "format", "options", "stream", "keep_alive"})


def error_body(status: int, message: str, param: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """Ollama's error shape: `{"error": "..."}`."""
    return {"error": f"{param}: {message}" if param and param not in message else message}


def _messages(messages: Any) -> list[dict[str, Any]]:
    need(isinstance(messages, list) and bool(messages), "messages", messages, "a non-empty list of messages")
    out = []
    pending: list[str] = []  # ids given to calls, answered in order by tool messages that name none
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        need(isinstance(message, dict), path, message, "a message object ({'role', 'content'})")
        role = message.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise ApiError(f"'{path}.role' must be 'system', 'user', 'assistant' or 'tool', not {role!r}",
                           f"{path}.role")
        if message.get("images"):
            raise ApiError(f"'{path}.images': this proxy serves text only", f"{path}.images")
        content = optional(message, "content", lambda value: isinstance(value, str), "a string", f"{path}.")
        item: dict[str, Any] = {"role": role, "content": content or ""}
        thinking = optional(message, "thinking", lambda value: isinstance(value, str), "a string", f"{path}.")
        if thinking:
            item["reasoning_content"] = thinking
        calls = optional(message, "tool_calls", lambda value: isinstance(value, list), "a list of tool calls",
                         f"{path}.")
        if calls:
            item["tool_calls"] = []
            for j, call in enumerate(calls):
                where = f"{path}.tool_calls[{j}]"
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    need(False, f"{where}.function", function, "{'name': ..., 'arguments': {...}}")
                    continue
                arguments = function.get("arguments", {})
                need(isinstance(arguments, dict), f"{where}.function.arguments", arguments, "an object")
                call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{i}_{j}"
                pending.append(call_id)
                item["tool_calls"].append({"id": call_id, "type": "function", "function": {
                    "name": function["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}})
        if role == "tool":
            given = message.get("tool_call_id")
            item["tool_call_id"] = given if isinstance(given, str) else (pending.pop(0) if pending else "")
            if isinstance(message.get("tool_name"), str):
                item["name"] = message["tool_name"]
        out.append(item)
    return out


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    need(isinstance(tools, list), "tools", tools, "a list of tools")
    for i, tool in enumerate(tools):
        need(isinstance(tool, dict) and tool.get("type", "function") == "function"
             and isinstance(tool.get("function"), dict), f"tools[{i}]", tool,
             "a tool object ({'type': 'function', 'function': {'name', 'description', 'parameters'}})")
    return [{"type": "function", "function": tool["function"]} for tool in tools] or None


def to_chat(body: Mapping[str, Any]) -> ChatRequest:
    """An Ollama chat request as the chat request the shared path serves; `ApiError` naming the field."""
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise ApiError(f"'{unknown[0]}' is not an /api/chat field this proxy reads", unknown[0])
    chat: dict[str, Any] = {"messages": _messages(body.get("messages"))}
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    stream = optional(body, "stream", lambda value: isinstance(value, bool), "true or false")
    chat["stream"] = stream is not False  # Ollama streams unless told not to
    if body.get("model") is not None:
        need(isinstance(body["model"], str), "model", body["model"], "a string")
        chat["model"] = body["model"]
    fmt = body.get("format")
    if fmt == "json":
        chat["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": fmt}}
    elif fmt not in (None, ""):
        raise ApiError(f"'format' must be \"json\" or a JSON Schema object, not {fmt!r}", "format")
    options = optional(body, "options", lambda value: isinstance(value, dict), "an object")
    for key, value in (options or {}).items():
        if key in _OPTIONS:
            chat[_OPTIONS[key]] = value
        elif key not in _ENGINE_OPTIONS:
            raise ApiError(f"'options.{key}' is not an option this proxy reads", f"options.{key}")
    think = body.get("think")
    if think is not None and not isinstance(think, bool) and think not in ("low", "medium", "high"):
        raise ApiError(f"'think' must be true, false, 'low', 'medium' or 'high', not {think!r}", "think")
    return ChatRequest(chat, thinking=None if think is None else think is not False,
                       effort=think if isinstance(think, str) else None)


# -- the answer ------------------------------------------------------------------------------------------------


_escape = json.encoder.encode_basestring  # json.dumps(text, ensure_ascii=False)'s C escaper


def _stamp(second: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)) + ".000000Z"


def _now() -> str:
    return _stamp(time.time())


def _call(call: Any) -> dict[str, Any]:
    try:
        arguments = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        arguments = {}
    return {"id": call.id, "function": {"name": call.name, "arguments": arguments}}


def _done(answer: Answer, model: str, started: float) -> dict[str, Any]:
    elapsed = int((time.monotonic() - started) * 1e9)
    return {"model": model, "created_at": _now(), "done": True,
            "done_reason": "length" if answer.finish_reason == "length" else "stop",
            "total_duration": elapsed, "load_duration": 0, "prompt_eval_count": answer.prompt_tokens,
            "prompt_eval_duration": 0, "eval_count": answer.completion_tokens, "eval_duration": elapsed}


def whole(completion: Mapping[str, Any], model: str, started: float) -> dict[str, Any]:
    """The /api/chat answer (stream false) of a whole chat completion."""
    answer = Answer.of_completion(completion)
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if answer.reasoning:
        message["thinking"] = answer.reasoning
    if answer.calls:
        message["tool_calls"] = [_call(answer.calls[index]) for index in sorted(answer.calls)]
    return {**_done(answer, model, started), "message": message}


class ChatLines:
    """The NDJSON lines of one streamed answer: `feed(part)` per part, `end()`. Reasoning and content go
    out as they come; a call goes out in one line once the next part shows it is whole."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = time.monotonic()
        self.answer = Answer()
        self.open_call: int | None = None
        self._second = -1
        self._head = ""

    def start(self) -> bytes:
        return b""  # Ollama's stream has no opening line

    def _line(self, message: dict[str, Any]) -> bytes:
        return json.dumps({"model": self.model, "created_at": _now(),
                           "message": {"role": "assistant", "content": "", **message}, "done": False},
                          ensure_ascii=False).encode() + b"\n"

    def _text_line(self, content: str, thinking: str | None = None) -> bytes:
        """A content or thinking line, its constant head written once a second: the bytes `_line` writes."""
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._head = ('{"model": ' + _escape(self.model) + ', "created_at": "' + _stamp(now)
                          + '", "message": {"role": "assistant", "content": ')
        tail = "" if thinking is None else ', "thinking": ' + _escape(thinking)
        return (self._head + _escape(content) + tail + '}, "done": false}\n').encode()

    def _flush_call(self) -> bytes:
        if self.open_call is None:
            return b""
        call, self.open_call = self.answer.calls[self.open_call], None
        return self._line({"tool_calls": [_call(call)]})

    def feed(self, part: Part) -> bytes:
        self.answer.add(part)
        if part.kind == "arguments":
            return b""
        out = self._flush_call() if part.kind != "usage" else b""
        if part.kind == "reasoning":
            return out + self._text_line("", part.text)
        if part.kind == "content":
            return out + self._text_line(part.text)
        if part.kind == "call":
            self.open_call = part.index
        return out

    def end(self) -> bytes:
        out = self._flush_call()
        done = _done(self.answer, self.model, self.started)
        return out + json.dumps({**done, "message": {"role": "assistant", "content": ""}}).encode() + b"\n"

    def failed(self, message: str) -> bytes:
        return self._flush_call() + json.dumps({"error": message}).encode() + b"\n"


def tags(model: str, modified: float) -> dict[str, Any]:
    """`GET /api/tags`: the one model this proxy serves."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(modified))
    return {"models": [{"name": model, "model": model, "modified_at": when, "size": 0, "digest": "",
                        "details": {"format": "", "family": "", "families": None, "parameter_size": "",
                                    "quantization_level": ""}}]}


def show(model: str, template: str, capabilities: list[str]) -> dict[str, Any]:
    """`POST /api/show`: what Ollama's clients read before they chat (the template, the capabilities)."""
    return {"modelfile": "", "parameters": "", "template": template, "license": "",
            "details": {"parent_model": "", "format": "", "family": "", "families": None, "parameter_size": "",
                        "quantization_level": ""},
            "model_info": {"general.name": model}, "capabilities": capabilities}
