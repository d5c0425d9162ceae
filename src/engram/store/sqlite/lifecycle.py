"""The SQLite store's lifecycle reads: generations, tombstones, the sweep's scans,
outcomes and the consolidation lease.

``generation``, ``tombstoned`` and ``outcomes`` are part of ``contract.Store``
(every process checks the first before serving from memory; the write path asks
the second; recall ranks procedures by the third); the rest is
``contract.Maintenance``: tenant-wide reads by id for erasure and the sweep, the
sweep's two scans (what is past retention, what decay may prune) and its
per-tenant mark (schema 0019-0021), and for consolidation the scans of one
subject and the per-subject lease (schema 0017). SQLite admits one writer at a
time, so the lease is taken and read back inside one ``BEGIN IMMEDIATE``
transaction: two consolidators never both hold it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.store import tombstones
from engram.store.contract import Lease, OutcomeStats, PruneRule, SubjectScan
from engram.store.predicate import Owners, Subject, Tenant, Visibility
from engram.store.rows import due_cursor, from_micros, to_micros
from engram.store.sqlite import statements_lifecycle as sql
from engram.store.sqlite.maintenance import Admin
from engram.types import Record

__all__ = ["Lifecycle"]


class Lifecycle(Admin):
    """Lifecycle reads and the consolidation lease on SQLite (see the module notes)."""

    def generation(self, tenant: Tenant) -> int:
        """The tenant's cache generation: how many deletions it has seen."""
        rows = self._rows(sql.generation(tenant), plain=True)
        return int(rows[0][0]) if rows else 0

    def tombstoned(self, tenant: Tenant, owner: str, hashes: Sequence[str]) -> set[str]:
        """Which content ``hashes`` are tombstoned for ``owner`` (its rows, or an
        erased subject's of that user id)."""
        if not hashes:
            return set()
        rows = self._rows(sql.tombstone_key(tenant), plain=True)
        if not rows:
            return set()  # the tenant never buried anything
        key = bytes(rows[0][0])
        by_digest = {tombstones.digest(key, owner, value): value for value in hashes}
        rows_of = Owners(tenant.tenant_id, (owner, tombstones.ERASED))
        query = sql.tombstoned(rows_of, list(by_digest))
        found = self._rows(query, plain=True)
        return {by_digest[row[0]] for row in found}

    def tombstone_rows(self, tenant: Tenant, owners: Sequence[str]) -> int:
        """How many tombstones name any of ``owners`` (an erasure's check)."""
        query = sql.tombstone_rows(Owners(tenant.tenant_id, tuple(owners)))
        return int(self._rows(query, plain=True)[0][0])

    def records_of(self, tenant: Tenant, ids: Sequence[str]) -> list[Record]:
        """The tenant's records among ``ids``, in that order (administrative)."""
        if not ids:
            return []
        by_id = {r.id: r for r in self._records(sql.records_of(tenant, ids))}
        return [by_id[i] for i in ids if i in by_id]

    def tenants(self) -> list[str]:
        """Every tenant that has a record (the sweep of all tenants)."""
        return [str(row[0]) for row in self._rows((sql.TENANTS, {}), plain=True)]

    def due(self, tenant: Tenant, at: datetime, after: Record | None, limit: int) -> list[Record]:
        """Chain heads past their retention at ``at``, in (expires_at, id) order after
        the record ``after`` (None: from the first)."""
        return self._records(sql.due(tenant, to_micros(at) or 0, due_cursor(after), limit))

    def prunable(self, tenant: Tenant, rule: PruneRule, after: str, limit: int) -> list[Record]:
        """Chain heads decay pruning may consider (``PruneRule``), by id after ``after``."""
        return self._records(sql.prunable(tenant, rule, after, limit))

    def mark_swept(self, tenant: Tenant, at: datetime) -> datetime | None:
        """Record a sweep of the tenant at ``at``; the previous mark (None: first).
        The mark never moves back, so a later sweep with an earlier clock sees it."""
        with self.transaction():
            rows = self._rows(sql.swept_to(tenant), plain=True)
            self._run(*sql.mark_swept(tenant, to_micros(at)))
        return from_micros(int(rows[0][0])) if rows else None

    def outcomes(self, vis: Visibility, ids: Sequence[str]) -> dict[str, OutcomeStats]:
        """Counted outcomes of the visible records among ``ids`` (those with any)."""
        if not ids:
            return {}
        rows = self._rows(sql.outcomes(vis, ids), plain=True)
        return {str(r[0]): OutcomeStats(int(r[1]), int(r[2]), float(r[3]), int(r[4]))
                for r in rows}  # fmt: skip

    def subject_users(self, tenant: Tenant) -> list[str]:
        """The users of ``tenant`` that own records, in order (not its global records)."""
        return [str(row[0]) for row in self._rows(sql.subject_users(tenant), plain=True) if row[0]]

    def subject_records(self, subject: Subject, scan: SubjectScan) -> list[Record]:
        """One page of the subject's records, oldest observed first."""
        after = None if scan.after is None else (to_micros(scan.after[0]) or 0, scan.after[1])
        query = sql.subject_records(subject, scan.types, scan.statuses,
                                    to_micros(scan.before) or 0, to_micros(scan.at) or 0,
                                    scan.limit, after, scan.unconsolidated)  # fmt: skip
        return self._records(query)

    def take_lease(
        self, subject: Subject, holder: str, wall_now: datetime, until: datetime
    ) -> Lease:
        """Take or renew the subject's consolidation lease for ``holder`` until ``until``
        (wall-clock time), unless another holder's lease runs past ``wall_now``."""
        with self.transaction():
            self._run(*sql.take_lease(subject, holder, to_micros(wall_now) or 0,
                                      to_micros(until) or 0))  # fmt: skip
            row = self._rows(sql.lease_row(subject), plain=True)[0]
        return Lease(row[0] == holder, from_micros(row[1]))

    def end_lease(self, subject: Subject, holder: str, last_run: datetime | None) -> None:
        """Release ``holder``'s lease, recording ``last_run`` as the last finished run."""
        self._run(*sql.end_lease(subject, holder, to_micros(last_run)))
