"""The SQLite store's lifecycle reads: generations, tombstones and the sweep's scans.

``generation`` and ``tombstoned`` are part of ``contract.Store`` (every process
checks the first before serving from memory; the write path asks the second);
the rest is ``contract.Maintenance``: tenant-wide reads by id for erasure and
the sweep, the sweep's two scans (what is past retention, what decay may
prune) and its per-tenant mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.store import tombstones
from engram.store.contract import PruneRule
from engram.store.predicate import Owners, Tenant
from engram.store.rows import due_cursor, from_micros, to_micros
from engram.store.sqlite import statements_lifecycle as life
from engram.store.sqlite.maintenance import Admin
from engram.types import Record

__all__ = ["Lifecycle"]


class Lifecycle(Admin):
    """Lifecycle reads on SQLite (see the module notes)."""

    def generation(self, tenant: Tenant) -> int:
        """The tenant's cache generation: how many deletions it has seen."""
        rows = self._rows(life.generation(tenant), plain=True)
        return int(rows[0][0]) if rows else 0

    def tombstoned(self, tenant: Tenant, owner: str, hashes: Sequence[str]) -> set[str]:
        """Which content ``hashes`` are tombstoned for ``owner`` (its rows, or an
        erased subject's of that user id)."""
        if not hashes:
            return set()
        rows = self._rows(life.tombstone_key(tenant), plain=True)
        if not rows:
            return set()  # the tenant never buried anything
        key = bytes(rows[0][0])
        by_digest = {tombstones.digest(key, owner, value): value for value in hashes}
        rows_of = Owners(tenant.tenant_id, (owner, tombstones.ERASED))
        query = life.tombstoned(rows_of, list(by_digest))
        found = self._rows(query, plain=True)
        return {by_digest[row[0]] for row in found}

    def tombstone_rows(self, tenant: Tenant, owners: Sequence[str]) -> int:
        """How many tombstones name any of ``owners`` (an erasure's check)."""
        query = life.tombstone_rows(Owners(tenant.tenant_id, tuple(owners)))
        return int(self._rows(query, plain=True)[0][0])

    def records_of(self, tenant: Tenant, ids: Sequence[str]) -> list[Record]:
        """The tenant's records among ``ids``, in that order (administrative)."""
        if not ids:
            return []
        by_id = {r.id: r for r in self._records(life.records_of(tenant, ids))}
        return [by_id[i] for i in ids if i in by_id]

    def tenants(self) -> list[str]:
        """Every tenant that has a record (the sweep of all tenants)."""
        return [str(row[0]) for row in self._rows((life.TENANTS, {}), plain=True)]

    def due(self, tenant: Tenant, at: datetime, after: Record | None, limit: int) -> list[Record]:
        """Chain heads past their retention at ``at``, in (expires_at, id) order after
        the record ``after`` (None: from the first)."""
        return self._records(life.due(tenant, to_micros(at) or 0, due_cursor(after), limit))

    def prunable(self, tenant: Tenant, rule: PruneRule, after: str, limit: int) -> list[Record]:
        """Chain heads decay pruning may consider (``PruneRule``), by id after ``after``."""
        return self._records(life.prunable(tenant, rule, after, limit))

    def mark_swept(self, tenant: Tenant, at: datetime) -> datetime | None:
        """Record a sweep of the tenant at ``at``; the previous mark (None: first).
        The mark never moves back, so a later sweep with an earlier clock sees it."""
        with self.transaction():
            rows = self._rows(life.swept_to(tenant), plain=True)
            self._run(*life.mark_swept(tenant, to_micros(at)))
        return from_micros(int(rows[0][0])) if rows else None
