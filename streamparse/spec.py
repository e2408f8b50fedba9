"""How a format is declared: its delimiters as data, a grammar, and a small visitor.

The engine (`engine.py`) knows nothing of any one format. A format says which strings open and
close reasoning, which open a call envelope and how its end is found (a stock scanner), which
optional wrappers group calls, how a finished envelope body becomes calls (its grammar and
visitor), and how a message is written back (`render`).
"""

from __future__ import annotations

import os
import re
import secrets
import string
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, SupportsIndex

from .scanning import Decoded, EnvelopeScanner, WalkSource
from .types import INVALID_JSON, TRUNCATED, Message
from .validation import ToolSet

_ALPHANUMERIC = string.ascii_letters + string.digits
# Random bytes to symbols at C speed: byte b is symbol b % 62; bytes >= 248 are deleted, so each
# symbol is equally likely.
_TO_SYMBOL = bytes((_ALPHANUMERIC[b % 62] if b < 248 else "?").encode()[0] for b in range(256))
_UNEVEN = bytes(range(248, 256))


# Ids a factory draws from one read of the system's randomness; each process draws its own (the
# ids a parent drew and had not given out are dropped in a forked child).
_IDS_PER_READ = 64
_UNUSED_IDS: list[deque[str]] = []


def _drop_unused_ids() -> None:
    for ready in _UNUSED_IDS:
        ready.clear()


os.register_at_fork(after_in_child=_drop_unused_ids)


def random_id(prefix: str, length: int) -> Callable[[int], str]:
    """An id factory: `prefix` and `length` random alphanumerics (the ordinal is not used)."""
    return RandomIds(prefix, length)


class RandomIds:
    """`random_id`'s factory. The symbols of `_IDS_PER_READ` ids are read at once (a system call per id
    cost a call's parse more than its schema check); `deque.popleft` hands each out once, also across
    threads. It pickles as its prefix and length (a format sent to a spawned worker draws its own ids)."""

    __slots__ = ("_batch", "_ready", "length", "prefix")

    def __init__(self, prefix: str, length: int) -> None:
        self.prefix, self.length = prefix, length
        self._ready: deque[str] = deque()
        self._batch = length * _IDS_PER_READ
        _UNUSED_IDS.append(self._ready)

    def __call__(self, ordinal: int) -> str:
        ready = self._ready
        while True:
            try:
                return ready.popleft()
            except IndexError:  # empty (or emptied by another thread meanwhile): draw the next ids
                batch, length = self._batch, self.length
                symbols = b""
                while len(symbols) < batch:  # one read of the system's randomness, almost always
                    symbols += secrets.token_bytes(batch + batch // 16 + 8).translate(_TO_SYMBOL, _UNEVEN)
                text = symbols[:batch].decode("ascii")
                ready.extend([self.prefix + text[at:at + length] for at in range(0, batch, length)])

    def __reduce__(self) -> tuple[Any, tuple[str, int]]:
        return (RandomIds, (self.prefix, self.length))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RandomIds) and (other.prefix, other.length) == (self.prefix, self.length)

    def __hash__(self) -> int:
        return hash((RandomIds, self.prefix, self.length))


def reasoning_block(message: Message, tags: tuple[str, str] = ("<think>", "</think>")) -> str:
    """How the Qwen/DeepSeek templates write reasoning before the answer: `<think>⏎R⏎</think>⏎⏎`."""
    return f"{tags[0]}\n{message.reasoning}\n{tags[1]}\n\n" if message.reasoning else ""


# Default ids: `call_` + 24 alphanumerics (OpenAI's shape).
openai_id = random_id("call_", 24)


