"""Deadlines for work that runs untrusted code or scales with a request: rendering a chat template
(a template is code, in practice from a downloaded model directory), marking a prompt, compiling tools,
building a grammar.

`within(seconds, step)` bounds the Python code run inside it, in whichever thread runs it: a timer
raises `DeadlineExceeded` in that thread (CPython's `PyThreadState_SetAsyncExc`) once the time is up,
at the next bytecode. That stops a template's endless `{% for %}` where no hook of the sandbox runs;
it cannot stop one long C call, which is why the sandbox also bounds sizes (`template._Sandbox`).
Deadlines nest: an inner one never outlasts the one around it, and each `within` catches only its
own expiry, so an outer deadline passing inside an inner block ends the outer block.
Cost: one timer thread start per `within` (tens of microseconds), nothing per bytecode.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["DeadlineExceeded", "within"]


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


@contextmanager
def within(seconds: float | None, step: str) -> Iterator[None]:
    """Run the block with at most `seconds` (None: only the enclosing deadline, if any); past it,
    `DeadlineExceeded(step, seconds)` is raised in the block's thread."""
    stack: list[float] = getattr(_local, "expiries", None) or []
    _local.expiries = stack
    expiry = time.monotonic() + seconds if seconds is not None else None
    if seconds is None or expiry is None or (stack and stack[-1] <= expiry):  # the enclosing deadline stands
        yield
        return
    # A class of its own: an enclosing block's expiry passes through this block's `except`.
    expired: type[_Expired] = type("DeadlineExceeded", (_Expired,), {})
    thread = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def fire() -> None:
        with lock:
            if state["armed"]:
                state["fired"] = True
                _interrupt(thread, expired)

    timer = threading.Timer(max(0.0, expiry - time.monotonic()), fire)
    timer.daemon = True
    stack.append(expiry)
    try:
        try:
            timer.start()  # inside: a deadline short enough to pass while the timer starts is caught too
            yield
        finally:
            stack.pop()
            timer.cancel()
            with lock:
                state["armed"] = False
                if state["fired"]:
                    _interrupt(thread, None)  # raised too late to matter: cleared, not raised later
    except expired:
        raise DeadlineExceeded(step, seconds) from None


class _Expired(BaseException):
    """Raised into a thread by a deadline's timer; a BaseException so that the code it interrupts (a
    template's `except Exception` in our own wrappers) does not swallow it."""
