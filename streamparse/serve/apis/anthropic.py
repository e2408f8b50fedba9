"""Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`): what Claude Code and
the Anthropic SDK speak.

In: `system` (a string or text blocks; `cache_control` accepted, no effect), `messages` whose content is a
string or blocks (`text`, `tool_use`, `tool_result` with a string or text blocks and `is_error`, and the
`thinking`/`redacted_thinking` blocks clients send back: a thinking block becomes the turn's earlier
reasoning, which the template renders or drops as it does; redacted thinking is dropped — never a 400),
`tools` with `input_schema`, `tool_choice` (`auto`/`any`/`tool`/`none`, `disable_parallel_tool_use`),
`thinking` (`enabled`/`disabled`: the template's switch), `stop_sequences`, `max_tokens`, sampling.
Out: `content` blocks (`thinking`, `text`, `tool_use` with `input` as an object), `stop_reason` and
`usage`; streamed as `message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta`,
`message_stop`, with a `ping` and, on failure, an `error` event.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from ..checks import need, optional
from . import ApiError, ChatRequest
from .answer import Answer, Part

__all__ = ["MessageStream", "error_body", "to_chat", "whole"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
                529: "overloaded_error"}
_KNOWN = frozenset({"model", "messages", "system", "max_tokens", "tools", "tool_choice", "thinking",
                    "stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata", "service_tier",
                    "container", "mcp_servers", "context_management"})
_SERVER_SIDE = frozenset({"container", "mcp_servers"})


def error_body(status: int, message: str, param: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """Anthropic's error shape: `{"type": "error", "error": {"type", "message"}}`."""
    text = f"{param}: {message}" if param and param not in message else message
    return {"type": "error", "error": {"type": kind or _ERROR_TYPES.get(status, "api_error"), "message": text}}


def _text_blocks(content: Any, path: str) -> str:
    if isinstance(content, str):
        return content
    need(isinstance(content, list), path, content, "a string or a list of text blocks")
    texts = []
    for i, block in enumerate(content):
        need(isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str),
             f"{path}[{i}]", block, "a text block ({'type': 'text', 'text': ...})")
        texts.append(block["text"])
    return "".join(texts)  # as the chat path joins a content part list


def _turns(messages: Any) -> list[dict[str, Any]]:
    """Anthropic turns as chat messages: a user turn's tool results become tool messages (first, as they
    answer the turn before), its text a user message; an assistant turn's blocks one assistant message."""
    need(isinstance(messages, list) and bool(messages), "messages", messages, "a non-empty list of messages")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        need(isinstance(message, dict), path, message, "a message object ({'role', 'content'})")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ApiError(f"'{path}.role' must be 'user' or 'assistant' (the system prompt goes in 'system'), "
                           f"not {role!r}", f"{path}.role")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        need(isinstance(content, list), f"{path}.content", content, "a string or a list of content blocks")
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for j, block in enumerate(content):
            where = f"{path}.content[{j}]"
            need(isinstance(block, dict), where, block, "a content block object")
            kind = block.get("type")
            allowed = {"user": ("text", "tool_result"),
                       "assistant": ("text", "tool_use", "thinking", "redacted_thinking")}[role]
            if kind in ("image", "document", "search_result", "audio"):
                raise ApiError(f"'{where}' is a {kind} block: this proxy serves text only", f"{where}.type")
            if kind not in allowed:
                raise ApiError(f"'{where}.type' {kind!r} is not a block a {role} turn holds here: send "
                               f"{', '.join(map(repr, allowed))}", f"{where}.type")
            if kind == "text":
                need(isinstance(block.get("text"), str), f"{where}.text", block.get("text"), "a string")
                text.append(block["text"])
            elif kind == "thinking":
                need(isinstance(block.get("thinking"), str), f"{where}.thinking", block.get("thinking"), "a string")
                reasoning.append(block["thinking"])
            elif kind == "tool_use":
                need(isinstance(block.get("id"), str), f"{where}.id", block.get("id"), "a string")
                need(isinstance(block.get("name"), str) and bool(block.get("name")), f"{where}.name",
                     block.get("name"), "a non-empty string")
                need(isinstance(block.get("input"), dict), f"{where}.input", block.get("input"), "an object")
                calls.append({"id": block["id"], "type": "function",
                              "function": {"name": block["name"],
                                           "arguments": json.dumps(block["input"], ensure_ascii=False)}})
            elif kind == "tool_result":
                need(isinstance(block.get("tool_use_id"), str), f"{where}.tool_use_id", block.get("tool_use_id"),
                     "a string")
                result = _text_blocks(block.get("content", ""), f"{where}.content")
                optional(block, "is_error", lambda value: isinstance(value, bool), "true or false", f"{where}.")
                if block.get("is_error"):
                    result = f"Error: {result}"
                results.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": result})
            # redacted_thinking: encrypted by another service, nothing here can read it: dropped
        out.extend(results)
        if role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text or not calls else None}
            if reasoning:
                turn["reasoning_content"] = "\n".join(reasoning)
            if calls:
                turn["tool_calls"] = calls
            out.append(turn)
        elif text or not results:
            out.append({"role": "user", "content": "".join(text)})  # joined as the chat path joins text parts
    return out


