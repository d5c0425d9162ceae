"""The PostgreSQL store's lifecycle: generations, tombstones and the sweep's scans.

The twin of ``store.sqlite.lifecycle`` (see there). Every read takes the tenant's
writer lock first when it runs inside a transaction (``Session.writing``), so
what a deletion, a sweep batch or a usage flush decides on is current: the
generation a flush compares, the tombstones a write checks, the records a sweep
batch re-reads.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime

from engram.store import tombstones
from engram.store.contract import (
    AddTombstones,
    AnonymiseTombstones,
    Applied,
    DropTombstones,
    PruneRule,
)
from engram.store.postgres import lifecycle_sql as life
from engram.store.postgres.admin import Admin
from engram.store.postgres.session import Conn, on
from engram.store.predicate import Owners, Tenant
from engram.store.rows import due_cursor, from_micros, record_from_values, to_micros
from engram.types import Record

__all__ = ["Lifecycle"]

TombstoneChange = AddTombstones | DropTombstones | AnonymiseTombstones


class Lifecycle(Admin):
    """Lifecycle reads and tombstone changes on PostgreSQL."""

    def generation(self, tenant: Tenant) -> int:
        """The tenant's cache generation: how many deletions it has seen."""
        self.writing(tenant.tenant_id)
        rows = self.rows(life.generation(tenant), "reading a cache generation")
        return int(rows[0][0]) if rows else 0

    def tombstoned(self, tenant: Tenant, owner: str, hashes: Sequence[str]) -> set[str]:
        """Which content ``hashes`` are tombstoned for ``owner`` (its rows, or an
        erased subject's of that user id)."""
        if not hashes:
            return set()
        self.writing(tenant.tenant_id)
        with self.connection("reading tombstones") as conn:
            key = _key(conn, tenant)
            if key is None:
                return set()  # the tenant never buried anything
            by_digest = {tombstones.digest(key, owner, value): value for value in hashes}
            rows_of = Owners(tenant.tenant_id, (owner, tombstones.ERASED))
            found = on(conn, life.tombstoned(rows_of, list(by_digest)))
        return {by_digest[str(row[0])] for row in found}

    def tombstone_rows(self, tenant: Tenant, owners: Sequence[str]) -> int:
        """How many tombstones name any of ``owners`` (an erasure's check)."""
        query = life.tombstone_rows(Owners(tenant.tenant_id, tuple(owners)))
        return int(self.rows(query, "counting tombstones")[0][0])

    def records_of(self, tenant: Tenant, ids: Sequence[str]) -> list[Record]:
        """The tenant's records among ``ids``, in that order (administrative)."""
        if not ids:
            return []
        self.writing(tenant.tenant_id)
        found = self.rows(life.records_of(tenant, ids), "reading records by id")
        by_id = {r.id: r for r in map(record_from_values, found)}
        return [by_id[i] for i in ids if i in by_id]

    def tenants(self) -> list[str]:
        """Every tenant that has a record (the sweep of all tenants)."""
        return [str(row[0]) for row in self.rows((life.TENANTS, {}), "listing tenants")]

    def due(self, tenant: Tenant, at: datetime, after: Record | None, limit: int) -> list[Record]:
        """Chain heads past their retention at ``at``, in (expires_at, id) order after
        the record ``after`` (None: from the first)."""
        self.writing(tenant.tenant_id)
        query = life.due(tenant, to_micros(at) or 0, due_cursor(after), limit)
        found = self.rows(query, "finding due records")
        return [record_from_values(row) for row in found]

    def prunable(self, tenant: Tenant, rule: PruneRule, after: str, limit: int) -> list[Record]:
        """Chain heads decay pruning may consider (``PruneRule``), by id after ``after``."""
        self.writing(tenant.tenant_id)
        found = self.rows(life.prunable(tenant, rule, after, limit), "finding prunable records")
        return [record_from_values(row) for row in found]

    def mark_swept(self, tenant: Tenant, at: datetime) -> datetime | None:
        """Record a sweep of the tenant at ``at``; the previous mark (None: first)."""
        with self.transaction(), self.connection("marking a sweep") as conn:
            self.writing(tenant.tenant_id)
            rows = on(conn, life.swept_to(tenant))
            conn.execute(*life.mark_swept(tenant, to_micros(at)))
        return from_micros(int(rows[0][0])) if rows else None

    def apply_tombstones(self, conn: Conn, change: TombstoneChange, applied: Applied) -> None:
        """One tombstone change on ``conn`` (inside ``apply``'s transaction)."""
        if isinstance(change, AnonymiseTombstones):
            for query in life.anonymise_tombstones(change.subject):
                conn.execute(*query)
            return
        create = isinstance(change, AddTombstones)
        if create:
            key = secrets.token_bytes(tombstones.KEY_BYTES)
            conn.execute(*life.new_tombstone_key(change.tenant, key))
        key_found = _key(conn, change.tenant)
        if key_found is None or not change.hashes:
            return
        digests = [tombstones.digest(key_found, change.owner, h)
                   for h in dict.fromkeys(change.hashes)]  # fmt: skip
        if isinstance(change, AddTombstones):
            row_owner = tombstones.ERASED if change.erased else change.owner
            query = life.add_tombstones(change.tenant, row_owner, digests, to_micros(change.at))
            applied.buried += conn.execute(*query).rowcount
        else:
            rows_of = Owners(change.tenant.tenant_id, (change.owner, tombstones.ERASED))
            applied.lifted += conn.execute(*life.drop_tombstones(rows_of, digests)).rowcount


def _key(conn: Conn, tenant: Tenant) -> bytes | None:
    rows = on(conn, life.tombstone_key(tenant))
    return bytes(rows[0][0]) if rows else None