@dataclass  # not frozen: one is made per envelope, and a frozen one's fields cost three times as much to set
class Envelope:
    """The text of one call envelope, as the engine cut it out of the stream (not changed once made)."""

    opener: str
    body: str
    closer: str
    complete: bool  # False when the output ended before the envelope did
    wrapped: bool  # opened inside a wrapper (e.g. `<tool_call>` around `<function=…>`)
    # What the envelope's scanner read in a JSON value it skimmed (`scanning.Decoded`): the kind's
    # parse uses it where the body holds that very text, instead of decoding it again.
    decoded: Decoded | None = field(default=None, compare=False, repr=False)

    @property
    def raw(self) -> str:
        """Built once: every call of an envelope (a Mistral Nemo list holds many) carries it.
        (Kept in the instance's `__dict__` directly: `functools.cached_property` takes a lock per
        read on Python 3.11.)"""
        found: str | None = self.__dict__.get("_raw")
        if found is None:
            found = self.__dict__["_raw"] = self.opener + self.body + self.closer
        return found


@dataclass  # not frozen: one is made per call (as `Envelope`)
class ParsedCall:
    """A call the grammar read; the engine still checks it against the tools (not changed once made)."""

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


class BlockText(NamedTuple):
    """Text a body kind found between the calls of its block that belongs to no call: content, at its
    place (Muse Glimmer's stray `</atem:invoke>` inside the ATEM block: text inside a wrapper is content)."""

    text: str


BodyResult = CallResult | BlockText


def calls_and_text(results: Sequence[BodyResult]) -> tuple[list[CallResult], str]:
    """A body's results as its calls (accepted or not) and the content text between them, joined."""
    calls = [result for result in results if not isinstance(result, BlockText)]
    if len(calls) == len(results):
        return calls, ""
    return calls, "".join(result.text for result in results if isinstance(result, BlockText))


def empty_body(envelope: Envelope, tag: str, empty: str) -> list[CallResult] | None:
    """What every body kind says of an envelope with only whitespace in it: `truncated` when the
    output ended right after its opener `tag`, else `invalid_json` saying `empty`; None otherwise."""
    body = envelope.body
    if body and not body.isspace():  # what `strip()` leaves, without copying the body
        return None
    if not envelope.complete:
        return [Rejection(TRUNCATED, [f"the output ended right after {tag}"])]
    return [Rejection(INVALID_JSON, [empty])]


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

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> CallStreamer | None:
        """In progressive mode: reads the body as it arrives; given the envelope's scanner, whose
        walk it reads (`scanning.Marks`) rather than walking the body again."""
        ...

    def parse(self, envelope: Envelope, tools: ToolSet) -> Sequence[BodyResult]:
        """The calls of a finished envelope; a kind that reads a block of calls may also give the text
        between them that is no call (`BlockText`: content)."""
        ...


class WholeBody(Protocol):
    """A body kind that can also read an envelope found whole in the text in view (its body and
    closer), without a scanner: the engine's shortcut where nothing streams (`parse()`, and a chunk
    that holds a whole call), taken only where its reading is the scanner's and `parse`'s."""

    def whole(self, text: str, pos: int) -> tuple[list[CallResult], int, int] | None:
        """The calls of the envelope whose body starts at `text[pos]`, where its body ends and where
        its closer does; None where the kind does not read this body so (the scanner then does)."""
        ...


class AnswerBody(Protocol):
    """A body kind whose envelope may stand for content other than its text (generic's whole-output
    `{"response": TEXT}`: TEXT decoded), where `parse` finds no call in it."""

    def answer(self, envelope: Envelope) -> str | None:
        """The content the envelope stands for; None where that is its text, verbatim."""
        ...


@dataclass(frozen=True)
class EnvelopeSpec:
    """One kind of call envelope: its opening strings, and the body kind that reads what follows."""

    openers: tuple[str, ...]
    body: BodyKind
    # An envelope whose body holds no call by its kind's reading (`parse` returns `[]`: an empty
    # list, LFM2's `[]`) is framing: no call, no rejection. Otherwise it is rejected `invalid_json`
    # (`truncated` when the output ended inside it) as "no call in the envelope".
    no_call_is_framing: bool = False
    # ... or content, verbatim (Phi-4-mini's `functools[]`: a word and an empty list, nothing to drop).
    no_call_is_content: bool = False
    # The opener counts only at the start of the output or right after whitespace; anywhere else
    # its text is content (Phi-4-mini's `functools[`, a plain word).
    after_space: bool = False
    # How many of the opener's last characters are the start of the body (`functools[`: the `[`
    # opens the body's list); they are read again as body.
    body_lead: int = 0


