"""The SQLite store's lifecycle reads and lease (schema 0016).

Counted procedure outcomes for recall (``Store.outcomes``), and for consolidation
the scans of one subject and the per-subject lease (``Maintenance``). SQLite
admits one writer at a time, so the lease is taken and read back inside one
``BEGIN IMMEDIATE`` transaction: two consolidators never both hold it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.store.contract import Lease, OutcomeStats, SubjectScan
from engram.store.predicate import Subject, Tenant, Visibility
from engram.store.rows import from_micros, to_micros
from engram.store.sqlite import statements_lifecycle as sql
from engram.store.sqlite.maintenance import Admin
from engram.types import Record

__all__ = ["Lifecycle"]


class Lifecycle(Admin):
    """``outcomes``, ``subject_users``, ``subject_records`` and the lease on SQLite."""

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
