"""`parse_many`: many finished outputs parsed on every core, results in input order.

Work goes to a `ProcessPoolExecutor` in chunks of texts (one message per text back), so the cost of
moving data between processes is paid per chunk, not per text. At most a few chunks per worker are
in flight at any time, so an input of millions of texts streams through in bounded memory
(`iter_parse_many`); `parse_many` is that, collected into a list. Each worker receives the checked
`Options` once, when it starts, not with every chunk.
"""

from __future__ import annotations

import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from .engine import StreamParser
from .options import OptionFields, Options, ToolsLike, make_options
from .types import Message, Token

if TYPE_CHECKING:
    from typing_extensions import Unpack

Text = str | bytes | bytearray | Sequence[Token]
Item = TypeVar("Item")
Result = TypeVar("Result")

CHUNK_SIZE = 64  # texts per task: enough to amortise the IPC, small enough to balance the workers
IN_FLIGHT_PER_WORKER = 4  # chunks submitted ahead per worker: keeps every core busy, memory bounded


def parse_with(options: Options, text: Text) -> Message:
    """`parse(text, ...)` for options already checked: what every worker and batch row runs."""
    if not isinstance(text, (str, bytes, bytearray, list, tuple)):
        raise TypeError(f"parse() takes the output as str, bytes or a list of Tokens, got {type(text).__name__}")
    parser = StreamParser.from_options(options)
    parser.feed(text)
    parser.close()
    return parser.message


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


# ----------------------------------------------------------------------------- the worker side

_worker: dict[str, Options] = {}  # this worker process's options, set once when it starts


def _start_worker(options: Options) -> None:
    _worker["options"] = options


def _run_chunk(function: Callable[[Options, Any], Any], items: list[Any]) -> list[Any]:
    options = _worker.get("options")
    if options is None:  # pragma: no cover - only if a pool is built without the initializer
        raise RuntimeError("streamparse worker started without its options")
    return [function(options, item) for item in items]


# ----------------------------------------------------------------------------- the caller side


def ordered_map(
    function: Callable[[Options, Item], Result],
    items: Iterable[Item],
    options: Options,
    workers: int,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[Result]:
    """`function(options, item)` for every item, in input order; on `workers` processes when more than 1.

    `function` must be defined at module level (it is sent to the workers by reference)."""
    if workers == 1:
        for item in items:
            yield function(options, item)
        return
    check_picklable(options)
    task = partial(_run_chunk, function)
    source = iter(items)
    pending: deque[Future[list[Result]]] = deque()
    with ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(options,)) as pool:
        try:
            while True:
                while len(pending) < workers * IN_FLIGHT_PER_WORKER:
                    chunk = list(islice(source, chunk_size))
                    if not chunk:
                        break
                    pending.append(pool.submit(task, chunk))
                if not pending:
                    return
                yield from pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def iter_parse_many(texts: Iterable[Text], options: Options, workers: int | None = None) -> Iterator[Message]:
    """The messages of `texts` in order, as they are ready; reads `texts` only a few chunks ahead."""
    return ordered_map(parse_with, texts, options, check_workers(workers))


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
    be picklable (a function defined at module level)."""
    if isinstance(texts, (str, bytes, bytearray)):
        raise TypeError("parse_many() takes an iterable of texts; to parse one text use parse()")
    checked = make_options(format, tools, thinking_forced_open, options)
    count = check_workers(workers)
    if workers is None and isinstance(texts, Sequence) and len(texts) <= CHUNK_SIZE:
        count = 1  # one chunk of work does not pay for starting processes
    if count > 1:
        check_picklable(checked)
    return list(ordered_map(parse_with, texts, checked, count))