@dataclass(frozen=True)
class AnchorSpec:
    """A call envelope recognised by where it starts and how it begins, not by a delimiter
    (engine: `engine/anchors.py`).

    `lead` is a regular expression (the `regex` module, matched with `partial=True`) that the
    envelope's text begins with; it is part of the body. Text is held back only while it could
    still become the lead, so keep it bounded (`\\s{0,64}`, not `\\s*`). Where it is tried:
    - `at_start`: at the start of the output, after whitespace, or of the content after a reasoning
      block there (generic's envelope after `<think>…</think>`);
    - `after`: right after one of these markers (dropped, like `framing`), past whitespace;
    - `trigger`: wherever this character (the lead's first) appears in content; with
      `trigger_next` (a Python `re` pattern, `\\Z` where the text may end there) only where what
      follows the trigger matches it, so content is searched past any other at C speed: it must
      match every text the lead may still continue with after the trigger;
    - `separator` (a regex of framing such as `;`): right after one of its own envelopes, past
      whitespace and at most one separator, which then belong to that envelope's raw text.
    An envelope whose body kind finds no call in it (`parse` returns `[]`) is content, verbatim;
    so is one followed by text other than whitespace when `must_end_output`. Either way the
    envelope is not certain until it is followed by what decides, so its calls are sent whole
    when it settles (no progressive fragments) when `must_end_output` or `may_be_content`."""

    lead: str
    body: BodyKind
    at_start: bool = False
    after: tuple[str, ...] = ()
    trigger: str = ""
    trigger_next: str = ""
    separator: str = ""
    # The separator must stand between two envelopes of the anchor (its body runs to the separator, so
    # without one the next call would be read into it: an imported template's class-led call field).
    separator_required: bool = False
    # Content stands only after one of these (the content field's openers of an imported template whose
    # every field is opened): where the anchor is tried, one is dropped and content follows (elsewhere it
    # is text); a grammar writes content after one, so that no content begins like a call.
    content_openers: tuple[str, ...] = ()
    must_end_output: bool = False
    may_be_content: bool = False


@dataclass(frozen=True)
class WrapperSpec:
    """Optional brackets around calls (`<tool_call>` around `<function=…>`, DeepSeek's calls block)."""

    openers: tuple[str, ...]
    closers: tuple[str, ...]
    # A wrapper that holds only whitespace (`opener closer`) is framing: no call, no rejection (Kimi
    # K2's empty section). Otherwise it is rejected `invalid_json` as an empty call block.
    empty_is_framing: bool = False
    # Text inside the wrapper but outside calls is content when it is not all whitespace (whitespace
    # between markers is framing), and the wrapper stays open (Kimi K2's section). Otherwise text
    # before the first call is rejected `invalid_json` with the wrapper, and text after a call ends it.
    text_is_content: bool = False
    # Markers dropped where they stand between calls inside the wrapper (Step 3's `<｜tool_sep｜>`).
    framing: tuple[str, ...] = ()


class MessageRoute(NamedTuple):
    """Where the body of a headed message goes, as its header says (`MessageSpec.route`).

    `region` is one of `REASONING`, `CONTENT`, `CALL` (a call named `name`), `FRAMING` (dropped) or `TEXT`
    (what looked like a header is none: its text, header end included, is text where it stands)."""

    region: str
    name: str = ""


REASONING, CONTENT, CALL, FRAMING, TEXT = "reasoning", "content", "call", "framing", "text"


