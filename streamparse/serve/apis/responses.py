"""OpenAI's Responses API (`POST /v1/responses`), stateless: what Codex and the Agents SDK speak.

In: `instructions`, `input` (a string or items: messages with `input_text`/`output_text` parts,
`function_call`, `function_call_output`, `reasoning`), function `tools`, `tool_choice`,
`parallel_tool_calls`, `text.format`, `reasoning.effort`, `max_output_tokens`, sampling fields. Out:
`output` items (`reasoning`, `message`, `function_call`), `status`, `incomplete_details`, `usage`;
streamed as the documented events, each with its `sequence_number`. The proxy keeps nothing between
requests, so what needs stored state (`previous_response_id`, `store: true`, `conversation`,
`background`, item references) and the server-side tools are refused, never ignored.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ..checks import need, optional
from . import ApiError, ChatRequest
from .answer import Answer, Part

__all__ = ["ResponseStream", "error_body", "to_chat", "whole"]

_escape = json.encoder.encode_basestring  # json.dumps(text, ensure_ascii=False)'s C escaper

_STATEFUL = {"previous_response_id": "previous_response_id", "conversation": "conversation",
             "prompt": "a stored prompt (prompt)"}
_SAMPLING = ("temperature", "top_p", "top_logprobs", "user", "seed", "stop", "top_k", "min_p",
             "repetition_penalty", "presence_penalty", "frequency_penalty")
# Accepted and without effect on a stateless proxy that has no server-side tools or tiers.
_IGNORED = frozenset({"metadata", "prompt_cache_key", "safety_identifier", "service_tier", "truncation", "include",
                      "stream_options", "user", "max_tool_calls", "prompt_cache_retention"})
_KNOWN = frozenset({"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
                    "reasoning", "max_output_tokens", "stream", "store", "background", *_STATEFUL, *_SAMPLING,
                    *_IGNORED})


def error_body(status: int, message: str, param: str | None = None,
               kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error shape, as the Responses API answers it."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def _text_parts(content: Any, path: str, kinds: tuple[str, ...]) -> str:
    """A message's content: a string, or a list of text parts of `kinds` joined."""
    if isinstance(content, str):
        return content
    need(isinstance(content, list), path, content, "a string or a list of content parts")
    texts = []
    for i, part in enumerate(content):
        need(isinstance(part, dict), f"{path}[{i}]", part, "a content part object")
        kind = part.get("type")
        if kind in ("input_image", "input_file", "input_audio"):
            raise ApiError(f"'{path}[{i}]' is an {kind} part: this proxy serves text only; send the content as "
                           "input_text parts", f"{path}[{i}].type")
        if kind not in kinds:
            raise ApiError(f"'{path}[{i}].type' must be one of {', '.join(map(repr, kinds))}, not {kind!r}",
                           f"{path}[{i}].type")
        text = part.get("refusal") if kind == "refusal" else part.get("text")
        need(isinstance(text, str), f"{path}[{i}].text", text, "a string")
        texts.append(text)
    return "".join(texts)


