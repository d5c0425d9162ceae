"""A call bounded in time: ``call_within(fn, seconds, late)``.

Engram waits on things it does not control: an embedding model, an LLM endpoint.
A socket timeout bounds each read, not the whole answer (a server that trickles
one byte a second never trips it), and a local model stuck behind a lock has no
timeout at all. Python cannot interrupt a thread, so the call runs on a daemon
thread of its own and the caller stops waiting at the deadline, raising what
``late()`` makes; the abandoned call finishes, or not, on its own, and its answer
is dropped. A daemon thread never holds up the process's exit.

Abandoned calls still hold a thread each, so at most ``MAX_PENDING`` may be in
flight at once (all callers together): past that a call fails at once, with
``late()``'s error, instead of starting yet another thread behind a dependency
that is not answering.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["MAX_PENDING", "call_within", "pending"]

T = TypeVar("T")

MAX_PENDING = 32  # calls running at once under a deadline, abandoned ones included

_lock = threading.Lock()
_running = 0


def pending() -> int:
    """How many deadline-bounded calls are running now (abandoned ones too)."""
    with _lock:
        return _running


class _Call(Generic[T]):
    """One call on its own thread: its answer or its exception."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.answer: T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        global _running
        try:
            self.answer = self.fn()
        except BaseException as exc:  # handed to the caller, who re-raises it
            self.error = exc
        finally:
            with _lock:
                _running -= 1
            self.done.set()


def _start(call: _Call[T], late: Callable[[], Exception]) -> None:
    """Start ``call``'s thread, or refuse when too many calls are still running."""
    global _running
    with _lock:
        if _running >= MAX_PENDING:
            error = late()
            error.add_note(f"{_running} calls are still running past their deadline")
            raise error
        _running += 1
    try:
        threading.Thread(target=call.run, name="engram-deadline", daemon=True).start()
    except BaseException:
        with _lock:
            _running -= 1
        raise


def call_within(fn: Callable[[], T], seconds: float | None, late: Callable[[], Exception]) -> T:
    """``fn()``, or ``late()`` raised once ``seconds`` pass (None: ``fn()`` directly,
    no thread, no deadline). ``fn``'s own exception is raised as it is."""
    if seconds is None:
        return fn()
    call = _Call(fn)
    _start(call, late)
    if not call.done.wait(seconds):
        raise late()
    if call.error is not None:
        raise call.error
    return call.answer  # type: ignore[return-value]  # set by run() when error is None