@dataclass(frozen=True)
class MessageLayout:
    """How a grammar writes headed messages (`MessageSpec.layout`; `constrain/layouts_messages.py`):
    the headers the templates write, each from its opener through `header_end`, the call's with
    `{name}` for the tool's name. `reasoning`: the reasoning message's header (None: the format has
    none); `content`: the answer's; `preamble`: a content message written before a call (None: no
    such message); `call`: a call message's. `prompt_wrote`: what the generation prompt already
    wrote of the first header (harmony's `<|start|>assistant`, Functionary's `>>>`), left out of the
    first message. `end`: the terminator written after a message another message follows (harmony's
    `<|end|>`; nothing where the next opener ends the body). A message that ends the output has no
    terminator: it is the stop token the server cuts off, which a grammar allows (`answer_stop`,
    `call_stop`: harmony's `<|return|>`, `<|call|>`) for an engine that wants the model to write it.
    `many_calls`: several call messages may follow each other (Functionary); harmony's `<|call|>`
    stops generation after the first."""

    content: str
    call: str
    reasoning: str | None = None
    preamble: str | None = None
    prompt_wrote: str = ""
    end: str = ""
    answer_stop: str = ""
    call_stop: str = ""
    many_calls: bool = False


@dataclass(frozen=True)
class MessageSpec:
    """Headed messages (OpenAI harmony): the output is a sequence of messages, each a header from one
    of `openers` up to `header_end`, then a body up to one of `terminators` (or the end of output).

    The header decides what the body is: `route(header, complete)` reads the header text (from its
    opener, without `header_end`) and returns a `MessageRoute`; `complete` is False for a header cut
    off (by the end of output, a terminator, a header opener that cannot continue it). Reasoning and
    content bodies stream as deltas; a call's body is read by the body kind `call(name)` makes.
    Text outside any message is content; whitespace between a terminator and the next header, and
    stray terminators, are framing. A header opener continues the header only when it comes later in
    `openers` than the last one in it (`<|start|>…<|channel|>…`); any other starts a new header.
    `lead`: ordinary text that, at the very start of the output, continues the generation prompt's
    open header (` to=` after harmony's `<|start|>assistant`), when a header opener follows it with
    no whitespace in between. A header longer than `header_limit` is not a header: its text is content.
    `opened_by_prompt`, `openers_end_bodies`, `header_end_at_start`, `lead_opens_headers`,
    `call_headers_end_reasoning`, `marker_headers`, `forced_open_header`: below. A header cut off whose
    route is content is content (its text after its opener).
    """

    openers: tuple[str, ...]
    header_end: str
    terminators: tuple[str, ...]
    route: Callable[[str, bool], MessageRoute]
    call: Callable[[str], BodyKind]
    lead: str = ""
    header_limit: int = 512
    # The output starts inside the first message's header: its opener ended the generation prompt
    # (Functionary v3.2's `>>>`), so the header read from the first character has no opener.
    opened_by_prompt: bool = False
    # A header opener also ends the body before it (Functionary v3.2 has no terminators: a message
    # runs to the next `>>>`); in a call's body the kind's scanner ends it there (outside JSON strings).
    openers_end_bodies: bool = False
    # The header end alone at the very start of the output is a whole header with nothing in it: the
    # generation prompt wrote the opener and the role (Muse Glimmer's `<|message|>` after `<|start|>assistant`).
    header_end_at_start: bool = False
    # The `lead` opens a header anywhere outside messages, not only at the start: text before it is
    # content (Muse Glimmer: "text before the first header is content").
    lead_opens_headers: bool = False
    # The `lead` inside a reasoning body opens a header there: one that routes to a call ends the
    # reasoning and opens the call (Muse Glimmer's ` to=NAME<|message|>` written before the reasoning's
    # terminator); any other, complete or not, is reasoning text.
    call_headers_end_reasoning: bool = False
    # Markers that end a header and are part of it (the route reads the header with its marker): Inkling's
    # content kinds (`<|content_text|>`, `<|content_invoke_tool_json|>` …), with no `header_end` ("").
    # Outside messages such a marker is a whole header; inside a body it ends the body and opens its own.
    marker_headers: tuple[str, ...] = ()
    # With `thinking_forced_open`, the header the generation prompt ended with: the output starts in
    # its body (Inkling's `<|content_thinking|>`).
    forced_open_header: str = ""
    # How a grammar writes the messages (None: no grammar layout declared).
    layout: MessageLayout | None = None

    @property
    def delimiters(self) -> tuple[str, ...]:
        return tuple(delimiter for delimiter in (*self.openers, self.header_end, *self.marker_headers,
                                                 *self.terminators, self.lead) if delimiter)


