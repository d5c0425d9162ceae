"""The storage contract every backend implements (SQLite now, PostgreSQL later).

It is deliberately narrow: scoped reads that take a predicate value, the four
candidate queries recall uses, write-slot lookups, row writes, the audit chain
and derived-index maintenance. Everything else (policy, decisions, ranking) is
written once above it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from engram.store.audit import AuditEntry, AuditReport
from engram.store.erasure import Scrub
from engram.store.predicate import OwnerSlot, Subject, Tenant, Visibility
from engram.store.traces import TraceRow
from engram.types import Record

__all__ = ["Store"]


class Store(Protocol):
    """A system of record with lexical and vector indexes derived from it."""

    tracer: Callable[[str, Mapping[str, Any]], None] | None

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """An atomic unit of work; nested calls become savepoints."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...

    # scoped reads
    def get(self, vis: Visibility, record_id: str) -> Record | None:
        """One visible record."""
        ...

    def fetch(self, vis: Visibility, ids: Sequence[str]) -> list[Record]:
        """Visible records among ``ids`` in that order."""
        ...

    def listing(
        self, vis: Visibility, type_name: str | None, statuses: Sequence[str], limit: int,
        offset: int = 0, now_us: int | None = None,
    ) -> list[Record]:  # fmt: skip
        """Visible records, newest first (statuses as of ``now_us`` when given)."""
        ...

    def history(self, vis: Visibility, record_id: str) -> list[Record]:
        """The visible version chain, oldest first."""
        ...

    def export(self, vis: Visibility) -> list[Record]:
        """Every visible record in every status."""
        ...

    # candidate queries
    def by_key(
        self, vis: Visibility, keys: Sequence[str], statuses: Sequence[str], limit: int
    ) -> list[Record]:
        """Exact key lookup."""
        ...

    def lexical(
        self, vis: Visibility, text: str, statuses: Sequence[str], limit: int
    ) -> list[tuple[str, float]]:
        """BM25 top-k as (id, score), higher is better."""
        ...

    def lexical_scan(
        self, vis: Visibility, text: str, statuses: Sequence[str], limit: int
    ) -> object:
        """The bulk of a lexical query, which another thread may run, for
        ``lexical_hits(..., scan=)`` to finish."""
        ...

    def lexical_hits(
        self, vis: Visibility, text: str, statuses: Sequence[str], limit: int,
        scan: object | None = None, known: Mapping[str, Record] | None = None,
    ) -> list[tuple[Record, float]]:  # fmt: skip
        """``lexical`` as records; ``known`` records (read by this request under the
        same visibility) are not read again."""
        ...

    def vector(
        self, vis: Visibility, query: NDArray[np.float32], model: str,
        statuses: Sequence[str], limit: int, scan: object | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """Exact cosine top-k as (id, score); ranks ``scan`` when one is given."""
        ...

    def vector_scan(self, vis: Visibility, query: NDArray[np.float32], model: str) -> object:
        """The bulk of a vector query, which another thread may run: the scores of
        every visible row, for ``vector_hits(..., scan=)`` to rank. A backend that
        ranks inside its database returns something cheap and does the work later."""
        ...

    def vector_hits(
        self, vis: Visibility, query: NDArray[np.float32], model: str,
        statuses: Sequence[str], limit: int, scan: object | None = None,
        known: Mapping[str, Record] | None = None,
    ) -> list[tuple[Record, float]]:  # fmt: skip
        """``vector`` as records, like ``lexical_hits``."""
        ...

    def recent(
        self, vis: Visibility, statuses: Sequence[str], limit: int,
        types: Sequence[str] | None = None,
    ) -> list[Record]:  # fmt: skip
        """Most recently observed visible records."""
        ...

    def keyed(
        self, vis: Visibility, types: Sequence[str], statuses: Sequence[str], limit: int
    ) -> list[Record]:
        """Keyed records of some types, newest observed first."""
        ...

    def vectors_of(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]]:
        """Stored vectors of visible records."""
        ...

    def neighbors(
        self, vis: Visibility, anchors: Sequence[Record], types: Sequence[str],
        statuses: Sequence[str], gap_us: int, per_side: int,
    ) -> list[Record]:  # fmt: skip
        """Records observed just before and after each anchor in its scope."""
        ...

    # writes
    def slot_by_key(self, slot: OwnerSlot, key: str, statuses: Sequence[str]) -> list[Record]:
        """Versions of a key in one write slot."""
        ...

    def slot_by_hash(
        self, slot: OwnerSlot, content_hash: str, statuses: Sequence[str]
    ) -> list[Record]:
        """Same-content records in one write slot."""
        ...

    def insert(self, record: Record, vector: NDArray[np.float32] | None) -> None:
        """Insert a record (and its vector)."""
        ...

    def update(self, record: Record) -> None:
        """Write a record's mutable fields."""
        ...

    def place(self, record: Record) -> None:
        """Write a record's version, supersedes, created_at, expires_at and source."""
        ...

    def delete(self, ids: Sequence[str]) -> int:
        """Hard-delete records with their index entries."""
        ...

    def unlink_contests(self, tenant: Tenant, ids: Sequence[str], now_us: int) -> int:
        """Clear the contest links of the tenant's other records naming ``ids``."""
        ...

    def subject_ids(self, subject: Subject) -> list[str]:
        """Every record id of one subject."""
        ...

    def derived_ids(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of tenant records derived from any of ``ids``."""
        ...

    def erasure_strings(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Content, key, stored value and source reference of records among ``ids``."""
        ...

    def successors(self, tenant: Tenant, ids: Sequence[str]) -> list[str]:
        """Ids of tenant records that supersede any of ``ids``."""
        ...

    def residue(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, int]:
        """Rows still naming any of ``ids``, by check name."""
        ...

    def forget_counters(self, subject: Subject) -> None:
        """Delete a subject's change counters (inside the erasure's transaction)."""
        ...

    def counter_rows(self, subject: Subject) -> int:
        """A subject's rows in the change counters."""
        ...

    def holds_cached(self, tenant_id: str) -> bool:
        """Whether in-memory index partitions of the tenant are held."""
        ...

    def scrub(self, strings: Sequence[str]) -> Scrub:
        """After an erasure: make the deletion physical and scan for ``strings``."""
        ...

    def subject_residue(self, subject: Subject) -> int:
        """Rows a subject still has anywhere."""
        ...

    def delete_traces(self, subject: Subject) -> int:
        """Delete a subject's traces."""
        ...

    def forget_partition(self, subject: Subject) -> None:
        """Drop in-memory copies of a subject's vectors."""
        ...

    def touch(self, touches: Sequence[tuple[Visibility, Sequence[str], int]]) -> None:
        """Count one access of each visible record in each ``(vis, ids, now_us)``."""
        ...

    def put_traces(self, rows: Sequence[TraceRow], keep: int) -> None:
        """Store traces, keeping the newest ``keep`` of each tenant."""
        ...

    def get_trace(self, vis: Visibility, trace_id: str) -> str | None:
        """A stored trace body, if recorded under exactly ``vis``."""
        ...

    def delete_traces_naming(self, tenant: Tenant, ids: Sequence[str]) -> int:
        """Delete a tenant's traces that name any of ``ids``."""
        ...

    # vectors, meta, audit, rebuild
    def vector_model(self) -> str | None:
        """Model of the stored vectors."""
        ...

    def check_vector_model(self, model: str) -> None:
        """Raise IndexMismatch for another model."""
        ...

    def meta_get(self, key: str) -> str | None:
        """Read a meta value."""
        ...

    def meta_set(self, key: str, value: str) -> None:
        """Write a meta value."""
        ...

    def audit_name(self, subject: Subject) -> str | None:
        """The pseudonym naming ``subject`` in the audit log, if it has one."""
        ...

    def forget_audit_subject(self, subject: Subject) -> int:
        """Delete the subject's pseudonym key (its audit entries become unlinkable)."""
        ...

    def append_audit(self, entry: AuditEntry) -> str:
        """Chain and append an audit entry."""
        ...

    def verify_audit(self) -> AuditReport:
        """Check the whole chain."""
        ...

    def audit_entries(self, subject: Subject) -> list[dict[str, Any]]:
        """A subject's audit entries."""
        ...

    def rebuild_lexical(self) -> None:
        """Regenerate the lexical index."""
        ...

    def iter_all(self, batch: int) -> Iterator[list[Record]]:
        """Every record in batches."""
        ...

    def reset_vectors(self) -> None:
        """Drop every vector."""
        ...

    def put_vectors(self, records: Sequence[Record], vectors: NDArray[np.float32]) -> None:
        """Store vectors for existing records."""
        ...