def _reasoning_text(item: Mapping[str, Any], path: str) -> str:
    """A reasoning item's text: its `content` reasoning_text parts, else its summary."""
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = optional(item, key, lambda value: isinstance(value, list), "a list of text parts", f"{path}.")
        texts = []
        for i, part in enumerate(parts or ()):
            need(isinstance(part, dict) and part.get("type") == kind and isinstance(part.get("text"), str),
                 f"{path}.{key}[{i}]", part, f"{{'type': '{kind}', 'text': ...}}")
            texts.append(part["text"])
        if texts:
            return "\n".join(texts)
    return ""


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    instructions = optional(body, "instructions", lambda value: isinstance(value, str), "a string")
    if instructions:
        messages.append({"role": "system", "content": instructions})
    given = body.get("input")
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    if not isinstance(given, list) or not given:
        need(False, "input", given, "a string or a non-empty list of input items")
        return messages
    reasoning: str | None = None  # a reasoning item's text waits for the assistant turn it belongs to

    def assistant() -> dict[str, Any]:
        nonlocal reasoning
        last = messages[-1] if messages else None
        if last is None or last["role"] != "assistant" or reasoning is not None:
            last = {"role": "assistant", "content": None}
            if reasoning is not None:
                last["reasoning_content"], reasoning = reasoning, None
            messages.append(last)
        return last

    for i, item in enumerate(given):
        path = f"input[{i}]"
        need(isinstance(item, dict), path, item, "an input item object")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise ApiError(f"'{path}.role' must be 'user', 'assistant', 'system' or 'developer', not {role!r}",
                               f"{path}.role")
            kinds = ("output_text", "refusal") if role == "assistant" else ("input_text",)
            text = _text_parts(item.get("content"), f"{path}.content", kinds)
            if role == "assistant":
                turn = assistant()
                turn["content"] = (turn["content"] or "") + text
            else:
                messages.append({"role": role, "content": text})
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                need(isinstance(item.get(key), str), f"{path}.{key}", item.get(key), "a string")
            turn = assistant()
            turn.setdefault("tool_calls", []).append(
                {"id": item["call_id"], "type": "function",
                 "function": {"name": item["name"], "arguments": item["arguments"]}})
        elif kind == "function_call_output":
            need(isinstance(item.get("call_id"), str), f"{path}.call_id", item.get("call_id"), "a string")
            output = _text_parts(item.get("output"), f"{path}.output", ("input_text", "output_text"))
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
        elif kind == "reasoning":
            reasoning = (reasoning or "") + _reasoning_text(item, path)
        elif kind == "item_reference":
            raise ApiError(f"'{path}' refers to a stored item: this proxy is stateless and stores nothing; send "
                           "the item itself", f"{path}.type")
        else:
            raise ApiError(f"'{path}.type' {kind!r} is not an input item this proxy reads: send 'message', "
                           "'function_call', 'function_call_output' or 'reasoning'", f"{path}.type")
    return messages


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tools = optional(body, "tools", lambda value: isinstance(value, list), "a list of tools")
    out = []
    for i, tool in enumerate(tools or ()):
        path = f"tools[{i}]"
        need(isinstance(tool, dict), path, tool, "a tool object")
        kind = tool.get("type")
        if kind == "custom":
            raise ApiError(f"'{path}' is a custom (freeform) tool: this proxy serves function tools, whose "
                           "arguments the model's format writes as JSON; declare it as a function tool",
                           f"{path}.type")
        if kind != "function":
            raise ApiError(f"'{path}.type' is {kind!r}, a server-side tool this proxy does not run; send "
                           "function tools only", f"{path}.type")
        need(isinstance(tool.get("name"), str) and bool(tool.get("name")), f"{path}.name", tool.get("name"),
             "a non-empty string")
        function: dict[str, Any] = {"name": tool["name"]}
        kinds: tuple[tuple[str, type, str], ...] = (("description", str, "a string"),
                                                    ("parameters", dict, "a JSON Schema object"),
                                                    ("strict", bool, "true or false"))
        for key, kind_of_value, what in kinds:
            value = tool.get(key)
            if value is not None:
                need(isinstance(value, kind_of_value), f"{path}.{key}", value, what)
                function[key] = value
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: Any) -> Any:
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    need(isinstance(choice, dict), "tool_choice", choice,
         "'auto', 'none', 'required', {'type': 'function', 'name': ...} or {'type': 'allowed_tools', ...}")
    if choice.get("type") == "function":
        need(isinstance(choice.get("name"), str), "tool_choice.name", choice.get("name"), "a string")
        return {"type": "function", "function": {"name": choice["name"]}}
    if choice.get("type") == "allowed_tools":
        tools = choice.get("tools")
        need(isinstance(tools, list), "tool_choice.tools", tools, "a list of {'type': 'function', 'name': ...}")
        named = []
        for i, tool in enumerate(tools):
            need(isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("name"), str),
                 f"tool_choice.tools[{i}]", tool, "{'type': 'function', 'name': ...}")
            named.append({"type": "function", "function": {"name": tool["name"]}})
        return {"type": "allowed_tools", "allowed_tools": {"mode": choice.get("mode", "auto"), "tools": named}}
    raise ApiError(f"'tool_choice.type' {choice.get('type')!r} names a server-side tool this proxy does not run",
                   "tool_choice.type")


def _text_format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    need(isinstance(text, dict), "text", text, "an object ({'format': {...}})")
    fmt = text.get("format")
    if fmt is None:
        return None
    need(isinstance(fmt, dict), "text.format", fmt, "{'type': 'text' | 'json_object' | 'json_schema', ...}")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        need(isinstance(fmt.get("schema"), dict), "text.format.schema", fmt.get("schema"), "a JSON Schema object")
        spec = {"name": fmt.get("name") or "answer", "schema": fmt["schema"]}
        if isinstance(fmt.get("strict"), bool):
            spec["strict"] = fmt["strict"]
        return {"type": "json_schema", "json_schema": spec}
    raise ApiError(f"'text.format.type' must be 'text', 'json_object' or 'json_schema', not {kind!r}",
                   "text.format.type")


