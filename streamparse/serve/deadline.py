"""Deadlines for work that runs untrusted code or scales with a request: rendering a chat template
(a template is code, in practice from a downloaded model directory), marking a prompt, compiling tools,
building a grammar.

`within(seconds, step)` bounds the Python code run inside it, in whichever thread runs it: the watchdog
raises `DeadlineExceeded` in that thread (CPython's `PyThreadState_SetAsyncExc`) once the time is up,
at the next bytecode. That stops a template's endless `{% for %}` where no hook of the sandbox runs;
it cannot stop one long C call, which is why the sandbox also bounds sizes (`template._Sandbox`).
Deadlines nest: an inner one never outlasts the one around it, and each `within` catches only its
own expiry, so an outer deadline passing inside an inner block ends the outer block.
Cost: a heap push per `within` (one watchdog thread per process waits for the soonest expiry), nothing
per bytecode, and the watchdog's wake-up at the expiry (a disarmed entry stays until then): ~2% of the
proxy's CPU per request. So a `within` inside `LoopBudget.attempt`, whose budget ends first, arms nothing.

`LoopBudget` runs short work on the event loop's own thread, stopped by SIGALRM after a few
milliseconds so that longer work can move to a thread: on this kind of machine handing work to a
thread and back costs ~130-180 µs of CPU in wake-ups, a tenth of what preparing a small request costs.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

__all__ = ["DeadlineExceeded", "LoopBudget", "within"]

_T = TypeVar("_T")


class DeadlineExceeded(Exception):
    """The work of `step` ran past its deadline of `seconds`."""

    def __init__(self, step: str = "the request", seconds: float = 0.0) -> None:
        super().__init__(f"{step} took longer than its deadline of {seconds:g} s")
        self.step = step
        self.seconds = seconds


_local = threading.local()
_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.c_void_p)


def _interrupt(thread: int, kind: type[BaseException] | None) -> None:
    """Raise `kind` in `thread` at its next bytecode; None (NULL) clears what is pending there. The
    caller keeps `kind` alive."""
    _set_async_exc(thread, None if kind is None else id(kind))


class _Watchdog:
    """One thread per process that calls each armed `fire` at its expiry: arming is a heap push, not a
    thread start (a `threading.Timer` per block cost ~190 µs, as much as a short render). A disarmed
    entry stays in the heap until its time, and its `fire` then does nothing. Rebuilt in a forked child
    (threads do not survive a fork: `serve --workers` forks after loading)."""

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._ready = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, expiry: float, fire: Callable[[], None]) -> None:
        with self._ready:
            heapq.heappush(self._heap, (expiry, next(self._count), fire))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="streamparse-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is fire:  # sooner than what the thread waits for
                self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    self._ready.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                fire = heapq.heappop(self._heap)[2]
            fire()


_WATCHDOG = _Watchdog()
# One class per nesting depth: a block catches only its own depth's expiry, so an enclosing block's
# passes through it (a thread's blocks at one depth never overlap in time).
_EXPIRED_AT: list[type[_Expired]] = []


def _expired_at(depth: int) -> type[_Expired]:
    while len(_EXPIRED_AT) <= depth:
        _EXPIRED_AT.append(type("DeadlineExceeded", (_Expired,), {}))
    return _EXPIRED_AT[depth]


def _expiries() -> list[float]:
    """The expiries of the deadlines around the calling thread's code, the innermost last."""
    stack: list[float] | None = getattr(_local, "expiries", None)
    if stack is None:
        stack = _local.expiries = []
    return stack