def _tools(tools: Any) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    need(isinstance(tools, list), "tools", tools, "a list of tools")
    out = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        need(isinstance(tool, dict), path, tool, "a tool object ({'name', 'description', 'input_schema'})")
        if tool.get("type") not in (None, "custom"):
            raise ApiError(f"'{path}.type' is {tool.get('type')!r}, a server-side tool this proxy does not run; "
                           "send client tools ({'name', 'description', 'input_schema'})", f"{path}.type")
        need(isinstance(tool.get("name"), str) and bool(tool.get("name")), f"{path}.name", tool.get("name"),
             "a non-empty string")
        need(isinstance(tool.get("input_schema"), dict), f"{path}.input_schema", tool.get("input_schema"),
             "a JSON Schema object")
        function: dict[str, Any] = {"name": tool["name"]}  # in the chat API's key order: templates print it
        description = optional(tool, "description", lambda value: isinstance(value, str), "a string", f"{path}.")
        if description is not None:
            function["description"] = description
        function["parameters"] = tool["input_schema"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, chat: dict[str, Any]) -> None:
    if choice is None:
        return
    need(isinstance(choice, dict), "tool_choice", choice, "{'type': 'auto' | 'any' | 'tool' | 'none', ...}")
    kind = choice.get("type")
    if kind == "auto":
        chat["tool_choice"] = "auto"
    elif kind == "any":
        chat["tool_choice"] = "required"
    elif kind == "none":
        chat["tool_choice"] = "none"
    elif kind == "tool":
        need(isinstance(choice.get("name"), str), "tool_choice.name", choice.get("name"), "a string")
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise ApiError(f"'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', not {kind!r}", "tool_choice.type")
    if optional(choice, "disable_parallel_tool_use", lambda value: isinstance(value, bool), "true or false",
                "tool_choice.") and kind != "none":
        chat["parallel_tool_calls"] = False


def to_chat(body: Mapping[str, Any]) -> ChatRequest:
    """An Anthropic Messages request as the chat request the shared path serves; `ApiError` naming the field."""
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise ApiError(f"'{unknown[0]}' is not a Messages field this proxy reads", unknown[0])
    for key in sorted(_SERVER_SIDE & set(body)):
        raise ApiError(f"'{key}' needs server-side tools this proxy does not run", key)
    max_tokens = body.get("max_tokens")
    need(isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1, "max_tokens",
         max_tokens, "a positive integer (it is required)")
    messages = _turns(body.get("messages"))
    system = body.get("system")
    if system is not None:
        text = _text_blocks(system, "system")
        messages.insert(0, {"role": "system", "content": text})
    chat: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens}
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    _tool_choice(body.get("tool_choice"), chat)
    stops = optional(body, "stop_sequences", lambda value: isinstance(value, list) and all(
        isinstance(item, str) for item in value), "a list of strings")
    if stops:
        chat["stop"] = stops
    for key in ("temperature", "top_p", "top_k", "stream", "model"):
        if body.get(key) is not None:
            chat[key] = body[key]
    thinking = optional(body, "thinking", lambda value: isinstance(value, dict), "{'type': 'enabled' | 'disabled'}")
    on = None
    if thinking is not None:
        kind = thinking.get("type")
        if kind not in ("enabled", "disabled", "adaptive"):
            raise ApiError(f"'thinking.type' must be 'enabled', 'disabled' or 'adaptive', not {kind!r}",
                           "thinking.type")
        optional(thinking, "budget_tokens", lambda value: isinstance(value, int) and not isinstance(value, bool),
                 "an integer", "thinking.")
        on = None if kind == "adaptive" else kind == "enabled"
    return ChatRequest(chat, thinking=on, extra={"stop_sequences": stops or []})