def to_chat(body: Mapping[str, Any]) -> ChatRequest:
    """A Responses request as the chat request the shared path serves; `ApiError` naming the field."""
    for key, what in _STATEFUL.items():
        if body.get(key) is not None:
            raise ApiError(f"'{key}' needs {what} stored by the server: this proxy is stateless and stores "
                           "nothing; send the whole conversation in 'input'", key)
    if body.get("store") is True or body.get("background") is True:
        key = "store" if body.get("store") is True else "background"
        raise ApiError(f"'{key}: true' needs the response stored by the server: this proxy is stateless; send "
                       f"'{key}': false", key)
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise ApiError(f"'{unknown[0]}' is not a Responses field this proxy reads", unknown[0])
    chat: dict[str, Any] = {"messages": _messages(body)}
    tools = _tools(body)
    if tools is not None:
        chat["tools"] = tools
    choice = _tool_choice(body.get("tool_choice"))
    if choice is not None:
        chat["tool_choice"] = choice
    response_format = _text_format(body.get("text"))
    if response_format is not None:
        chat["response_format"] = response_format
    for key in ("parallel_tool_calls", "stream", "model", *(k for k in _SAMPLING if k != "user")):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    reasoning = optional(body, "reasoning", lambda value: isinstance(value, dict), "an object ({'effort': ...})")
    effort = optional(reasoning or {}, "effort", lambda value: isinstance(value, str), "a string", "reasoning.")
    echo = {key: body.get(key) for key in ("instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
                                           "reasoning", "max_output_tokens", "temperature", "top_p", "metadata")}
    return ChatRequest(chat, thinking=False if effort == "none" else None,
                       effort=None if effort in (None, "none") else effort, extra=echo)


# -- the answer ------------------------------------------------------------------------------------------------


