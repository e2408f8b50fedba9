"""The APIs `streamparse serve` speaks, each one module translating to and from one request model.

The request model is the chat-completions body (`ChatRequest.body`), checked by `serve/checks.py` as
any chat client's is, plus the thinking switch an API names in its own words; the answer is the
stream of `answer.Part`s read from the chat chunks `streamparse.openai` makes. Rendering,
tokenizing, constraints, the upstream, parsing, limits, metrics and logs are shared (`serve/app.py`):
an API is its translator and its tests. `chat` is OpenAI's own shape and needs no translation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ApiError", "ChatRequest"]


@dataclass
class ChatRequest:
    """A request in the one shape the shared path serves: a chat-completions `body`; `thinking` (on,
    off, or None: the template's default) and `effort` (`low`/`medium`/`high`...), set on the template's
    own switches (`enable_thinking`, `thinking`, `reasoning_effort`) where it reads them."""

    body: dict[str, Any]
    thinking: bool | None = None
    effort: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # what the API's answer repeats back (Responses)


class ApiError(Exception):
    """A request an API refuses: answered with `status` in that API's own error shape, naming `param`."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.status = status
