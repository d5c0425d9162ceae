"""The PostgreSQL store's lifecycle reads and lease (migration 0007).

Counted procedure outcomes for recall (``Store.outcomes``), and for consolidation
the scans of one subject and the per-subject lease (``Maintenance``). The lease
is an upsert on the subject's ``consolidation_runs`` row in a transaction that
holds the tenant's writer lock (``Session.writing``), read back in the same
transaction: of two consolidators of one user only one holds it, and a crashed
one's lease runs out (``ConsolidationConfig.lease_seconds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.store.contract import Lease, OutcomeStats, SubjectScan
from engram.store.postgres import lifecycle_sql as sql
from engram.store.postgres.admin import Admin
from engram.store.predicate import Subject, Tenant, Visibility
from engram.store.rows import from_micros, record_from_values, to_micros
from engram.types import Record

__all__ = ["Lifecycle"]


class Lifecycle(Admin):
    """``outcomes``, ``subject_users``, ``subject_records`` and the lease on PostgreSQL."""

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
