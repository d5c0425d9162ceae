"""The SQLite store's administration (``contract.Maintenance``).

Audit chain, traces, erasure (what to delete, then evidence that it is gone:
rows, counters, in-memory copies and the bytes of the files) and the derived
indexes' rebuild. A request's hot path never calls any of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.store import erasure, traces
from engram.store.audit import AuditReport, verify_chain
from engram.store.predicate import Subject, Tenant, Visibility
from engram.store.pseudonyms import is_pseudonym, pseudonym
from engram.store.rows import record_from_values
from engram.store.sqlite import statements_admin as admin
from engram.store.sqlite import statements_write as sql
from engram.store.sqlite.connection import is_plain_file
from engram.store.sqlite.writes import Writes
from engram.store.traces import TraceRow
from engram.types import Record

__all__ = ["Admin"]

_VECTOR_MODEL_KEY = "vector_model"


class Admin(Writes):
    """``Maintenance`` on SQLite."""

    # -- audit ------------------------------------------------------------------

    def audit_name(self, subject: Subject) -> str | None:
        """How the audit log names ``subject`` now (None: never audited, or erased)."""
        key = self._audit_key(subject, create=False)
        return None if key is None else pseudonym(key, subject.tenant_id, subject.user_id)

    def forget_audit_subject(self, subject: Subject) -> int:
        """Delete the subject's pseudonym key: its audit entries become unlinkable."""
        return self._run(*admin.forget_audit_key(subject)).rowcount

    def verify_audit(self) -> AuditReport:
        """Recompute the whole audit chain."""
        return verify_chain(dict(row) for row in self._rows((admin.AUDIT_ALL, {})))

    def audit_entries(self, subject: Subject) -> list[dict[str, Any]]:
        """A subject's audit entries, oldest first: those under its pseudonym, and any
        written with its plain id before pseudonyms existed (migration 0015). A user id
        shaped like a pseudonym is never looked up plain: it could be another user's
        pseudonym (such a user's entries from before 0015 are not found)."""
        names = [] if is_pseudonym(subject.user_id) else [subject.user_id]
        if subject.user_id:
            name = self.audit_name(subject)
            names += [name] if name else []
        found: list[dict[str, Any]] = []
        for user in names:
            found += [dict(row) for row in self._rows(admin.audit_of(Subject(subject.tenant_id,
                                                                             user)))]  # fmt: skip
        return sorted(found, key=lambda row: int(row["seq"]))

    # -- traces -------------------------------------------------------------------

    def put_traces(self, rows: Sequence[TraceRow], keep: int) -> None:
        """Store traces; then keep only the newest ``keep`` of each tenant written to."""
        self._run_many(traces.insert(), [row.params() for row in rows])
        for text, params in traces.retention((row.tenant_id for row in rows), keep):
            self._run(text, params)

    def get_trace(self, vis: Visibility, trace_id: str) -> str | None:
        """The stored body of a trace recorded under exactly ``vis``."""
        rows = self._rows(traces.get(vis, trace_id))
        return str(rows[0][0]) if rows else None

    def delete_traces(self, subject: Subject) -> int:
        """Delete a subject's stored recall traces."""
        return self._run(*admin.subject_traces(subject)).rowcount

    def delete_traces_naming(self, tenant: Tenant, ids: Sequence[str]) -> int:
        """Delete the tenant's stored traces that name any of ``ids``."""
        return self._run(*traces.delete_naming(tenant, ids)).rowcount if ids else 0

    # -- erasure ------------------------------------------------------------------

    def subject_ids(self, subject: Subject) -> list[str]:
        """Ids of every record of one subject."""
        return [row[0] for row in self._rows(admin.subject_ids(subject))]

    def derived_ids(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of tenant records derived from any of ``ids``."""
        return [row[0] for row in self._rows(admin.derived_from(tenant, ids))] if ids else []

    def successors(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of the tenant's records that supersede any of ``ids``."""
        return [row[0] for row in self._rows(admin.successors(tenant, ids))] if ids else []

    def erasure_strings(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """The texts of the tenant's records among ``ids`` (content, key, stored
        value, source reference), read before they are erased, to scan for after."""
        if not ids:
            return []
        rows = self._rows(admin.erasure_strings(tenant, ids), plain=True)
        return [value for row in rows for value in row if value]

    def residue(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, int]:
        """Rows still naming any of ``ids``, by check name (0 everywhere after an
        erasure): the records, their vectors, traces naming them, records derived
        from or superseding them."""
        counts = {name: int(self._rows(query)[0][0])
                  for name, query in admin.residue(tenant, ids).items()}  # fmt: skip
        later = self.derived_ids(tenant, ids) + self.successors(tenant, ids)
        counts["derived rows"] = len(later)
        return counts

    def subject_residue(self, subject: Subject) -> int:
        """Rows (records, vectors, traces, outcome statistics, consolidation marks and
        runs) a subject still has: 0 after an erasure."""
        return sum(int(self._rows(query)[0][0]) for query in admin.subject_counts(subject))

    def forget_counters(self, subject: Subject) -> None:
        """Delete the subject's rows of the counter tables and its consolidation run
        row (inside the erasure's transaction). A cached partition is fresh while its
        counters match, so the tenant's caches are dropped at COMMIT, still under the
        store lock: none stamped with the old counters survives to match new ones."""
        for query in admin.forget_counters(subject):
            self._run(*query)
        self._after_commit.append(partial(self.forget_partition, subject))

    def counter_rows(self, subject: Subject) -> int:
        """The subject's rows in the counter tables."""
        return sum(len(self._rows(query)) for query in admin.partition_counters(subject))

    def forget_partition(self, subject: Subject) -> None:
        """Drop from memory, now, everything a forget or an erasure must not leave
        behind: the in-memory vectors, postings and term counts of the subject's
        tenant (derived copies of its records may sit in any partition of the
        tenant; they reload on the next search) and the process-wide stem cache."""
        self._vector_engine.forget(subject.tenant_id)
        self._lexical_engine.forget(subject.tenant_id)

    def holds_cached(self, tenant_id: str) -> bool:
        """Whether an in-memory vector or lexical partition of the tenant is held."""
        return self._vector_engine.holds(tenant_id) or self._lexical_engine.holds(tenant_id)

    def scrub(self, strings: Sequence[str]) -> erasure.Scrub:
        """After an erasure commits: empty the WAL and scan the database, WAL and
        shared-memory files for ``strings`` (``store.erasure``). A store without a
        file checks nothing here."""
        wanted = erasure.windows(strings)
        if not is_plain_file(self.path):
            return erasure.Scrub((), (), wanted.strings, wanted.short)

        def still_held(text: str) -> bool:
            return bool(self._rows(admin.holding(text)))

        return erasure.scrub(self._conn, self._lock, self.path, still_held, wanted)

    # -- derived index maintenance ----------------------------------------------

    def rebuild_lexical(self) -> None:
        """Forget the in-memory postings: they reload from the records table on the
        next search."""
        self._lexical_engine.clear()

    def iter_all(self, batch: int) -> Iterator[list[Record]]:
        """Every record of the store in rowid order, in batches (index rebuild only)."""
        last = 0
        while True:
            rows = self._rows(admin.iter_all(last, batch))
            if not rows:
                return
            last = rows[-1]["rid"]
            yield [record_from_values(row) for row in rows]

    def reset_vectors(self) -> None:
        """Delete every vector and forget the vectors' model (before a rebuild)."""
        self._run(admin.DELETE_VECTORS)
        self._run(admin.META_DELETE, {"key": _VECTOR_MODEL_KEY})
        self._vector_engine.clear()

    def put_vectors(self, records: Sequence[Record], vectors: NDArray[np.float32]) -> None:
        """Store vectors for existing records (index rebuild)."""
        for record, vector in zip(records, vectors, strict=True):
            self._write_fields(sql.UPDATE, sql.MUTABLE, record)
            self._put_vector(record, vector)
