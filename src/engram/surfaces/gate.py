"""A first-come, first-served gate in front of recall: at most N run at once per process.

A recall is mostly Python, and one process runs Python on one core at a time.
Left to the thread pool, every recall that arrives starts at once and they share
that core: under a burst each one is slowed by all the others, and the slowest
take many times their own length (processor sharing). Admitted in arrival order
instead, a recall waits for the ones before it and then runs at full speed, so
the tail under load is a queue's, not a crowd's (measured in
docs/reliability/limits.md, "Recall admission").

Waiting happens on the event loop, not on the thread pool: a queued recall holds
no worker thread, so the other routes (writes, listings, the dashboard) keep
their threads however long the queue. Slots are handed over directly on release
(no barging: a newcomer cannot take a slot a waiter was promised). A request
that waits longer than ``patience`` seconds is refused with ``Unavailable`` (503
with ``Retry-After``) and has done nothing, so a stalled server sheds load
instead of queueing without end. A waiter that is cancelled (its client went
away) leaves the queue, or passes on the slot it was just handed.

The gate belongs to one event loop (one server process) and takes no lock. A
request on another loop (test tooling that starts a loop per request) rebinds an
idle gate to its loop, and runs ungated while the first loop still holds slots.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def waiting(self) -> int:
        """How many requests wait for a slot now."""
        return sum(not turn.done() for turn in self._waiters)

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Run the block in a slot, waiting for one first."""
        if not self._bound_here():
            yield  # another loop's request: the gate cannot queue it with this loop's
            return
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    def _bound_here(self) -> bool:
        """Whether the gate serves the running loop (binding it when the gate is idle)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop and self._free == self.slots and not self._waiters:
            self._loop = loop
        return self._loop is loop

    async def _acquire(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        try:  # asyncio.timeout, not wait_for: 3.11's wait_for may swallow a cancellation
            async with asyncio.timeout(self.patience):
                await asyncio.shield(turn)
        except TimeoutError:
            if _handed(turn):  # handed over as the wait ran out: it is ours
                return
            self._leave(turn)
            raise Unavailable(
                f"the server is busy: this recall waited {self.patience:g} s behind "
                f"{self.slots} running ones and was not started; send it again"
            ) from None
        except BaseException:  # cancelled: give back what was handed, or leave the queue
            if _handed(turn):
                self._release()
            else:
                self._leave(turn)
            raise

    def _leave(self, turn: asyncio.Future[None]) -> None:
        turn.cancel()
        if turn in self._waiters:
            self._waiters.remove(turn)

    def _release(self) -> None:
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes on, still taken
                return
        self._free += 1


def _handed(turn: asyncio.Future[None]) -> bool:
    """Whether a release gave ``turn`` its slot."""
    return turn.done() and not turn.cancelled()
