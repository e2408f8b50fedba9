"""The answer stream every API is written from: one choice's parsed deltas, as read from the
`chat.completion.chunk`s `streamparse.openai` makes (reasoning under `reasoning_content`).

`answer_parts(chunk)` turns one chunk into `Part`s — reasoning text, content text, a call's start (its
id and name) or more of its arguments, the finish reason, the usage — and `Answer` folds them into
the whole message, so an API's writer sees each piece once and the whole at the end. Only choice 0 is
read: the Responses, Anthropic and Ollama APIs have one answer per request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Answer", "Call", "Part", "answer_parts"]

PartKind = Literal["reasoning", "content", "call", "arguments", "finish", "usage"]


@dataclass(frozen=True)
class Part:
    """One piece of the answer: `text` for reasoning, content and arguments; `index`, `id`, `name` of
    a call (a `call` part starts one); `reason` for the finish; `usage` the upstream's counts."""

    kind: PartKind
    text: str = ""
    index: int = 0
    id: str = ""
    name: str = ""
    reason: str = ""
    usage: Mapping[str, Any] | None = None


def answer_parts(chunk: Mapping[str, Any]) -> Iterator[Part]:
    """The parts one chat chunk carries for choice 0, in the order a client must see them."""
    usage = chunk.get("usage")
    for choice in chunk.get("choices") or ():
        if choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content")
        if reasoning:
            yield Part("reasoning", reasoning)
        content = delta.get("content")
        if content:
            yield Part("content", content)
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            if call.get("id"):
                yield Part("call", index=call.get("index", 0), id=call["id"], name=function.get("name") or "")
            if function.get("arguments"):
                yield Part("arguments", function["arguments"], index=call.get("index", 0))
        if choice.get("finish_reason"):
            yield Part("finish", reason=choice["finish_reason"])
    if usage:
        yield Part("usage", usage=usage)


@dataclass
class Call:
    """A call as it has arrived so far (its arguments' pieces joined once, when read)."""

    id: str
    name: str
    pieces: list[str] = field(default_factory=list)

    @property
    def arguments(self) -> str:
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        return self.pieces[0] if self.pieces else ""


@dataclass
class Answer:
    """The whole answer, folded from its parts (`add`); what an API's final event or body is made of.
    Text arrives in many small pieces: they are kept as lists and joined once when read (adding each to
    a string would copy all that came before, quadratic in the answer's length)."""

    reasoning_pieces: list[str] = field(default_factory=list)
    content_pieces: list[str] = field(default_factory=list)
    calls: dict[int, Call] = field(default_factory=dict)
    finish_reason: str = "stop"
    usage: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reasoning(self) -> str:
        return _joined(self.reasoning_pieces)

    @property
    def content(self) -> str:
        return _joined(self.content_pieces)

    def add(self, part: Part) -> None:
        if part.kind == "reasoning":
            self.reasoning_pieces.append(part.text)
        elif part.kind == "content":
            self.content_pieces.append(part.text)
        elif part.kind == "call":
            self.calls[part.index] = Call(part.id, part.name)
        elif part.kind == "arguments":
            self.calls[part.index].pieces.append(part.text)
        elif part.kind == "finish":
            self.finish_reason = part.reason
        elif part.usage is not None:
            self.usage = part.usage

    @classmethod
    def of_completion(cls, completion: Mapping[str, Any]) -> Answer:
        """The answer of a whole `chat.completion` (choice 0)."""
        answer = cls()
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        answer.reasoning_pieces = [message.get("reasoning_content") or ""]
        answer.content_pieces = [message.get("content") or ""]
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            answer.calls[index] = Call(call.get("id") or "", function.get("name") or "",
                                       [function.get("arguments") or ""])
        answer.finish_reason = choice.get("finish_reason") or "stop"
        answer.usage = completion.get("usage") or {}
        return answer

    @property
    def prompt_tokens(self) -> int:
        return int(self.usage.get("prompt_tokens") or 0)

    @property
    def completion_tokens(self) -> int:
        return int(self.usage.get("completion_tokens") or 0)


def _joined(pieces: list[str]) -> str:
    if len(pieces) > 1:
        pieces[:] = ["".join(pieces)]
    return pieces[0] if pieces else ""
