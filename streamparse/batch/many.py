"""`parse_many`: many finished outputs parsed on every core, results in input order.

The texts go to the workers of `batch.workers` in chunks. A worker sends a chunk's messages back in
a compact form (one `marshal` blob of plain tuples), not as pickled objects, so that the parent,
whose time the workers share, does as little per row as it can:
- a string that is a stretch of the row's text (content, reasoning, a call's raw text and, in the
  JSON formats, its `arguments_json`) is sent as where it lies, and the parent, which still holds
  the text, slices it out: a copy, where a decode of the same bytes read from the pipe would cost
  more and move twice the data;
- a call's `arguments` (the many small objects of a nested dict: most of what decoding a message
  costs) travel as their own `marshal` bytes, which the parent's `ToolCall` decodes when they are
  first read. A caller that reads every call's arguments pays that decode (the fastest there is for
  them) in the parent; one that counts, filters or writes `arguments_json` never does.
The messages are built with the collector paused (they are acyclic; a full collection rescanning
them is pure waste). `iter_parse_many` reads its input only a few chunks ahead, so millions of texts
stream through in bounded memory; `parse_many` is that, collected into a list.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

from ..options import OptionFields, Options, ToolsLike, make_options
from ..spec import FormatLike
from ..types import Message, RejectedCall, ToolCall
from .rows import Text, collector_paused, parse_with
from .workers import check_picklable, check_workers, every_core, ordered_chunks, ordered_map

if TYPE_CHECKING:
    from typing_extensions import Unpack

Piece = str | tuple[int, int]  # a string, or where it lies in the row's text: text[start:end]
CompactCall = tuple[str, str, Piece, Piece, bytes]  # id, name, arguments_json, raw, marshalled arguments
CompactRejected = tuple[str, list[str], Piece, str | None]  # status, errors, raw, name
Compact = tuple[Piece, Piece, list[CompactCall], list[CompactRejected]]

# Shorter strings are sent as they are: finding and slicing them costs more than it saves.
SHORTEST_PIECE = 32


class ReceivedToolCall(ToolCall):
    """A `ToolCall` a worker sent back: `arguments` is decoded from the bytes it came in when first read.

    It is equal to the `ToolCall` `parse()` gives (and pickles as one); only `type(call)` tells them apart."""

    def __getattr__(self, name: str) -> Any:
        if name != "arguments" or "_sent_arguments" not in self.__dict__:
            raise AttributeError(f"'ToolCall' object has no attribute {name!r}")
        arguments = marshal.loads(self.__dict__.pop("_sent_arguments"))
        object.__setattr__(self, "arguments", arguments)
        return arguments

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return (self.id, self.name, self.arguments_json, self.arguments) == (
            other.id, other.name, other.arguments_json, other.arguments)

    __hash__ = None  # type: ignore[assignment]  # (a ToolCall holds a dict: it has no hash either)

    def __repr__(self) -> str:
        return ToolCall.__repr__(self).replace(type(self).__qualname__, "ToolCall", 1)


_new = object.__new__  # a frozen dataclass built as its __dict__: a third of what its __init__ costs


def _received_call(text: Text, call_id: str, name: str, arguments_json: Piece, raw: Piece,
                   arguments: bytes) -> ReceivedToolCall:
    call = _new(ReceivedToolCall)  # (ToolCall's frozen __init__ wants the arguments decoded)
    fields = call.__dict__
    fields["id"] = call_id
    fields["name"] = name
    fields["arguments_json"] = (arguments_json if type(arguments_json) is str  # (a piece, inline: no call)
                                else text[arguments_json[0]:arguments_json[1]])  # type: ignore[index]
    fields["raw"] = raw if type(raw) is str else text[raw[0]:raw[1]]  # type: ignore[index]
    fields["_sent_arguments"] = arguments
    return call


def _rejected_call(text: Text, status: str, errors: list[str], raw: Piece, name: str | None) -> RejectedCall:
    rejected = _new(RejectedCall)
    fields = rejected.__dict__
    fields["status"] = status
    fields["errors"] = errors
    fields["raw"] = raw if type(raw) is str else text[raw[0]:raw[1]]  # type: ignore[index]
    fields["name"] = name
    return rejected


def _piece(text: str, value: str, start: int = 0, end: int | None = None) -> Piece:
    """Where `value` first lies in `text[start:end]`, or `value` itself (short, or not found).
    Looked for by its head, then compared whole: a find of the whole value first reads all of it
    (a long needle's preprocessing), which cost a worker twice as much on bench.throughput's rows.
    After `_HEAD_MISSES` places where only the head matches, the whole value is looked for instead,
    so a text of repeated heads costs one find, not one compare a place."""
    if len(value) < SHORTEST_PIECE:
        return value
    end = len(text) if end is None else end
    head = value[:SHORTEST_PIECE]
    at = text.find(head, start, end)
    for _ in range(_HEAD_MISSES):
        if at < 0 or text.startswith(value, at, end):
            break
        at = text.find(head, at + 1, end)
    else:
        at = text.find(value, at, end)
    return value if at < 0 else (at, at + len(value))


_HEAD_MISSES = 4


def compact_fields(message: Message, text: Text) -> Compact:
    """`message`, parsed from `text`, in the form a worker sends back: `message_from_compact` rebuilds it."""
    source = text if isinstance(text, str) else ""  # pieces of bytes or Tokens are sent as strings
    calls: list[CompactCall] = []
    for call in message.tool_calls:
        raw = _piece(source, call.raw)
        inside = raw if isinstance(raw, tuple) else (0, len(source))
        calls.append((call.id, call.name, _piece(source, call.arguments_json, *inside), raw,
                      marshal.dumps(call.arguments)))
    return (_piece(source, message.content), _piece(source, message.reasoning), calls,
            [(r.status, r.errors, _piece(source, r.raw), r.name) for r in message.rejected])


def messages_from_compact(texts: list[Text], chunk: list[Compact]) -> list[Message]:
    """The messages `compact_fields` sent for `texts`, their strings sliced from the texts.

    What a row costs the parent is mostly this: so a chunk is one loop, with no call a row but the
    calls' own."""
    messages: list[Message] = []
    append = messages.append
    for text, (content, reasoning, calls, rejected) in zip(texts, chunk, strict=True):
        message = _new(Message)
        made = message.__dict__
        made["content"] = content if type(content) is str else text[content[0]:content[1]]  # type: ignore[index]
        made["reasoning"] = reasoning if type(reasoning) is str else text[reasoning[0]:reasoning[1]]  # type: ignore[index]
        made["tool_calls"] = [_received_call(text, *call) for call in calls] if calls else []
        made["rejected"] = [_rejected_call(text, *call) for call in rejected] if rejected else []
        append(message)
    return messages


def message_from_compact(text: Text, fields: Compact) -> Message:
    """The message `compact_fields` sent for `text`, its strings sliced from the text."""
    return messages_from_compact([text], [fields])[0]


def parse_compact(options: Options, text: Text) -> Compact:
    """What a worker runs per row: the parse, in the form it sends back."""
    return compact_fields(parse_with(options, text), text)


def _message_chunks(texts: Iterable[Text], options: Options, workers: int) -> Iterator[list[Message]]:
    """The messages of `texts` parsed on the workers, a chunk at a time."""
    for chunk, fields in ordered_chunks(parse_compact, texts, options, workers):
        yield messages_from_compact(chunk, fields)


def iter_parse_many(texts: Iterable[Text], options: Options, workers: int | None = None) -> Iterator[Message]:
    """The messages of `texts` in order, as they are ready; reads `texts` only a few chunks ahead."""
    count = check_workers(workers)
    if min(count, every_core()) == 1:
        return ordered_map(parse_with, texts, options, 1)
    return (message for messages in _message_chunks(texts, options, count) for message in messages)


def parse_many(
    texts: Iterable[Text],
    *,
    workers: int | None = None,
    format: FormatLike = "hermes",
    tools: ToolsLike = None,
    thinking_forced_open: bool = False,
    **options: Unpack[OptionFields],
) -> list[Message]:
    """`[parse(text, **options) for text in texts]`, on `workers` processes (None: every core; 1: this one).

    The options are checked here, before any work starts; with more than one worker, `id_factory` must
    be picklable (a function defined at module level). No more processes start than there are cores
    and chunks of work."""
    if isinstance(texts, (str, bytes, bytearray)):
        raise TypeError("parse_many() takes an iterable of texts; to parse one text use parse()")
    checked = make_options(format, tools, thinking_forced_open, options)
    count = check_workers(workers)
    if count > 1:
        check_picklable(checked)
    if min(count, every_core()) == 1:
        return list(ordered_map(parse_with, texts, checked, 1))
    # The parent only decodes and builds acyclic messages (at most one chunk is parsed here, when
    # there is no more work than that): a collection would rescan the growing list for nothing.
    with collector_paused():
        return list(chain.from_iterable(_message_chunks(texts, checked, count)))
