"""The results streamparse produces: a final `Message` and the `Delta`s that stream it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

# Rejection statuses, in the order of precedence FORMATS.md gives for a call wrong in several ways.
TRUNCATED = "truncated"
TOO_LONG = "too_long"
INVALID_JSON = "invalid_json"
UNKNOWN_TOOL = "unknown_tool"
SCHEMA_VIOLATION = "schema_violation"
STATUSES = (TRUNCATED, TOO_LONG, INVALID_JSON, UNKNOWN_TOOL, SCHEMA_VIOLATION)

# Where reasoning goes in OpenAI-shaped output: vLLM (before 0.10), DeepSeek and SGLang read
# `reasoning_content`; current vLLM, OpenRouter and the OpenAI guidance use `reasoning`.
ReasoningField = Literal["reasoning_content", "reasoning", "both"]


def _reasoning_keys(reasoning_field: ReasoningField) -> tuple[str, ...]:
    if reasoning_field == "both":
        return ("reasoning_content", "reasoning")
    if reasoning_field in ("reasoning_content", "reasoning"):
        return (reasoning_field,)
    raise ValueError(f"reasoning_field must be one of {', '.join(map(repr, get_args(ReasoningField)))}; "
                     f"got {reasoning_field!r}")


@dataclass(frozen=True)
class Token:
    """One token of model output. `special`: it is a special/added token of the model's vocabulary
    (its id is in the tokenizer's added or special tokens), not text spelled by ordinary tokens."""

    text: str
    special: bool = False


@dataclass(frozen=True)
class ToolCall:
    """An accepted tool call: its arguments parsed, and the JSON text the streamed fragments join to."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_json: str
    raw: str = field(default="", compare=False, repr=False)  # the envelope text it was read from

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its fields (a batch worker sends many back): a third of a dataclass's cost."""
        return (ToolCall, (self.id, self.name, self.arguments, self.arguments_json, self.raw))

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json},
        }


_new = object.__new__


def made_tool_call(call_id: str, name: str, arguments: dict[str, Any], arguments_json: str, raw: str) -> ToolCall:
    """`ToolCall(call_id, name, arguments, arguments_json, raw)`, built as its `__dict__`: a third of
    what the frozen dataclass's `__init__` costs, for the engine, which makes one per call."""
    call = _new(ToolCall)
    fields = call.__dict__
    fields["id"] = call_id
    fields["name"] = name
    fields["arguments"] = arguments
    fields["arguments_json"] = arguments_json
    fields["raw"] = raw
    return call


@dataclass(frozen=True)
class RejectedCall:
    """A call that could not be accepted: why (`status`, `errors`) and the exact text it came from."""

    status: str
    errors: list[str]
    raw: str
    name: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (RejectedCall, (self.status, self.errors, self.raw, self.name))

    def to_openai(self) -> dict[str, Any]:
        """A JSON-ready dict: `{"status", "errors", "raw", "name"}` (OpenAI has no shape for a rejected call)."""
        return {"status": self.status, "errors": list(self.errors), "raw": self.raw, "name": self.name}


@dataclass(frozen=True)
class Message:
    """The assistant message a whole output encodes."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    rejected: list[RejectedCall] = field(default_factory=list)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, (self.content, self.reasoning, self.tool_calls, self.rejected))

    def to_openai(self, reasoning_field: ReasoningField = "reasoning_content") -> dict[str, Any]:
        """An OpenAI chat message; `tool_calls` is present only when there are calls.
        `reasoning_field`: the key(s) the reasoning goes under (`"reasoning_content"`, `"reasoning"`, `"both"`)."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        for key in _reasoning_keys(reasoning_field):
            out[key] = self.reasoning or None
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return out


def made_message(content: str, reasoning: str, tool_calls: list[ToolCall], rejected: list[RejectedCall]) -> Message:
    """`Message(content, reasoning, tool_calls, rejected)`, built as its `__dict__` (`made_tool_call`)."""
    message = _new(Message)
    fields = message.__dict__
    fields["content"] = content
    fields["reasoning"] = reasoning
    fields["tool_calls"] = tool_calls
    fields["rejected"] = rejected
    return message


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of one tool call; the fragments of one `index` join to its `arguments_json`."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    status: str | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
        function: dict[str, Any] = {}
        if self.name is not None:
            function["name"] = self.name
        function["arguments"] = self.arguments
        out["function"] = function
        if self.status is not None:
            out["status"] = self.status
        return out


@dataclass(slots=True)
class Delta:
    """What one step of the stream adds: content, reasoning, or tool-call pieces."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def to_openai(self, reasoning_field: ReasoningField = "reasoning_content") -> dict[str, Any]:
        """An OpenAI `chat.completion.chunk` delta: only the keys this step sets (reasoning under
        `reasoning_field`: `"reasoning_content"`, `"reasoning"` or `"both"`)."""
        out: dict[str, Any] = {}
        if self.content:
            out["content"] = self.content
        if self.reasoning:
            for key in _reasoning_keys(reasoning_field):
                out[key] = self.reasoning
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return out
