"""How a format is declared: its delimiters as data, a grammar, and a small visitor.

The engine (`engine.py`) knows nothing of any one format. A format says which strings open and
close reasoning, which open a call envelope and how its end is found (a stock scanner), which
optional wrappers group calls, how a finished envelope body becomes calls (its grammar and
visitor), and how a message is written back (`render`).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple, Protocol

from .scanning import EnvelopeScanner
from .types import Message
from .validation import ToolSet

_ALPHANUMERIC = string.ascii_letters + string.digits


def random_id(prefix: str, length: int) -> Callable[[int], str]:
    """An id factory: `prefix` and `length` random alphanumerics (the ordinal is not used)."""

    def make(ordinal: int) -> str:
        # One read of the system's randomness; bytes >= 248 are dropped so each symbol is equally likely.
        symbols = ""
        while len(symbols) < length:
            symbols += "".join(_ALPHANUMERIC[b % 62] for b in secrets.token_bytes(length + 8) if b < 248)
        return prefix + symbols[:length]

    return make


def reasoning_block(message: Message, tags: tuple[str, str] = ("<think>", "</think>")) -> str:
    """How the Qwen/DeepSeek templates write reasoning before the answer: `<think>⏎R⏎</think>⏎⏎`."""
    return f"{tags[0]}\n{message.reasoning}\n{tags[1]}\n\n" if message.reasoning else ""


# Default ids: `call_` + 24 alphanumerics (OpenAI's shape).
openai_id = random_id("call_", 24)


@dataclass(frozen=True)
class Envelope:
    """The text of one call envelope, as the engine cut it out of the stream."""

    opener: str
    body: str
    closer: str
    complete: bool  # False when the output ended before the envelope did
    wrapped: bool  # opened inside a wrapper (e.g. `<tool_call>` around `<function=…>`)

    @cached_property
    def raw(self) -> str:
        """Built once: every call of an envelope (a Mistral Nemo list holds many) carries it."""
        return self.opener + self.body + self.closer


@dataclass(frozen=True)
class ParsedCall:
    """A call the grammar read; the engine still checks it against the tools."""

    name: str
    arguments: dict[str, Any]
    arguments_json: str
    id: str | None = None


@dataclass(frozen=True)
class Rejection:
    """A call the grammar could not read. `raw=None` means the whole envelope."""

    status: str
    errors: list[str]
    raw: str | None = None
    name: str | None = None
    id: str | None = None  # a model-written id, read before the call failed (ids stay unique)


CallResult = ParsedCall | Rejection


class CallStart(NamedTuple):
    """Progressive mode: call `k` of the envelope has a complete name (and maybe a model id)."""

    k: int
    name: str
    id: str | None = None


class ArgumentsFragment(NamedTuple):
    """Progressive mode: more of call `k`'s `arguments_json`. (Events are tuples: one is made per
    streamed piece, and a tuple costs a third of a frozen dataclass.)"""

    k: int
    text: str


StreamEvent = CallStart | ArgumentsFragment


class CallStreamer(Protocol):
    """Reads an envelope body as it arrives and says what of its calls is already certain.

    Every fragment must be a prefix-extension of the `arguments_json` the visitor will produce."""

    def feed(self, body: str) -> list[StreamEvent]: ...


class BodyKind(Protocol):
    """How the body of one call envelope is read: one of a closed set (`streamparse/bodies/`).

    Each kind is written once and used by every format whose calls have that shape: it finds where
    the body ends (`scanner`), says what of its calls is certain while it streams (`streamer`), and
    turns the finished body into calls with the format's grammar (`parse`)."""

    def scanner(self) -> EnvelopeScanner: ...

    def streamer(self, tools: ToolSet) -> CallStreamer | None: ...

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[CallResult]: ...


@dataclass(frozen=True)
class EnvelopeSpec:
    """One kind of call envelope: its opening strings, and the body kind that reads what follows."""

    openers: tuple[str, ...]
    body: BodyKind


@dataclass(frozen=True)
class WrapperSpec:
    """Optional brackets around calls (`<tool_call>` around `<function=…>`, DeepSeek's calls block)."""

    openers: tuple[str, ...]
    closers: tuple[str, ...]
    # Text inside the wrapper before its first call (or in a wrapper with no call) is content when
    # it is not whitespace, framing when it is (MiniMax, Seed-OSS). Otherwise it is a rejected call
    # block: `invalid_json` with its raw text.
    text_is_content: bool = False


@dataclass(frozen=True)
class FormatSpec:
    """Everything the engine needs to know about one wire format."""

    name: str
    aliases: tuple[str, ...]
    reasoning: tuple[tuple[str, str], ...]
    envelopes: tuple[EnvelopeSpec, ...]
    render: Callable[[Message], str]
    wrappers: tuple[WrapperSpec, ...] = ()
    id_factory: Callable[[int], str] = field(default=openai_id)
    # Strings that must not occur in generated content/reasoning for a render round trip
    # (beyond the delimiters, which are always excluded).
    reserved: tuple[str, ...] = ()
    # Delimiters that are special tokens in the models' vocabularies (token-aware mode).
    special: tuple[str, ...] = ()
    # Argument values are untyped text (XML formats): generated messages use string values only.
    untyped_values: bool = False
    # A call opener inside unclosed reasoning ends the reasoning there, and the call is a call
    # (Kimi K2, Apertus: their call tokens are emitted only to call). Otherwise the call text stays
    # reasoning unless the caller extracts it.
    calls_end_reasoning: bool = False
    # How `detect_format` knows the format from a chat template: sets of strings that must all occur
    # in it (the tool-call markup the template writes), and, for templates that show no tool markup,
    # turn markers. Rules with more strings are tried first, then longer ones.
    detect: tuple[tuple[str, ...], ...] = ()
    detect_turns: tuple[str, ...] = ()
    # Markers that are framing wherever they occur in content and are dropped (Command R7B's
    # `<|START_RESPONSE|>` / `<|END_RESPONSE|>`): content is the text around them, joined.
    framing: tuple[str, ...] = ()

    def ends_inside_reasoning(self, prompt: str) -> bool:
        """Whether a rendered prompt ends inside an open reasoning block (its last opener is unclosed)."""
        last_open = -1
        closer_after = False
        for opener, closer in self.reasoning:
            position = prompt.rfind(opener)
            if position > last_open:
                last_open = position
                closer_after = prompt.find(closer, position + len(opener)) != -1
        return last_open != -1 and not closer_after

    @property
    def delimiters(self) -> tuple[str, ...]:
        """Every delimiter the format reads, for tests and tooling."""
        out: list[str] = []
        for opener, closer in self.reasoning:
            out += [opener, closer]
        for envelope in self.envelopes:
            out += envelope.openers
        for wrapper in self.wrappers:
            out += [*wrapper.openers, *wrapper.closers]
        out += self.framing
        return tuple(dict.fromkeys(out))
