"""A call bounded in time: ``call_within(fn, seconds, late)``.

Engram waits on things it does not control: an embedding model, an LLM endpoint.
A socket timeout bounds each read, not the whole answer (a server that trickles
one byte a second never trips it), and a local model stuck behind a lock has no
timeout at all. Python cannot interrupt a thread, so the call runs on a daemon
thread of its own and the caller stops waiting at the deadline, raising what
``late()`` makes; the abandoned call finishes, or not, on its own, and its answer
is dropped. A daemon thread never holds up the process's exit.

Abandoned calls still hold a thread each, so at most ``MAX_PENDING`` abandoned
calls may still be running at once (all callers together): past that a call is
refused at once, with ``late()``'s error saying so, instead of starting yet
another thread behind a dependency that is not answering. Calls that are still
within their deadline do not count: a busy server with many healthy calls in
flight is never refused. A forked child starts with no abandoned calls (their
threads do not exist in it) and a fresh lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["MAX_PENDING", "call_within", "pending"]

T = TypeVar("T")

MAX_PENDING = 32  # abandoned calls (past their deadline) still running, at most

_lock = threading.Lock()
_abandoned = 0


def _after_fork_in_child() -> None:
    global _lock, _abandoned
    _lock, _abandoned = threading.Lock(), 0


os.register_at_fork(after_in_child=_after_fork_in_child)


def pending() -> int:
    """How many calls abandoned past their deadline are still running."""
    with _lock:
        return _abandoned


class _Call(Generic[T]):
    """One call on its own thread: its answer or its exception."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.answer: T | None = None
        self.error: BaseException | None = None
        self.finished = False  # under _lock
        self.abandoned = False  # under _lock: its caller stopped waiting

    def run(self) -> None:
        global _abandoned
        try:
            self.answer = self.fn()
        except BaseException as exc:  # handed to the caller, who re-raises it
            self.error = exc
        finally:
            with _lock:
                self.finished = True
                if self.abandoned:
                    _abandoned -= 1
            self.done.set()

    def abandon(self) -> bool:
        """Give up on the call (True), unless it finished meanwhile (False)."""
        global _abandoned
        with _lock:
            if self.finished:
                return False
            self.abandoned = True
            _abandoned += 1
            return True


def _refused(late: Callable[[], Exception], count: int) -> Exception:
    """``late()``'s error, worded for a call that was never started."""
    error = late()
    error.args = (
        f"not called: {count} earlier calls are still running past their deadline "
        f"(the dependency is not answering): {error}",
    )
    return error


def _start(call: _Call[T], late: Callable[[], Exception]) -> None:
    """Start ``call``'s thread, or refuse when too many abandoned calls still run."""
    with _lock:
        count = _abandoned
    if count >= MAX_PENDING:
        raise _refused(late, count)
    threading.Thread(target=call.run, name="engram-deadline", daemon=True).start()


def call_within(fn: Callable[[], T], seconds: float | None, late: Callable[[], Exception]) -> T:
    """``fn()``, or ``late()`` raised once ``seconds`` pass (None: ``fn()`` directly,
    no thread, no deadline). ``fn``'s own exception is raised as it is."""
    if seconds is None:
        return fn()
    call = _Call(fn)
    _start(call, late)
    if not call.done.wait(seconds) and call.abandon():
        raise late()
    call.done.wait()  # finished just as the deadline passed: its answer is here
    if call.error is not None:
        raise call.error
    return call.answer  # type: ignore[return-value]  # set by run() when error is None
