"""An LRU of in-memory partitions (vector or lexical), refreshed from counters.

Triggers keep per-(tenant, user) counters of inserts and deletes. A cached
partition whose delete count still matches is brought up to date by appending
the rows after its ``cursor``; any delete rebuilds it, since removing rows from
the middle of packed arrays costs as much as loading them again.
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
        self._lock = threading.Lock()

    def get(
        self,
        key: Key,
        counters: tuple[int, int],
        make: Callable[[], P],
        load: Callable[[int], Sequence[Any]],
        fits: Callable[[P], bool] = lambda part: True,
    ) -> P:
        """The partition, refreshed to match ``counters`` (inserts, deletes):
        ``load(after)`` returns the source rows after a cursor, in order."""
        with self._lock:
            part = self._parts.get(key)
            if part is None or part.deletes != counters[1] or not fits(part):
                part = make()
                part.append(load(0))
            elif part.inserts != counters[0]:
                part.append(load(part.cursor))
            part.inserts, part.deletes = counters
            self._parts[key] = part
            self._parts.move_to_end(key)
            self._evict()
            return part

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

    def drop_subject(self, tenant_id: str, user_id: str) -> None:
        """Forget a subject's partitions now (erasure must not leave them in memory)."""
        with self._lock:
            for key in [k for k in self._parts if k[0] == tenant_id and k[1] == user_id]:
                del self._parts[key]

    def clear(self) -> None:
        """Forget every partition (after a rollback or an index rebuild)."""
        with self._lock:
            self._parts.clear()


def partitions_for(vis: Visibility) -> tuple[Subject, Subject]:
    """The caller's own partition and the tenant's global one."""
    return Subject(vis.tenant_id, vis.user_id), Subject(vis.tenant_id, NO_USER)
