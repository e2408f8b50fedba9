"""The flags every `streamparse` command that parses takes, and the `Options` they say; `UsageError`.

Below both the CLI (`cli.py`) and the batch files path (`batch/files.py`), so each imports it and
neither imports the other.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, get_args

from .options import OPTION_HELP, EmitCalls, OnRejected, Options, SpecialTokens, ToolCallsInReasoning


class UsageError(Exception):
    """Misuse of the command: reported on stderr with exit status 2."""


def _load_tools(path: str | None) -> list[dict[str, Any]] | None:
    if path is None:
        return None
    try:
        tools = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"cannot read --tools file: {error}") from None
    except ValueError as error:
        raise UsageError(f"--tools file {path} is not JSON: {error}") from None
    if not isinstance(tools, list):
        raise UsageError(f"--tools file {path} must hold a JSON list of tool definitions")
    return tools


def add_option_flags(sub: argparse.ArgumentParser) -> None:
    """A flag for every parser option (`options.OPTION_HELP`), so every command that parses takes them all."""
    sub.add_argument("--format", "-f", default="hermes", help=OPTION_HELP["format"])
    sub.add_argument("--tools", help="JSON file with the tools list (OpenAI shape) to check calls against")
    sub.add_argument("--forced-open", action="store_true", help=OPTION_HELP["thinking_forced_open"])
    sub.add_argument("--prompt", help=OPTION_HELP["prompt"] + " (the text itself; @FILE reads a file)")
    sub.add_argument("--emit", choices=get_args(EmitCalls), default="validated", help=OPTION_HELP["emit_calls"])
    sub.add_argument("--tool-calls-in-reasoning", choices=get_args(ToolCallsInReasoning), default="ignore",
                     help=OPTION_HELP["tool_calls_in_reasoning"])
    sub.add_argument("--on-rejected", choices=get_args(OnRejected), default="report", help=OPTION_HELP["on_rejected"])
    sub.add_argument("--max-call-chars", type=int, help=OPTION_HELP["max_call_chars"])
    sub.add_argument("--special-tokens", choices=get_args(SpecialTokens), default="ignore",
                     help=OPTION_HELP["special_tokens"] + "; the CLI reads plain text, so with 'require' "
                          "nothing counts as a delimiter")
    sub.add_argument("--marker-suffix", help=OPTION_HELP["marker_suffix"])
    sub.add_argument("--ids", choices=("random", "ordinal"), default="random",
                     help="id_factory: random OpenAI-shaped ids, or call_0, call_1, ... (reproducible output)")


def _ordinal_id(ordinal: int) -> str:
    return f"call_{ordinal}"


def options_from_flags(opts: argparse.Namespace) -> Options:
    """The `Options` the flags of `add_option_flags` say; misuse is a `UsageError`."""
    prompt = opts.prompt
    try:
        if prompt is not None and prompt.startswith("@"):
            prompt = Path(prompt[1:]).read_text(encoding="utf-8")
        return Options(
            format=opts.format, tools=_load_tools(opts.tools), thinking_forced_open=opts.forced_open,
            emit_calls=opts.emit, tool_calls_in_reasoning=opts.tool_calls_in_reasoning, prompt=prompt,
            on_rejected=opts.on_rejected, max_call_chars=opts.max_call_chars, special_tokens=opts.special_tokens,
            marker_suffix=opts.marker_suffix,
            id_factory=_ordinal_id if opts.ids == "ordinal" else None,
        )
    except OSError as error:
        raise UsageError(f"cannot read --prompt file: {error}") from None
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None