def _usage(answer: Answer) -> dict[str, Any]:
    return {"input_tokens": answer.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": answer.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.prompt_tokens + answer.completion_tokens}


def _response(response_id: str, created: int, model: str, extra: Mapping[str, Any], status: str,
              output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "created_at": created, "status": status, "model": model,
            "output": output, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": extra.get("instructions"), "tools": extra.get("tools") or [],
            "tool_choice": extra.get("tool_choice") or "auto",
            "parallel_tool_calls": extra.get("parallel_tool_calls") is not False,
            "text": extra.get("text") or {"format": {"type": "text"}}, "reasoning": extra.get("reasoning"),
            "max_output_tokens": extra.get("max_output_tokens"), "temperature": extra.get("temperature"),
            "top_p": extra.get("top_p"), "metadata": extra.get("metadata") or {}, "previous_response_id": None,
            "store": False, "usage": usage}


def _status(answer: Answer) -> str:
    return "incomplete" if answer.finish_reason == "length" else "completed"


def _items(answer: Answer, ids: Iterator[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if answer.reasoning:
        items.append({"type": "reasoning", "id": next(ids), "summary": [],
                      "content": [{"type": "reasoning_text", "text": answer.reasoning}]})
    if answer.content:
        items.append({"type": "message", "id": next(ids), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": answer.content, "annotations": [], "logprobs": []}]})
    for index in sorted(answer.calls):
        call = answer.calls[index]
        items.append({"type": "function_call", "id": next(ids), "call_id": call.id, "name": call.name,
                      "arguments": call.arguments, "status": "completed"})
    return items


def _ids(prefix: str) -> Iterator[str]:
    while True:
        yield f"{prefix}_{secrets.token_hex(12)}"


def whole(completion: Mapping[str, Any], model: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses answer of a whole chat completion."""
    answer = Answer.of_completion(completion)
    return _response(next(_ids("resp")), int(time.time()), model, extra, _status(answer),
                     _items(answer, _ids("item")), _usage(answer))


class ResponseStream:
    """The Responses event stream of one answer: `start()`, then `feed(part)` per part, then `end()`;
    each returns the server-sent events to write. Items open as their first piece comes and close when
    another kind begins (reasoning, then the message, then each call), as OpenAI's stream orders them."""

    def __init__(self, model: str, extra: Mapping[str, Any]) -> None:
        self.model = model
        self.extra = extra
        self.id = next(_ids("resp"))
        self.created = int(time.time())
        self.sequence = 0
        self.answer = Answer()
        self.items: list[dict[str, Any]] = []  # finished output items
        self.open: dict[str, Any] | None = None  # the item being written
        self.open_key: tuple[str, int] | None = None
        self.open_pieces: list[str] = []  # the open item's text (or arguments) so far, joined when it closes
        self.item_ids = _ids("item")

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

    def _delta(self, kind: str, index: int, text: str, tail: str = "") -> bytes:
        """A text delta event, the bytes `_event` writes, by escaping the one string in it (item ids are
        hex; `tail` is constant JSON): the stream's most frequent event, written without a dict."""
        assert self.open is not None
        self.open_pieces.append(text)
        number, self.sequence = self.sequence, self.sequence + 1
        return (f'event: {kind}\ndata: {{"type": "{kind}", "sequence_number": {number}, "item_id": '
                f'"{self.open["id"]}", "output_index": {index}, "content_index": 0, "delta": {_escape(text)}'
                f'{tail}}}\n\n').encode()

    def _snapshot(self, status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return _response(self.id, self.created, self.model, self.extra, status, list(self.items), usage)

    def start(self) -> bytes:
        return (self._event("response.created", response=self._snapshot("in_progress"))
                + self._event("response.in_progress", response=self._snapshot("in_progress")))

    def _close(self) -> bytes:
        item, self.open, self.open_key = self.open, None, None
        if item is None:
            return b""
        text, self.open_pieces = "".join(self.open_pieces), []
        if item["type"] == "function_call":
            item["arguments"] = text
        else:
            item["content"][0]["text"] = text
        index = len(self.items)
        out = b""
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out += self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                               text=text, logprobs=[])
            out += self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                               part=item["content"][0])
            item["status"] = "completed"
        elif item["type"] == "reasoning":
            text = item["content"][0]["text"]
            out += self._event("response.reasoning_text.done", item_id=item["id"], output_index=index,
                               content_index=0, text=text)
            out += self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                               part=item["content"][0])
        else:
            out += self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                               name=item["name"], arguments=item["arguments"])
            item["status"] = "completed"
        self.items.append(item)
        return out + self._event("response.output_item.done", output_index=index, item=item)

    def _open(self, key: tuple[str, int], item: dict[str, Any]) -> bytes:
        out = self._close()
        self.open, self.open_key = item, key
        index = len(self.items)
        shown = {**item, "content": []} if "content" in item else dict(item)
        out += self._event("response.output_item.added", output_index=index, item=shown)
        if item["type"] in ("message", "reasoning"):
            out += self._event("response.content_part.added", item_id=item["id"], output_index=index,
                               content_index=0, part=item["content"][0])
        return out

    def feed(self, part: Part) -> bytes:
        self.answer.add(part)
        index = len(self.items)
        if part.kind == "reasoning":
            out = b""
            if self.open_key != ("reasoning", 0):
                out = self._open(("reasoning", 0), {"type": "reasoning", "id": next(self.item_ids), "summary": [],
                                                    "content": [{"type": "reasoning_text", "text": ""}]})
                index = len(self.items)
            return out + self._delta("response.reasoning_text.delta", index, part.text)
        if part.kind == "content":
            out = b""
            if self.open_key != ("message", 0):
                out = self._open(("message", 0), {
                    "type": "message", "id": next(self.item_ids), "status": "in_progress", "role": "assistant",
                    "content": [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}]})
                index = len(self.items)
            return out + self._delta("response.output_text.delta", index, part.text, ', "logprobs": []')
        if part.kind == "call":
            return self._open(("call", part.index), {"type": "function_call", "id": next(self.item_ids),
                                                     "call_id": part.id, "name": part.name, "arguments": "",
                                                     "status": "in_progress"})
        if part.kind == "arguments" and self.open_key == ("call", part.index) and self.open is not None:
            self.open_pieces.append(part.text)
            return self._event("response.function_call_arguments.delta", item_id=self.open["id"], output_index=index,
                               delta=part.text)
        return b""

    def end(self) -> bytes:
        out = self._close()
        status = _status(self.answer)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        return out + self._event(kind, response=self._snapshot(status, _usage(self.answer)))

    def failed(self, message: str) -> bytes:
        """The stream's end when the upstream failed mid-answer."""
        out = self._close()
        response = self._snapshot("failed", _usage(self.answer))
        response["error"] = {"code": "server_error", "message": message}
        return out + self._event("response.failed", response=response)