@dataclass(frozen=True)
class MarkerSuffix:
    """Delimiters written as templates `<NAME{SUF}>`, filled in per checkpoint (HY V4, suffixed Hy3:
    `<tool_call:6124c78e>`). SUF is empty or `:` and 1-64 characters (`SUFFIX`); where it comes from,
    first found wins (FORMATS.md, fourth wave, Decision 7): the `marker_suffix` option, the tokenizer's
    added tokens or the chat template (`detect.marker_suffix`), the rendered prompt (`prompt_markers`),
    and, where `learned` is set, the output's first complete marker.

    `fill(suffix)` is the declaration with every marker spelled with `suffix` (`fill("")` is the
    format's own spec). `carrier` is the marker whose spelling names the suffix in a vocabulary or a
    template (`<tool_calls`: `<tool_calls:SUF>`); `template_switch` a regular expression of a template
    statement that sets it (group `suffix`, written after a `:`); `prompt_markers` one of the prompt
    tokens that carry it (group `suffix`, the last one counts); `learned` one of the output markers
    that fix it (group `suffix`; empty: never learned from the output)."""

    fill: Callable[[str], FormatSpec]
    carrier: str
    prompt_markers: str
    template_switch: str = ""
    learned: str = ""

    def in_prompt(self, prompt: str) -> str | None:
        """The suffix of the last suffix-carrying token of a rendered prompt, or None if it has none."""
        found: list[str] = re.findall(self.prompt_markers, prompt)  # the pattern's one group: the suffixes
        return found[-1] if found else None


# What a marker suffix may be: `:` and 1-64 characters, none of them whitespace, `<`, `>`, `｜`, `:`,
# quotes or braces (Decision 7); or empty.
SUFFIX = r"(?::[^\s<>｜:\"'{}]{1,64})?"
_SUFFIX = re.compile(SUFFIX)


def check_suffix(suffix: object) -> None:
    """`ValueError` saying what a marker suffix may be, unless `suffix` is one."""
    if not isinstance(suffix, str) or _SUFFIX.fullmatch(suffix) is None:
        raise ValueError(f"marker_suffix must be '' or ':' and 1-64 characters, none of them whitespace, "
                         f"'<', '>', '｜', ':', quotes or braces (':6124c78e'); got {suffix!r}")


class Rebuildable(Protocol):
    """What a run-time declaration is rebuilt from in another process (`FormatSpec.source`)."""

    def rebuilt(self) -> FormatSpec: ...


def _rebuilt(source: Rebuildable) -> FormatSpec:
    return source.rebuilt()


