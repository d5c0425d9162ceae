"""What this process holds in memory of a tenant, and when it must let go of it.

Every process serving a store keeps copies derived from its records: the SQLite
store's vector and lexical partitions, the rerank and embedder text caches, the
usage queue's traces. A deletion in ANY process (``forget``, ``erase_subject``,
the sweep) bumps the tenant's cache generation in the same transaction
(``contract.Delete``, ``Store.generation``). ``CacheGuard.check`` reads it (one
primary-key read) before a recall or a trace read serves anything, and when it
moved since this process last looked, ``drop`` lets go of the tenant's copies
first. A deletion in this process calls ``invalidate`` after its commit.

What stays true with two processes A and B on one store: after an erasure in A
commits, B's next recall drops what it held of the tenant before it reads
(records come from storage, which no longer has them), B's queued usage from
before the erasure is dropped rather than written (``UsageRecorder`` compares
the generation again inside the flush's transaction), and B's cached partitions
cannot be mistaken for current ones when the erased user's counters start again
from zero. A recall B had already started when A committed reads storage too:
it cannot return an erased record, but it may refill the text caches, which its
next check empties.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from engram.errors import StoreError
from engram.store.contract import Store
from engram.store.predicate import Tenant

__all__ = ["CacheGuard"]

_MAX_TENANTS = 65_536  # tenants remembered; the longest unseen is dropped past it


class CacheGuard:
    """This process's last seen cache generation of each tenant it served."""

    def __init__(self, store: Store, drop: Callable[[str, int], None]) -> None:
        """``drop(tenant_id, generation)`` lets go of the tenant's copies;
        ``generation`` is the one now current."""
        self._store = store
        self._drop = drop
        self._seen: dict[str, int] = {}  # least recently checked first
        self._lock = threading.Lock()

    def check(self, tenant_id: str) -> int | None:
        """The tenant's generation now, after dropping its copies if it moved since
        this process last looked (a tenant seen for the first time has none here:
        whatever serves it checks first). Past ``_MAX_TENANTS`` the tenant checked
        least recently is forgotten, and its copies dropped with it. None when the
        store cannot answer: the read that follows fails its channels as it would
        have (``unavailable``), and the next check that succeeds drops what moved."""
        try:
            current = self._store.generation(Tenant(tenant_id))
        except StoreError:
            return None
        with self._lock:
            seen = self._seen.pop(tenant_id, None)
            self._seen[tenant_id] = current
            evicted = None
            if len(self._seen) > _MAX_TENANTS:
                evicted = next(iter(self._seen))
                last = self._seen.pop(evicted)
        if evicted is not None:
            self._drop(evicted, last)
        if seen is not None and seen != current:
            self._drop(tenant_id, current)
        return current

    def invalidate(self, tenant_id: str) -> None:
        """After a deletion committed here: read the generation, drop the tenant's
        copies, then remember it (a deletion elsewhere after the read is newer)."""
        current = self._store.generation(Tenant(tenant_id))
        self._drop(tenant_id, current)
        with self._lock:
            self._seen.pop(tenant_id, None)
            self._seen[tenant_id] = current
