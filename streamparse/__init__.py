"""streamparse: model output → a structured chat message, while it streams.

Reasoning blocks and tool-call envelopes of open-weight models (Hermes/Qwen, Qwen3-Coder, DeepSeek,
Mistral, gpt-oss, GLM, Kimi, MiniMax, Seed, Llama, Granite, Command R7B, Nemotron, Apertus) are read
by one incremental engine from format declarations; any chunking gives the same result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import astream, parse, render, stream
from .detect import detect_format, detect_marker_suffix, thinking_forced_open
from .engine import StreamParser
from .options import Options
from .registry import formats, register_format
from .types import Delta, Message, RejectedCall, Token, ToolCall, ToolCallDelta
from .validation import Tools

if TYPE_CHECKING:
    from .batch.many import parse_many
    from .derive import derive_format
    from .export import response_template
    from .template_import import format_from_response_template

__all__ = [
    "Delta",
    "Message",
    "Options",
    "RejectedCall",
    "StreamParser",
    "Token",
    "ToolCall",
    "ToolCallDelta",
    "Tools",
    "astream",
    "derive_format",
    "detect_format",
    "detect_marker_suffix",
    "format_from_response_template",
    "formats",
    "parse",
    "parse_many",
    "register_format",
    "render",
    "response_template",
    "stream",
    "thinking_forced_open",
]
__version__ = "0.1.0"

_LAZY = {"ChatTemplate": "serve.template", "TemplateRenderError": "serve.template", "PromptPart": "serve.marking",
         "ControlTokenError": "serve.marking", "grammar_for": "constrain", "grammar_triggers": "constrain",
         "response_template": "export", "format_from_response_template": "template_import"}
_LAZY.update(parse_many="batch.many")  # the batch package (process pools), imported only when used
_LAZY.update(derive_format="derive")  # renders the chat template: jinja2, the server extra


def __getattr__(name: str) -> Any:
    """`ChatTemplate` and its companions (they need jinja2, the server extra), `parse_many` and the
    grammars, imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'streamparse' has no attribute {name!r}")