@dataclass(frozen=True)
class FormatSpec:
    """Everything the engine needs to know about one wire format."""

    name: str
    aliases: tuple[str, ...]
    # (opener, closer) pairs read at the start; an opener in several pairs closes at any of their closers.
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
    # (Kimi K2, Apertus: their call tokens are emitted only to call), as its closer would: the text
    # before it is reasoning (one exception: `forced_reasoning_needs_closer`). Otherwise the call
    # text stays reasoning unless the caller extracts it.
    calls_end_reasoning: bool = False
    # ... only in reasoning the prompt opened (`thinking_forced_open`); reasoning the model opened
    # itself keeps the general rule (Ling 3).
    calls_end_forced_reasoning: bool = False
    # How `detect_format` knows the format from a chat template: sets of strings that must all occur
    # in it (the tool-call markup the template writes), and, for templates that show no tool markup,
    # turn markers. Rules with more strings are tried first, then longer ones.
    detect: tuple[tuple[str, ...], ...] = ()
    detect_turns: tuple[str, ...] = ()
    # Markers that are framing wherever they occur in content and are dropped (Command R7B's
    # `<|START_RESPONSE|>` / `<|END_RESPONSE|>`): content is the text around them, joined.
    framing: tuple[str, ...] = ()
    # Markers that are framing only at the end of the output (after them only whitespace): GigaChat's
    # stop token `<|message_sep|>`, left in by a server. Followed by other text they are content, verbatim;
    # another marker is other text (of a run only the last can be framing, so one at most is held back).
    trailing_framing: tuple[str, ...] = ()
    # Markers that are framing only at the very start of the output, after whitespace and before a
    # reasoning opener (Ling 3's `<role>ASSISTANT</role>`, the generation prompt's role marker).
    leading_framing: tuple[str, ...] = ()
    # Delimiters filled in per checkpoint (`MarkerSuffix`); None: the markers are spelled one way.
    marker_suffix: MarkerSuffix | None = None
    # The `framing` markers are dropped inside reasoning too (Kimi K3's response channel tags:
    # framing wherever they appear). Otherwise reasoning keeps them as text.
    framing_in_reasoning: bool = False
    # A regular expression (the `regex` module, matched with `partial=True`) of framing right after a
    # reasoning opener at the start: Gemma 4's channel name and one newline (`thought\n?` after
    # `<|channel>`). Held back only while the text could still become it; keep it bounded.
    reasoning_lead: str = ""
    # The output is a sequence of headed messages whose headers route their bodies (gpt-oss harmony):
    # the engine reads it with its message readers (`engine/messages.py`) instead of the start reader.
    messages: MessageSpec | None = None
    # Call envelopes recognised by position and pattern rather than by an opening delimiter
    # (Llama 3 JSON calls at the start of the output, pythonic `[NAME(…)]` lists): `AnchorSpec`.
    anchors: tuple[AnchorSpec, ...] = ()
    # An opening and a closing marker around the answer that are framing only when the opener
    # directly follows the reasoning block (after optional whitespace): Granite 3's
    # `<think>…</think><response>…</response>`. The first closer after such an opener is framing
    # too, and may be missing at the end. Anywhere else both are content.
    framing_after_reasoning: tuple[str, str] | None = None
    # With `thinking_forced_open`, the output is reasoning only if it closes the reasoning block: one
    # that never writes the closer is the answer, content (Nemotron v2's template writes a turn
    # without reasoning as bare text after its `<think>⏎` prompt). Where `calls_end_reasoning`, a call
    # opener closes it too, unless only `reasoning_always_open` opened it (no flag, no prompt: Apriel
    # 1.5 writes its answer, then calls, with no marker). The cost: forced-open reasoning is
    # held back, not streamed, until its closer arrives (or the end makes it content).
    forced_reasoning_needs_closer: bool = False
    # The output always starts inside reasoning, whatever `thinking_forced_open` says: the model
    # never writes an opener (Apriel's reasoning runs to `[BEGIN FINAL RESPONSE]`).
    reasoning_always_open: bool = False
    # ... unless the output starts (after whitespace) with a call opener: then the call comes first and no
    # reasoning is read (a response_template reasoning field opened at `\A`, the start of the output, which
    # another field's longer opener at that place wins over in transformers' reading).
    reasoning_yields_to_calls: bool = False
    # A reasoning opener later in content opens reasoning again, up to its closer: the reasoning is the
    # blocks joined in output order, and so is the content around them (Solar Open's later `<|think|>`
    # message). Otherwise reasoning is read only at the start, and a later opener is content.
    reasoning_reopens: bool = False
    # `thinking_forced_open` is ignored: no prompt of the format ends inside reasoning (Solar Open's
    # low-effort prompt writes an empty, closed think message; Decision 22 of the third wave).
    ignores_forced_open: bool = False
    # A message holds calls or content, never both (generic's whole-output envelope): generated test
    # messages (`testing.messages`) hold one or the other.
    content_or_calls: bool = False
    # Stop strings an engine needs beyond the tokenizer's EOS when it does not know the format (a raw
    # `/v1/completions` server): a turn's end the template writes but the tokenizer does not name (Kimi K3's
    # `<|end_of_msg|>`), or a token that ends a calling turn (gpt-oss's `<|call|>`). `streamparse serve` sends
    # them with the request's own `stop`; the engine cuts them off, and where one is left in the parse frames
    # it (it never lands in content).
    stops: tuple[str, ...] = ()
    # Where a declaration made at run time comes from, when it needs more than its fields to be rebuilt in
    # another process (a derived format's grammars are defined in the process that derived it): an object
    # whose `rebuilt()` gives the declaration again; pickling sends it instead of the fields.
    source: Rebuildable | None = field(default=None, compare=False, repr=False)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        if self.source is not None:
            return (_rebuilt, (self.source,))
        return super().__reduce_ex__(protocol)

    @property
    def calls_start_at_special_tokens(self) -> bool:
        """Whether the output can be read token-aware (`special_tokens="require"`) without losing calls:
        the format declares special delimiters, learns no marker suffix from the output, and its calls
        start at special tokens (every wrapper has a special opener; an envelope opener that is text
        counts only inside a wrapper). Token-aware reading starts a call only at a special token, so a
        format whose calls may start with text (functionary's `<function=`, GigaChat 3.5's GCML
        markers) is read as text by `streamparse serve` and the vLLM plugin."""
        special = set(self.special)
        wrappers = [set(wrapper.openers) for wrapper in self.wrappers]
        return bool(special) and self.marker_suffix is None and all(openers & special for openers in wrappers) and (
            bool(wrappers) or all(set(envelope.openers) <= special for envelope in self.envelopes))

    def ends_reasoning_at_calls(self, forced: bool) -> bool:
        """Whether a call opener ends unclosed reasoning, the output having started inside it or not."""
        return self.calls_end_reasoning or (forced and self.calls_end_forced_reasoning)

    def ends_inside_reasoning(self, prompt: str) -> bool:
        """Whether a rendered prompt ends inside an open reasoning block (its last opener is unclosed).

        For headed messages, only where the prompt ends with the header of a reasoning body the format
        declares (`MessageSpec.forced_open_header`): otherwise the prompt's open header is read as the first
        message's. Never for a format that ignores `thinking_forced_open` (no prompt of it ends inside
        reasoning). Where the markers carry a suffix, the prompt's own spelling of them is read (`MarkerSuffix`)."""
        if self.messages is not None:
            header = self.messages.forced_open_header
            return bool(header) and prompt.endswith(header)
        if self.ignores_forced_open:
            return False
        if self.marker_suffix is not None:
            suffix = self.marker_suffix.in_prompt(prompt)
            if suffix:
                return self.marker_suffix.fill(suffix)._ends_inside(prompt)
        return self._ends_inside(prompt)

    def _ends_inside(self, prompt: str) -> bool:
        last_open = -1
        closer_after = False
        for opener, closer in self.reasoning:
            position = prompt.rfind(opener) if opener else -1  # ("" is opened by no prompt)
            if position > last_open:
                last_open = position
                closer_after = prompt.find(closer, position + len(opener)) != -1
        return last_open != -1 and not closer_after

    @property
    def delimiters(self) -> tuple[str, ...]:
        """Every delimiter the format reads, for tests and tooling."""
        out: list[str] = []
        for opener, closer in self.reasoning:
            out += [opener, closer] if opener else [closer]  # ("": reasoning no opener opens, `reasoning_always_open`)
        for envelope in self.envelopes:
            out += envelope.openers
        for wrapper in self.wrappers:
            out += [*wrapper.openers, *wrapper.closers, *wrapper.framing]
        out += self.framing
        out += self.trailing_framing
        out += self.leading_framing
        if self.messages is not None:
            out += self.messages.delimiters
        for anchor in self.anchors:
            out += (*anchor.after, *anchor.content_openers)
        out += self.framing_after_reasoning or ()
        return tuple(dict.fromkeys(out))

    @property
    def call_openers(self) -> tuple[str, ...]:
        """Every string that may open a call: envelope and wrapper openers, message header openers,
        and the markers anchored calls follow."""
        out = [o for e in self.envelopes for o in e.openers] + [o for w in self.wrappers for o in w.openers]
        if self.messages is not None:
            out += self.messages.openers
        for anchor in self.anchors:
            out += anchor.after
        return tuple(dict.fromkeys(out))


# What the entry points accept as `format`: a name or alias (declared, or registered with
# `streamparse.register_format`), or a `FormatSpec` itself.
FormatLike = str | FormatSpec
