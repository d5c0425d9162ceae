"""An LRU of in-memory partitions (vector or lexical), refreshed from counters.

Triggers keep per-(tenant, user) counters of inserts and deletes. A cached
partition whose delete count still matches is brought up to date by appending
the rows after its ``cursor``; any delete rebuilds it, since removing rows from
the middle of packed arrays costs as much as loading them again.

The cache only ever holds committed rows. A thread inside its own transaction
reads through ``read(private=True)``: the cached partition as it is, plus a private partition
of the rows after its cursor (or a private full load after a delete), so its own
uncommitted rows are seen by it alone and vanish with a rollback, nested or not.

No lock is held while rows load: ``_loading`` serialises loads (a loader on a
single-connection store waits for the store's lock, which a transaction holds,
and that transaction never waits for ``_loading``), and a load that began
before a ``clear`` or ``drop_tenant`` is not installed afterwards (erasure must
not be undone by a refresh in flight).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from engram.store.predicate import NO_USER, Subject, Visibility

__all__ = ["PartitionCache", "Refreshable", "partitions_for"]


class Refreshable(Protocol):
    """What the cache needs of a partition."""

    inserts: int
    deletes: int
    cursor: int  # the last source sequence number appended

    @property
    def size(self) -> int: ...

    def append(self, rows: Sequence[Any]) -> None: ...


P = TypeVar("P", bound=Refreshable)
Key = tuple[str, str, str]  # tenant, user, kind (a model id, or "lexical")


class PartitionCache(Generic[P]):
    """LRU of loaded partitions, bounded by total rows; thread-safe."""

    def __init__(self, max_rows: int) -> None:
        self._max_rows = max_rows
        self._parts: OrderedDict[Key, P] = OrderedDict()
        self._lock = threading.Lock()  # the dictionary only, never held while loading
        self._loading = threading.Lock()
        self._generation = 0

    def read(
        self,
        key: Key,
        counters: tuple[int, int],
        make: Callable[[], P],
        load: Callable[[int], Sequence[Any]],
        *,
        private: bool = False,
        fits: Callable[[P], bool] = lambda part: True,
    ) -> list[P]:
        """The partitions holding the rows ``counters`` (inserts, deletes) describe:
        ``load(after)`` returns the source rows after a cursor, in order.

        Outside a transaction: the shared partition, refreshed. For a thread
        inside its own transaction (``private``; ``counters`` include its
        uncommitted changes): the cached committed partition and a private
        partition of the rows after it, or one private full load. The cache is
        then read, never written, so a recall inside a transaction on a cold cache
        (or after a delete) loads the whole partition each time: a cost only
        callers who read inside their own transactions pay (the write path never
        does).
        """
        if private:
            with self._lock:
                part = self._parts.get(key)
            usable = (part is not None and part.deletes == counters[1]
                      and part.inserts <= counters[0] and fits(part))  # fmt: skip
            return self._layers(part if usable else None, counters, make, load)
        with self._loading:
            with self._lock:
                part, generation = self._parts.get(key), self._generation
            # Counters only grow, except when an erasure deletes a subject's rows:
            # fewer inserts than cached means the partition is from before that.
            stale = part is None or part.deletes != counters[1] or part.inserts > counters[0]
            if stale or part is None or not fits(part):
                part = make()
                part.append(load(0))
            elif part.inserts != counters[0]:
                part.append(load(part.cursor))  # searches in flight cut at their own mask
            part.inserts, part.deletes = counters
            with self._lock:
                if generation == self._generation:
                    self._parts[key] = part
                    self._parts.move_to_end(key)
                    self._evict()
            return [part]

    @staticmethod
    def _layers(
        cached: P | None,
        counters: tuple[int, int],
        make: Callable[[], P],
        load: Callable[[int], Sequence[Any]],
    ) -> list[P]:
        if cached is not None and cached.inserts == counters[0]:
            return [cached]
        extra = make()
        extra.append(load(0 if cached is None else cached.cursor))
        return [extra] if cached is None else [cached, extra]

    def current(self, key: Key, counters: tuple[int, int]) -> P | None:
        """The cached partition if it matches ``counters``; None rather than loading."""
        with self._lock:
            part = self._parts.get(key)
        if part is None or (part.inserts, part.deletes) != counters:
            return None
        return part

    def _evict(self) -> None:
        total = sum(part.size for part in self._parts.values())
        while total > self._max_rows and len(self._parts) > 1:
            _, dropped = self._parts.popitem(last=False)
            total -= dropped.size

    def holds(self, tenant_id: str) -> bool:
        """Whether a partition of the tenant is cached."""
        with self._lock:
            return any(key[0] == tenant_id for key in self._parts)

    def drop_tenant(self, tenant_id: str) -> None:
        """Forget a tenant's partitions now: erasure must not leave them in memory,
        and a forgotten record's derived copies may sit in any of them."""
        with self._lock:
            self._generation += 1
            for key in [k for k in self._parts if k[0] == tenant_id]:
                del self._parts[key]

    def clear(self) -> None:
        """Forget every partition (after an index rebuild)."""
        with self._lock:
            self._generation += 1
            self._parts.clear()


def partitions_for(vis: Visibility) -> tuple[Subject, Subject]:
    """The caller's own partition and the tenant's global one."""
    return Subject(vis.tenant_id, vis.user_id), Subject(vis.tenant_id, NO_USER)