@contextmanager
def within(seconds: float | None, step: str) -> Iterator[None]:
    """Run the block with at most `seconds` (None: only the enclosing deadline, if any); past it,
    `DeadlineExceeded(step, seconds)` is raised in the block's thread."""
    stack = _expiries()
    expiry = time.monotonic() + seconds if seconds is not None else None
    if seconds is None or expiry is None or (stack and stack[-1] <= expiry):  # the enclosing deadline stands
        yield
        return
    expired = _expired_at(len(stack))
    thread = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def fire() -> None:
        with lock:
            if state["armed"]:
                state["fired"] = True
                _interrupt(thread, expired)

    stack.append(expiry)
    try:
        try:
            _WATCHDOG.arm(expiry, fire)  # inside: a deadline that passes as it is armed is caught too
            yield
        finally:
            stack.pop()
            with lock:
                state["armed"] = False
                if state["fired"]:
                    _interrupt(thread, None)  # raised too late to matter: cleared, not raised later
    except expired:
        raise DeadlineExceeded(step, seconds) from None


class _Expired(BaseException):
    """Raised into a thread by a deadline's timer; a BaseException so that the code it interrupts (a
    template's `except Exception` in our own wrappers) does not swallow it."""


class _Overran(BaseException):
    """Raised by `LoopBudget`'s alarm inside the work it runs (a BaseException, as `_Expired` is)."""


class LoopBudget:
    """Work tried first on the calling thread (the event loop's), stopped when it runs past `budget`
    seconds so the caller can hand it to a thread instead.

    The stop is SIGALRM (`setitimer`: two cheap system calls per attempt, no thread woken); its handler
    raises only while the work itself runs, that is when the frame of `attempt` is a caller of the
    frame the signal interrupted, so the alarm can never land in the event loop's own code. It fires
    again every millisecond after the budget, so work that swallows one stop is stopped at the next.
    After an overrun no work is tried for `cooldown` seconds: a flood of costly requests costs the loop
    at most `budget` per `cooldown`. Usable only on the main thread of a process in which SIGALRM has
    no other handler (the first attempt checks and installs the handler); elsewhere nothing is tried.
    The budget matches CPython's switch interval (5 ms), the longest a preparing thread holds the GIL
    while the event loop waits for it: a stopped attempt holds the loop up no longer than a thread would.
    """

    def __init__(self, budget: float = 0.005, cooldown: float = 1.0) -> None:
        self.budget = budget
        self.cooldown = cooldown
        self.tried = 0  # attempts made, and how many of them ran past the budget
        self.overran = 0
        self._usable: bool | None = None
        self._frame: FrameType | None = None  # attempt's own frame while its work runs
        self._resume = 0.0  # after an overrun, no attempt before this monotonic time

    def _install(self) -> bool:
        if self._usable is None:
            self._usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
                            and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None))
            if self._usable:
                signal.signal(signal.SIGALRM, self._on_alarm)
        return self._usable

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        attempt = self._frame
        if attempt is None:  # a late alarm after the work ended: nothing to stop
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        while frame is not None and frame is not attempt:
            frame = frame.f_back
            if frame is attempt:  # inside the work, below the attempt
                raise _Overran
        # in `attempt` itself (arming, disarming) or outside it: the next alarm, a millisecond on, decides

    def attempt(self, work: Callable[[], _T]) -> tuple[bool, _T | None]:
        """`(True, work())` when the work ended within the budget (its exceptions propagate as they
        are); `(False, None)` when it ran past the budget (stopped: its result is lost) or was not tried."""
        if (self._frame is not None or time.monotonic() < self._resume
                or threading.current_thread() is not threading.main_thread() or not self._install()):
            return False, None
        self.tried += 1
        self._frame = sys._getframe()
        # The budget is the deadline around the work: a `within` inside it (a template's render) that
        # ends later stands aside, arming no watchdog entry, whose wake-up at its expiry would cost
        # the process more than the whole attempt saves (the work stopped here is redone within them).
        expiries = _expiries()
        expiries.append(time.monotonic() + self.budget)
        signal.setitimer(signal.ITIMER_REAL, self.budget, 0.001)
        try:
            return True, work()
        except _Overran:
            self.overran += 1
            self._resume = time.monotonic() + self.cooldown
            return False, None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._frame = None
            expiries.pop()
