"""The PostgreSQL store's lifecycle: generations, tombstones, the sweep's scans,
outcomes and the consolidation lease.

The twin of ``store.sqlite.lifecycle`` (see there). Every read takes the tenant's
writer lock first when it runs inside a transaction (``Session.writing``), so
what a deletion, a sweep batch or a usage flush decides on is current: the
generation a flush compares, the tombstones a write checks, the records a sweep
batch re-reads (migrations 0010-0012). Counted procedure outcomes serve recall
(``Store.outcomes``); consolidation has the scans of one subject and the
per-subject lease (migration 0008): an upsert on the subject's
``consolidation_runs`` row in a transaction that holds the tenant's writer lock,
read back in the same transaction: of two consolidators of one user only one
holds it, and a crashed one's lease runs out (``ConsolidationConfig.lease_seconds``).
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
    Lease,
    OutcomeStats,
    PruneRule,
    SubjectScan,
)
from engram.store.postgres import lifecycle_sql as sql
from engram.store.postgres.admin import Admin
from engram.store.postgres.session import Conn, on
from engram.store.predicate import Owners, Subject, Tenant, Visibility
from engram.store.rows import due_cursor, from_micros, record_from_values, to_micros
from engram.types import Record

__all__ = ["Lifecycle"]

TombstoneChange = AddTombstones | DropTombstones | AnonymiseTombstones


class Lifecycle(Admin):
    """Lifecycle reads, tombstone changes and the consolidation lease on PostgreSQL."""

    def generation(self, tenant: Tenant) -> int:
        """The tenant's cache generation: how many deletions it has seen."""
        self.writing(tenant.tenant_id)
        rows = self.rows(sql.generation(tenant), "reading a cache generation")
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
            found = on(conn, sql.tombstoned(rows_of, list(by_digest)))
        return {by_digest[str(row[0])] for row in found}

    def tombstone_rows(self, tenant: Tenant, owners: Sequence[str]) -> int:
        """How many tombstones name any of ``owners`` (an erasure's check)."""
        query = sql.tombstone_rows(Owners(tenant.tenant_id, tuple(owners)))
        return int(self.rows(query, "counting tombstones")[0][0])

    def records_of(self, tenant: Tenant, ids: Sequence[str]) -> list[Record]:
        """The tenant's records among ``ids``, in that order (administrative)."""
        if not ids:
            return []
        self.writing(tenant.tenant_id)
        found = self.rows(sql.records_of(tenant, ids), "reading records by id")
        by_id = {r.id: r for r in map(record_from_values, found)}
        return [by_id[i] for i in ids if i in by_id]

    def tenants(self) -> list[str]:
        """Every tenant that has a record (the sweep of all tenants)."""
        return [str(row[0]) for row in self.rows((sql.TENANTS, {}), "listing tenants")]

    def due(self, tenant: Tenant, at: datetime, after: Record | None, limit: int) -> list[Record]:
        """Chain heads past their retention at ``at``, in (expires_at, id) order after
        the record ``after`` (None: from the first)."""
        self.writing(tenant.tenant_id)
        query = sql.due(tenant, to_micros(at) or 0, due_cursor(after), limit)
        found = self.rows(query, "finding due records")
        return [record_from_values(row) for row in found]

    def prunable(self, tenant: Tenant, rule: PruneRule, after: str, limit: int) -> list[Record]:
        """Chain heads decay pruning may consider (``PruneRule``), by id after ``after``."""
        self.writing(tenant.tenant_id)
        found = self.rows(sql.prunable(tenant, rule, after, limit), "finding prunable records")
        return [record_from_values(row) for row in found]

    def mark_swept(self, tenant: Tenant, at: datetime) -> datetime | None:
        """Record a sweep of the tenant at ``at``; the previous mark (None: first)."""
        with self.transaction(), self.connection("marking a sweep") as conn:
            self.writing(tenant.tenant_id)
            rows = on(conn, sql.swept_to(tenant))
            conn.execute(*sql.mark_swept(tenant, to_micros(at)))
        return from_micros(int(rows[0][0])) if rows else None

    def apply_tombstones(self, conn: Conn, change: TombstoneChange, applied: Applied) -> None:
        """One tombstone change on ``conn`` (inside ``apply``'s transaction)."""
        if isinstance(change, AnonymiseTombstones):
            for query in sql.anonymise_tombstones(change.subject):
                conn.execute(*query)
            return
        create = isinstance(change, AddTombstones)
        if create:
            key = secrets.token_bytes(tombstones.KEY_BYTES)
            conn.execute(*sql.new_tombstone_key(change.tenant, key))
        key_found = _key(conn, change.tenant)
        if key_found is None or not change.hashes:
            return
        digests = [tombstones.digest(key_found, change.owner, h)
                   for h in dict.fromkeys(change.hashes)]  # fmt: skip
        if isinstance(change, AddTombstones):
            row_owner = tombstones.ERASED if change.erased else change.owner
            query = sql.add_tombstones(change.tenant, row_owner, digests, to_micros(change.at))
            applied.buried += conn.execute(*query).rowcount
        else:
            rows_of = Owners(change.tenant.tenant_id, (change.owner, tombstones.ERASED))
            applied.lifted += conn.execute(*sql.drop_tombstones(rows_of, digests)).rowcount

    def outcomes(self, vis: Visibility, ids: Sequence[str]) -> dict[str, OutcomeStats]:
        """Counted outcomes of the visible records among ``ids`` (those with any)."""
        if not ids:
            return {}
        self.writing(vis.tenant_id)
        rows = self.rows(sql.outcomes(vis, ids), "reading procedure outcomes")
        return {str(r[0]): OutcomeStats(int(r[1]), int(r[2]), float(r[3]), int(r[4]))
                for r in rows}  # fmt: skip

    def subject_users(self, tenant: Tenant) -> list[str]:
        """The users of ``tenant`` that own records, in order (not its global records)."""
        self.writing(tenant.tenant_id)
        found = self.rows(sql.subject_users(tenant), "listing users")
        return [str(row[0]) for row in found if row[0]]

    def subject_records(self, subject: Subject, scan: SubjectScan) -> list[Record]:
        """One page of the subject's records, oldest observed first."""
        self.writing(subject.tenant_id)
        after = None if scan.after is None else (to_micros(scan.after[0]) or 0, scan.after[1])
        query = sql.subject_records(subject, scan.types, scan.statuses,
                                    to_micros(scan.before) or 0, to_micros(scan.at) or 0,
                                    scan.limit, after, scan.unconsolidated)  # fmt: skip
        return [record_from_values(row) for row in self.rows(query, "scanning a subject")]

    def take_lease(
        self, subject: Subject, holder: str, wall_now: datetime, until: datetime
    ) -> Lease:
        """Take or renew the subject's consolidation lease for ``holder`` until ``until``
        (wall-clock time), unless another holder's lease runs past ``wall_now``."""
        with self.transaction():
            self.writing(subject.tenant_id)
            self.run(sql.take_lease(subject, holder, to_micros(wall_now) or 0,
                                    to_micros(until) or 0), "taking a lease")  # fmt: skip
            row = self.rows(sql.lease_row(subject), "reading a lease")[0]
        return Lease(row[0] == holder, from_micros(row[1]))

    def end_lease(self, subject: Subject, holder: str, last_run: datetime | None) -> None:
        """Release ``holder``'s lease, recording ``last_run`` as the last finished run."""
        with self.transaction():
            self.writing(subject.tenant_id)
            self.run(sql.end_lease(subject, holder, to_micros(last_run)), "ending a lease")


def _key(conn: Conn, tenant: Tenant) -> bytes | None:
    rows = on(conn, sql.tombstone_key(tenant))
    return bytes(rows[0][0]) if rows else None
