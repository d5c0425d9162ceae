"""A first-come, first-served gate in front of recall: at most N run at once per process.

A recall is mostly Python, and one process runs Python on one core at a time.
Left to the thread pool, every recall that arrives starts at once and they share
that core: under a burst each one is slowed by all the others, and the slowest
take many times their own length (processor sharing). Admitted in arrival order
instead, a recall waits for the ones before it and then runs at full speed, so
the tail under load is a queue's, not a crowd's. Measured on a 100K-record SQLite
store with one server process at half its capacity (docs/reliability/limits.md):
recall p99 842 ms without the gate, 222 ms with one slot.

Slots are handed over directly on release (no barging: a newcomer cannot take a
slot a waiter was promised). A request that waits longer than ``patience``
seconds is refused with ``Unavailable`` (503 with ``Retry-After``) and has done
nothing, so a stalled server sheds load instead of queueing without end.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from engram.errors import Unavailable

__all__ = ["RecallGate"]


class RecallGate:
    """``slots`` recalls at a time, the rest waiting in arrival order."""

    def __init__(self, slots: int, patience: float) -> None:
        if slots < 1:
            raise ValueError("a gate has at least one slot")
        self.slots = slots
        self.patience = patience
        self._free = slots
        self._lock = threading.Lock()
        self._waiters: deque[threading.Event] = deque()

    @property
    def waiting(self) -> int:
        """How many requests wait for a slot now."""
        with self._lock:
            return len(self._waiters)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Run the block in a slot, waiting for one first."""
        self._acquire()
        try:
            yield
        finally:
            self._release()

    def _acquire(self) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiters.append(turn)
        if turn.wait(self.patience):
            return  # the releasing request handed its slot to this one
        with self._lock:
            if turn.is_set():  # handed over while the wait timed out: it is ours
                return
            self._waiters.remove(turn)
        raise Unavailable(
            f"the server is busy: this recall waited {self.patience:g} s behind "
            f"{self.slots} running ones and was not started; send it again"
        )

    def _release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()  # the slot passes on, still taken
            else:
                self._free += 1
