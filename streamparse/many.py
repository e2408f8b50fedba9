"""`parse_many`: many finished outputs parsed on every core, results in input order.

Work goes to a `ProcessPoolExecutor` in chunks of texts, so the cost of moving data between
processes is paid per chunk, not per text. A worker sends a chunk's results back as one `marshal`
blob of plain tuples (a message's fields, or the caller's columns), not as pickled objects: the
parent, whose time the workers share, only decodes the blob and builds what its caller asked for,
with the collector paused while it does (the results are acyclic; a full collection rescanning
them is pure waste). At most a few chunks per worker are in flight at any time, so an input of
millions of texts streams through in bounded memory (`iter_parse_many`); `parse_many` is that,
collected into a list. Each worker receives the checked `Options` once, when it starts. The worker
count is capped by the cores and by the work: no more workers than chunks, and one chunk is parsed
in this process.
"""

from __future__ import annotations

import gc
import marshal
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from .engine import StreamParser
from .options import OptionFields, Options, ToolsLike, make_options
from .types import Message, RejectedCall, Token, ToolCall

if TYPE_CHECKING:
    from typing_extensions import Unpack

Text = str | bytes | bytearray | Sequence[Token]
Item = TypeVar("Item")
Result = TypeVar("Result")

# Texts per task, measured (bench.throughput, 2 workers, mixed lengths of 100 to 10,000 characters):
# 64 leaves a fixed cost per task visible, 1,024 leaves a worker idle at the end of a short input.
CHUNK_SIZE = 256
IN_FLIGHT_PER_WORKER = 3  # chunks submitted ahead per worker: keeps every core busy, memory bounded

MessageFields = tuple[str, str, list[tuple[str, str, dict[str, Any], str, str]],
                      list[tuple[str, list[str], str, str | None]]]


def parse_with(options: Options, text: Text) -> Message:
    """`parse(text, ...)` for options already checked: what every worker and batch row runs."""
    if not isinstance(text, (str, bytes, bytearray, list, tuple)):
        raise TypeError(f"parse() takes the output as str, bytes or a list of Tokens, got {type(text).__name__}")
    parser = StreamParser.from_options(options)
    parser.feed(text)
    parser.close()
    return parser.message


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


def every_core() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def check_workers(workers: int | None) -> int:
    """`workers` as a count: None is every core; anything but a positive int is a `ValueError`."""
    if workers is None:
        return every_core()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int or None (every core); got {workers!r}")
    return workers


def check_picklable(options: Options) -> None:
    """Workers in other processes receive the options pickled: say which one cannot be, and what to do."""
    for name in ("id_factory", "tools"):
        value = getattr(options, name)
        try:
            pickle.dumps(value)
        except Exception as error:  # pickle raises PicklingError, AttributeError, TypeError...
            hint = ("pass a function defined at module level (not a lambda or a local function)"
                    if name == "id_factory" else "pass plain JSON-like tool definitions")
            raise ValueError(f"{name} cannot be sent to worker processes ({error}); {hint}, "
                             f"or use workers=1 to parse in this process") from None


@contextmanager
def collector_paused() -> Iterator[None]:
    """Automatic garbage collection off while acyclic results are built (restored as it was)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ----------------------------------------------------------------------------- the worker side

_worker: dict[str, Options] = {}  # this worker process's options, set once when it starts


def _start_worker(options: Options) -> None:
    _worker["options"] = options


def _run_chunk(function: Callable[[Options, Any], Any], items: list[Any]) -> bytes:
    """One chunk's results as one `marshal` blob (plain str/bytes/int/float/None/bool/list/tuple/dict)."""
    options = _worker.get("options")
    if options is None:  # pragma: no cover - only if a pool is built without the initializer
        raise RuntimeError("streamparse worker started without its options")
    return marshal.dumps([function(options, item) for item in items])


# ----------------------------------------------------------------------------- the caller side


def ordered_map(
    function: Callable[[Options, Item], Result],
    items: Iterable[Item],
    options: Options,
    workers: int,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[Result]:
    """`function(options, item)` for every item, in input order; on up to `workers` processes.

    `function` must be defined at module level (it is sent to the workers by reference) and return
    what `marshal` can send: plain data, no objects. The processes started are capped by the cores
    and by the chunks of work there are; one chunk is run in this process."""
    source = iter(items)
    workers = min(workers, every_core())
    ahead: list[list[Item]] = []
    if workers > 1:
        for _ in range(workers):
            chunk = list(islice(source, chunk_size))
            if not chunk:
                break
            ahead.append(chunk)
        workers = min(workers, len(ahead))
    if workers <= 1:
        for chunk in ahead:
            for item in chunk:
                yield function(options, item)
        for item in source:
            yield function(options, item)
        return
    check_picklable(options)
    task = partial(_run_chunk, function)
    pending: deque[Future[bytes]] = deque()
    with ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(options,)) as pool:
        try:
            pending.extend(pool.submit(task, chunk) for chunk in ahead)
            del ahead
            while True:
                while len(pending) < workers * IN_FLIGHT_PER_WORKER:
                    chunk = list(islice(source, chunk_size))
                    if not chunk:
                        break
                    pending.append(pool.submit(task, chunk))
                if not pending:
                    return
                yield from marshal.loads(pending.popleft().result())
        finally:
            for future in pending:
                future.cancel()


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