# -- the answer ------------------------------------------------------------------------------------------------


def _stop_reason(answer: Answer, stopped_by: str | None) -> str:
    if answer.calls:
        return "tool_use"
    if answer.finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if stopped_by else "end_turn"


def _input(arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def whole(completion: Mapping[str, Any], model: str, stopped_by: str | None = None) -> dict[str, Any]:
    """The Messages answer of a whole chat completion."""
    answer = Answer.of_completion(completion)
    content: list[dict[str, Any]] = []
    if answer.reasoning:
        content.append({"type": "thinking", "thinking": answer.reasoning, "signature": ""})
    if answer.content:
        content.append({"type": "text", "text": answer.content})
    for index in sorted(answer.calls):
        call = answer.calls[index]
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)})
    return {"id": _message_id(), "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": _stop_reason(answer, stopped_by), "stop_sequence": stopped_by,
            "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": answer.completion_tokens}}


class MessageStream:
    """The Messages event stream of one answer: `start()`, `feed(part)` per part, `end()`. A block opens
    as its first piece comes and stops when another begins; a call's arguments go out as
    `input_json_delta`s of the JSON text the parser checked."""

    def __init__(self, model: str, stopped_by: Callable[[], str | None] = lambda: None) -> None:
        self.model = model
        self.stopped_by = stopped_by  # asked at the end: the stop sequence that ended the answer, if any
        self.id = _message_id()
        self.answer = Answer()
        self.index = -1
        self.open: tuple[str, int] | None = None

    @staticmethod
    def _event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields}, ensure_ascii=False)}\n\n".encode()

    def start(self, prompt_tokens: int = 0) -> bytes:  # the count comes with the usage, at the end
        message: dict[str, Any] = {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                                   "content": [], "stop_reason": None, "stop_sequence": None,
                                   "usage": {"input_tokens": prompt_tokens, "output_tokens": 0}}
        return self._event("message_start", message=message) + self._event("ping")

    def _stop(self) -> bytes:
        if self.open is None:
            return b""
        self.open = None
        return self._event("content_block_stop", index=self.index)

    def _begin(self, key: tuple[str, int], block: dict[str, Any]) -> bytes:
        out = self._stop()
        self.index += 1
        self.open = key
        return out + self._event("content_block_start", index=self.index, content_block=block)

    def feed(self, part: Part) -> bytes:
        self.answer.add(part)
        if part.kind == "reasoning":
            block = {"type": "thinking", "thinking": "", "signature": ""}
            out = b"" if self.open == ("thinking", 0) else self._begin(("thinking", 0), block)
            return out + self._event("content_block_delta", index=self.index,
                                     delta={"type": "thinking_delta", "thinking": part.text})
        if part.kind == "content":
            out = b"" if self.open == ("text", 0) else self._begin(("text", 0), {"type": "text", "text": ""})
            return out + self._event("content_block_delta", index=self.index,
                                     delta={"type": "text_delta", "text": part.text})
        if part.kind == "call":
            return self._begin(("call", part.index),
                               {"type": "tool_use", "id": part.id, "name": part.name, "input": {}})
        if part.kind == "arguments" and self.open == ("call", part.index):
            return self._event("content_block_delta", index=self.index,
                               delta={"type": "input_json_delta", "partial_json": part.text})
        return b""

    def end(self) -> bytes:
        stopped_by = self.stopped_by()
        out = self._stop()
        delta = {"stop_reason": _stop_reason(self.answer, stopped_by), "stop_sequence": stopped_by}
        out += self._event("message_delta", delta=delta, usage={"output_tokens": self.answer.completion_tokens})
        return out + self._event("message_stop")

    def failed(self, message: str) -> bytes:
        return self._stop() + self._event("error", error={"type": "api_error", "message": message})
