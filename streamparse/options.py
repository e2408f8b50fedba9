"""Every parser option, declared once: `parse`, `stream`, `astream`, `StreamParser`, the OpenAI
adapters and the CLI all take exactly these, so no entry point can drift from another.

`Options` is the checked, frozen form (a server can build one per deployment and share it);
`OptionFields` is the same list as keyword arguments, for the entry points' `**options`;
`OPTION_HELP` is the one-line help each option has in the CLI and the README.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, get_args

from .spec import FormatLike, check_suffix
from .validation import Tools, compiled_tools

if TYPE_CHECKING:
    from typing_extensions import Unpack  # noqa: F401  (used by the entry points' signatures)

EmitCalls = Literal["validated", "progressive"]
ToolCallsInReasoning = Literal["ignore", "extract"]
OnRejected = Literal["report", "content"]
SpecialTokens = Literal["ignore", "require"]
IdFactory = Callable[[int], str]
ToolsLike = Sequence[Mapping[str, Any]] | None


class OptionFields(TypedDict, total=False):
    """The keyword options of every entry point (besides `format`, `tools`, `thinking_forced_open`)."""

    emit_calls: EmitCalls
    tool_calls_in_reasoning: ToolCallsInReasoning
    id_factory: IdFactory | None
    prompt: str | None
    on_rejected: OnRejected
    max_call_chars: int | None
    special_tokens: SpecialTokens
    marker_suffix: str | None


OPTION_HELP: dict[str, str] = {
    "format": "wire format name or alias (see `streamparse formats`)",
    "tools": "OpenAI tool definitions; calls are checked against them (unknown name, schema)",
    "thinking_forced_open": "the prompt ended inside a reasoning block: the output starts as reasoning",
    "emit_calls": "'validated': a call is sent whole once it passed every check; "
                  "'progressive': name first, then argument fragments as they are written",
    "tool_calls_in_reasoning": "'ignore': a call written inside reasoning stays reasoning text; "
                               "'extract': it is a call",
    "id_factory": "callable(ordinal) -> id for calls without a model-written id (default: random, OpenAI shape)",
    "prompt": "the rendered prompt: decides thinking_forced_open from its end",
    "on_rejected": "'report': a rejected call is only in Message.rejected; 'content': its text also goes back "
                   "where it was written",
    "max_call_chars": "a call envelope longer than this is rejected 'too_long' keeping its first N characters",
    "special_tokens": "'require': delimiters count only when they arrive as special Tokens (token-aware mode)",
    "marker_suffix": "the checkpoint's marker suffix (':6124c78e' for <tool_call:6124c78e>; '' for plain markers) "
                     "of a format whose markers carry one (hy_v4, hy_v3); default: from the prompt, else the output",
}


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


# The choices of each option, read from their `Literal` types once (not per parser).
_CHOICES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("emit_calls", get_args(EmitCalls)), ("tool_calls_in_reasoning", get_args(ToolCallsInReasoning)),
    ("on_rejected", get_args(OnRejected)), ("special_tokens", get_args(SpecialTokens)),
)


@dataclass(frozen=True)
class Options:
    """The parser options, checked when made. Misuse raises `ValueError`/`TypeError` naming the option."""

    format: FormatLike = "hermes"
    tools: ToolsLike = None
    thinking_forced_open: bool = False
    emit_calls: EmitCalls = "validated"
    tool_calls_in_reasoning: ToolCallsInReasoning = "ignore"
    id_factory: IdFactory | None = None
    prompt: str | None = None
    on_rejected: OnRejected = "report"
    max_call_chars: int | None = None
    special_tokens: SpecialTokens = "ignore"
    marker_suffix: str | None = None

    def __post_init__(self) -> None:
        for name, choices in _CHOICES:
            _check_choice(name, getattr(self, name), choices)
        if not isinstance(self.thinking_forced_open, bool):
            raise TypeError(f"thinking_forced_open must be a bool; got {self.thinking_forced_open!r}")
        limit = self.max_call_chars
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_call_chars must be a positive int or None; got {limit!r}")
        if self.id_factory is not None and not callable(self.id_factory):
            raise TypeError("id_factory must be a callable taking the call's ordinal and returning an id")
        if self.prompt is not None and not isinstance(self.prompt, str):
            raise TypeError(f"prompt must be the rendered prompt text (str), got {type(self.prompt).__name__}")
        if self.marker_suffix is not None:
            check_suffix(self.marker_suffix)
        if self.tools is not None:
            # Checked and compiled here, once: a parser made from these options (a server's request, a
            # batch worker's row) reuses the compiled form, and a bad schema raises now, not mid-stream.
            object.__setattr__(self, "tools", compiled_tools(self.tools))

    def with_changes(self, **changes: Any) -> Options:
        """A copy with some options changed (checked again)."""
        return replace(self, **changes)


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Options))
_KEYWORDS = frozenset(OptionFields.__annotations__)


# The last `Options` made from a format, a compiled `Tools` (or none) and `thinking_forced_open`
# alone: an agent loop's requests repeat them, and frozen options can be shared (checking and
# building ten fields cost a short parse more than its schema checks). A list of tools is not
# kept: it could change between calls.
_LAST_PLAIN: list[tuple[FormatLike, Tools | None, bool, Options] | None] = [None]


def make_options(format: FormatLike, tools: ToolsLike, thinking_forced_open: bool,
                 options: Mapping[str, Any]) -> Options:
    """The entry points' arguments as one checked `Options`; an unknown keyword is a `TypeError` naming it."""
    if options:
        unknown = sorted(set(options) - _KEYWORDS)
        if unknown:
            raise TypeError(f"unknown option {', '.join(map(repr, unknown))}; the options are: "
                            f"{', '.join(OPTION_NAMES)}")
    elif tools is None or tools.__class__ is Tools:
        last = _LAST_PLAIN[0]
        if last is not None and last[1] is tools and last[2] is thinking_forced_open and last[0] == format:
            return last[3]
        made = Options(format, tools, thinking_forced_open)
        _LAST_PLAIN[0] = (format, tools, thinking_forced_open, made)
        return made
    return Options(format, tools, thinking_forced_open, **options)
