"""`parse_many`: many finished outputs parsed on every core, results in input order.

The texts go to the workers of `batch.workers` in chunks; a worker sends a chunk's messages back as
plain tuples of their fields (one `marshal` blob), not as pickled objects: the parent, whose time the
workers share, only decodes the blob and builds the messages, with the collector paused while it
does (the results are acyclic; a full collection rescanning them is pure waste). `iter_parse_many`
reads its input only a few chunks ahead, so millions of texts stream through in bounded memory;
`parse_many` is that, collected into a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..options import OptionFields, Options, ToolsLike, make_options
from ..types import Message, RejectedCall, ToolCall
from .rows import Text, parse_with
from .workers import check_picklable, check_workers, collector_paused, every_core, ordered_map

if TYPE_CHECKING:
    from typing_extensions import Unpack

MessageFields = tuple[str, str, list[tuple[str, str, dict[str, Any], str, str]],
                      list[tuple[str, list[str], str, str | None]]]


def message_fields(message: Message) -> MessageFields:
    """A message as plain tuples, what `marshal` sends fast: `message_from_fields` rebuilds it."""
    return (message.content, message.reasoning,
            [(c.id, c.name, c.arguments, c.arguments_json, c.raw) for c in message.tool_calls],
            [(r.status, r.errors, r.raw, r.name) for r in message.rejected])


def message_from_fields(fields: MessageFields) -> Message:
    content, reasoning, calls, rejected = fields
    return Message(content, reasoning, [ToolCall(*call) for call in calls], [RejectedCall(*r) for r in rejected])


def parse_fields(options: Options, text: Text) -> MessageFields:
    return message_fields(parse_with(options, text))


def iter_parse_many(texts: Iterable[Text], options: Options, workers: int | None = None) -> Iterator[Message]:
    """The messages of `texts` in order, as they are ready; reads `texts` only a few chunks ahead."""
    count = check_workers(workers)
    if count == 1:
        return ordered_map(parse_with, texts, options, 1)
    return map(message_from_fields, ordered_map(parse_fields, texts, options, count))


def parse_many(
    texts: Iterable[Text],
    *,
    workers: int | None = None,
    format: str = "hermes",
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
        return [parse_with(checked, text) for text in texts]
    # The parent only decodes and builds acyclic messages (at most one chunk is parsed here, when
    # there is no more work than that): a collection would rescan the growing list for nothing.
    with collector_paused():
        return [message_from_fields(fields) for fields in ordered_map(parse_fields, texts, checked, count)]
