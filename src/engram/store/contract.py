"""The storage contract: what recall, the write path and the lifecycle need of a store.

Two protocols, written once for every backend (SQLite, PostgreSQL):

* ``Store``: the narrow core every request uses. Scoped reads by ids, candidates
  for a batch of probe values, a version chain, a listing, a batch of change
  values applied atomically, a per-slot write lock, and the transaction; and,
  for sharing between agents, the tenant's share grants and the share copies
  of given records or of a grant (``CopiesOf``, ``CopiesTo``).
* ``Maintenance``: what administration needs (vector model, meta, audit chain,
  traces, erasure evidence, index rebuilds, and the lifecycle's scans, sweeps and
  lease). A request's hot path never calls it.

Two signals every process serving one store shares: ``Store.generation`` (a
tenant's count of deletions, bumped by every ``Delete`` in its transaction; a
process holding in-memory copies of the tenant drops them when it changes) and
``Store.tombstoned`` (keyed digests of erased contents, ``store.tombstones``).

Every read takes a predicate value from ``engram.store.predicate`` and the store
renders it inside the query (``Visibility.sql(alias, dialect)``), so scoping is a
constraint of the storage query on every backend, not a filter after it.

Values crossing this boundary are domain values: ``Record`` with ``datetime`` and
``None``. How a backend encodes time (integer microseconds, ``timestamptz``) or
"none" (``''`` in SQLite's owner columns) stays inside ``engram.store``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from engram.errors import EngramError
from engram.store.audit import AuditEntry, AuditReport
from engram.store.erasure import Scrub
from engram.store.predicate import OwnerSlot, Subject, Tenant, Visibility
from engram.store.traces import TraceRow
from engram.types import Record, ShareGrant

__all__ = [
    "AddTombstones",
    "AnonymiseTombstones",
    "Applied",
    "Audit",
    "Change",
    "Consolidated",
    "CopiesOf",
    "CopiesTo",
    "Delete",
    "DropGrants",
    "DropTombstones",
    "Hits",
    "Insert",
    "KeyProbe",
    "Lease",
    "LexicalProbe",
    "Listing",
    "Maintenance",
    "NeighbourProbe",
    "Outcome",
    "OutcomeStats",
    "Place",
    "Probe",
    "PruneRule",
    "PutGrants",
    "RecentProbe",
    "Reconsolidate",
    "SlotProbe",
    "Store",
    "SubjectScan",
    "Touch",
    "UnlinkContests",
    "Update",
    "VectorProbe",
]

Hits = list[tuple[Record, float]]  # (record, raw channel score), best first


# ---------------------------------------------------------------- probes (reads)
@dataclass(frozen=True, slots=True)
class KeyProbe:
    """Keyed records: those whose key is in ``keys`` or, with ``keys`` None, every
    keyed record of ``types`` (score 1.0)."""

    statuses: tuple[str, ...]
    limit: int
    keys: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class RecentProbe:
    """The newest records (of ``types`` when given), newest first (score 1.0)."""

    statuses: tuple[str, ...]
    limit: int
    types: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class LexicalProbe:
    """BM25 over ``text``; score is BM25, higher is better."""

    text: str
    statuses: tuple[str, ...]
    limit: int


@dataclass(frozen=True, slots=True)
class VectorProbe:
    """Nearest neighbours of ``query`` among vectors of ``model``; score is cosine.

    A backend with an approximate index must still return ``limit`` results when
    ``limit`` visible ones exist (iterative scans or an exact fallback)."""

    query: NDArray[np.float32]
    model: str
    statuses: tuple[str, ...]
    limit: int


@dataclass(frozen=True, slots=True)
class NeighbourProbe:
    """Records of ``types`` observed within ``gap`` before and after each anchor in
    the anchor's session, at most ``per_side`` on each side (score 1.0)."""

    anchors: tuple[Record, ...]
    types: tuple[str, ...]
    statuses: tuple[str, ...]
    gap: timedelta
    per_side: int


@dataclass(frozen=True, slots=True)
class SlotProbe:
    """Versions a write to ``slot`` meets (``OwnerSlot.key_sql``), by key or by
    content hash (exactly one is given). Used by the write path inside its
    transaction, after ``Store.lock_slot``."""

    slot: OwnerSlot
    statuses: tuple[str, ...]
    key: str | None = None
    content_hash: str | None = None


Probe = KeyProbe | RecentProbe | LexicalProbe | VectorProbe | NeighbourProbe | SlotProbe


@dataclass(frozen=True, slots=True)
class Listing:
    """A page of visible records, newest first.

    ``at`` judges effective status (a record past ``expires_at`` reads as
    ``expired``) and filters by it; ``statuses`` empty means every status (export).
    """

    statuses: tuple[str, ...] = ()
    type_name: str | None = None
    limit: int | None = None
    offset: int = 0
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class CopiesOf:
    """Share copies (source kind ``share``) whose original (``derived_from[0]``) is one
    of ``originals``: every status, user and agent of the tenant (sharing and
    corrections follow them)."""

    originals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CopiesTo:
    """Share copies bound to agent ``agent_id`` whose type is one of ``types``, every
    status and user of the tenant (a revoked grant removes them)."""

    agent_id: str
    types: tuple[str, ...]


# ---------------------------------------------------------------- changes (writes)
@dataclass(frozen=True, slots=True)
class Insert:
    """A new record and, when it has one, its vector."""

    record: Record
    vector: NDArray[np.float32] | None = None


@dataclass(frozen=True, slots=True)
class Update:
    """New values for an existing record's mutable fields (status, links, usage)."""

    record: Record


@dataclass(frozen=True, slots=True)
class Place:
    """A record written as given, id included (import); no vector."""

    record: Record


@dataclass(frozen=True, slots=True)
class PruneRule:
    """The records decay pruning may consider (``Maintenance.prunable``): chain heads
    (nothing supersedes them) in ``statuses``, of an authority not in ``protected``,
    with importance below ``max_importance``, created at or before ``born_before``."""

    born_before: datetime
    max_importance: float
    protected: tuple[str, ...]
    statuses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    """Hard deletion of records with their index entries and vectors. It also bumps
    the tenant's cache generation (``Store.generation``), even with no ids."""

    tenant: Tenant
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddTombstones:
    """Tombstones of contents (their ``content_hash``) for ``owner`` (a user id,
    ``NO_USER`` for tenant-wide records); ``erased``: the rows name
    ``tombstones.ERASED`` instead of the owner (``erase_subject``)."""

    tenant: Tenant
    owner: str
    hashes: tuple[str, ...]
    at: datetime
    erased: bool = False


@dataclass(frozen=True, slots=True)
class DropTombstones:
    """Lift the owner's tombstones of contents (their ``content_hash``), those of an
    erased subject with the same user id included."""

    tenant: Tenant
    owner: str
    hashes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AnonymiseTombstones:
    """The subject's tombstones now belong to ``tombstones.ERASED``: they keep
    stopping replays of its contents but name no user any more."""

    subject: Subject


@dataclass(frozen=True, slots=True)
class UnlinkContests:
    """Remove ``ids`` from the contest links of the tenant's other records."""

    tenant: Tenant
    ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class Touch:
    """Usage: the visible ``ids`` were recalled at ``at`` (renews retention)."""

    vis: Visibility
    ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class Audit:
    """An audit entry appended to the hash chain (serialised across writers)."""

    entry: AuditEntry


@dataclass(frozen=True, slots=True)
class PutGrants:
    """Share grants to hold; one already held keeps its ``granted_at``."""

    grants: tuple[ShareGrant, ...]


@dataclass(frozen=True, slots=True)
class DropGrants:
    """Remove the grants from ``from_agent`` to ``to_agent`` of ``types`` in ``tenant``."""

    tenant: Tenant
    from_agent: str
    to_agent: str
    types: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One success or failure of the procedure ``procedure_id`` of ``subject``, counted
    into its statistics (``Store.outcomes``); ``reward`` is added to its reward total.
    A procedure that is not the subject's own record changes nothing."""

    subject: Subject
    procedure_id: str
    success: bool
    reward: float | None
    at: datetime


@dataclass(frozen=True, slots=True)
class Consolidated:
    """Episodes of ``subject`` that consolidation has read: each is read once (a
    rerun skips them, ``SubjectScan.unconsolidated``); an id already marked stays."""

    subject: Subject
    episode_ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class Reconsolidate:
    """The episodes the tenant's records among ``summary_ids`` of type ``summary_type``
    were derived from are no longer consolidated: their marks go (apply it before the
    summaries are deleted), so the next run summarises the survivors again."""

    tenant: Tenant
    summary_ids: tuple[str, ...]
    summary_type: str


Change = (
    Insert | Update | Place | Delete | UnlinkContests | Touch | Audit | PutGrants | DropGrants
    | Outcome | Consolidated | Reconsolidate | AddTombstones | DropTombstones
    | AnonymiseTombstones
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class OutcomeStats:
    """The counted outcomes of one procedure."""

    successes: int = 0
    failures: int = 0
    reward_total: float = 0.0
    rewards: int = 0

    def success_rate(self, prior_successes: float, prior_failures: float) -> float:
        """The posterior mean of a Beta prior updated by the counts: a procedure with
        few outcomes stays near the prior, many outcomes dominate it."""
        total = self.successes + self.failures + prior_successes + prior_failures
        return (self.successes + prior_successes) / total

    @property
    def mean_reward(self) -> float | None:
        """The mean of the rewards reported, None when none was."""
        return self.reward_total / self.rewards if self.rewards else None


@dataclass(frozen=True, slots=True)
class SubjectScan:
    """A page of one subject's records (every scope and agent), oldest observed first.

    Records of ``types`` in ``statuses`` observed before ``before`` and not past their
    retention at ``at``, after the cursor ``after`` (``(observed_at, id)`` of the last
    record of the previous page). ``unconsolidated`` leaves out the episodes already
    marked ``Consolidated``."""

    types: tuple[str, ...]
    statuses: tuple[str, ...]
    before: datetime
    at: datetime
    limit: int
    after: tuple[datetime, str] | None = None
    unconsolidated: bool = False


@dataclass(frozen=True, slots=True)
class Lease:
    """The answer to a lease request: whether this holder has the subject now, and the
    ``now`` of the subject's last finished consolidation (None: never)."""

    held: bool
    last_run: datetime | None


@dataclass(slots=True)
class Applied:
    """What ``Store.apply`` did: rows deleted and unlinked, grants added and removed,
    tombstones added and lifted, audit ids in order."""

    deleted: int = 0
    unlinked: int = 0
    audit_ids: list[str] = field(default_factory=list)
    buried: int = 0
    lifted: int = 0
    granted: int = 0
    revoked: int = 0


# ---------------------------------------------------------------- protocols
class Store(Protocol):
    """A system of record with lexical and vector indexes derived from it."""

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open on this store's connection."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """An atomic unit of work; nested calls become savepoints."""
        ...

    def read(self, vis: Visibility, ids: Sequence[str]) -> list[Record]:
        """The visible records among ``ids``, in that order (missing ones left out)."""
        ...

    def candidates(self, vis: Visibility, probes: Sequence[Probe]) -> list[Hits | EngramError]:
        """One result per probe, in order; a probe that failed yields its error so
        the others still answer. A backend may run probes concurrently."""
        ...

    def vectors(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]]:
        """Stored vectors of the visible ``ids`` (for diversity and dedup)."""
        ...

    def outcomes(self, vis: Visibility, ids: Sequence[str]) -> dict[str, OutcomeStats]:
        """Counted outcomes of the visible procedures among ``ids`` (those with any)."""
        ...

    def history(self, vis: Visibility, record_id: str) -> list[Record]:
        """The visible version chain through ``record_id``, oldest first."""
        ...

    def listing(self, vis: Visibility, page: Listing) -> list[Record]:
        """Visible records, newest first."""
        ...

    def grants(self, tenant: Tenant) -> list[ShareGrant]:
        """The tenant's share grants, ordered by (from_agent, to_agent, type)."""
        ...

    def copies(self, tenant: Tenant, query: CopiesOf | CopiesTo) -> list[Record]:
        """The tenant's share copies ``query`` names, in id order (oldest first)."""
        ...

    def lock_slot(self, slot: OwnerSlot, key: str) -> None:
        """Hold the write slot ``(slot, key)`` until the transaction ends.

        A no-op where the database admits one writer at a time (SQLite); a
        transaction-scoped advisory lock where writers run concurrently."""
        ...

    def apply(self, changes: Sequence[Change]) -> Applied:
        """Apply ``changes`` in order, atomically (inside the open transaction when
        there is one, else in one of its own)."""
        ...

    def generation(self, tenant: Tenant) -> int:
        """How many deletions the tenant has seen (0 before the first). Cheap (one
        primary-key read): a process checks it before serving from its in-memory
        copies. Inside a transaction it is read after the tenant's writer lock."""
        ...

    def tombstoned(self, tenant: Tenant, owner: str, hashes: Sequence[str]) -> set[str]:
        """Which of the content ``hashes`` are tombstoned for ``owner`` (a user id,
        ``NO_USER``), by its own rows or as an erased subject's."""
        ...

    def close(self) -> None:
        """Release connections and caches."""
        ...


class Maintenance(Protocol):
    """Administration: model, meta, audit, traces, erasure evidence, rebuilds."""

    # vectors and meta
    def vector_model(self) -> str | None: ...
    def check_vector_model(self, model: str) -> None: ...
    def meta_get(self, key: str) -> str | None: ...
    def meta_set(self, key: str, value: str) -> None: ...

    # audit chain
    def audit_name(self, subject: Subject) -> str | None: ...
    def forget_audit_subject(self, subject: Subject) -> int: ...
    def verify_audit(self) -> AuditReport: ...
    def audit_entries(self, subject: Subject) -> list[dict[str, Any]]: ...

    # traces
    def put_traces(self, rows: Sequence[TraceRow], keep: int) -> None: ...
    def get_trace(self, vis: Visibility, trace_id: str) -> str | None: ...
    def delete_traces(self, subject: Subject) -> int: ...
    def delete_traces_naming(self, tenant: Tenant, ids: Sequence[str]) -> int: ...

    # erasure: what to delete, and evidence that it is gone
    def records_of(self, tenant: Tenant, ids: Sequence[str]) -> list[Record]: ...
    def tombstone_rows(self, tenant: Tenant, owners: Sequence[str]) -> int: ...
    def subject_ids(self, subject: Subject) -> list[str]: ...
    def derived_ids(self, tenant: Tenant, ids: Sequence[str]) -> list[str]: ...
    def successors(self, tenant: Tenant, ids: Sequence[str]) -> list[str]: ...
    def erasure_strings(self, tenant: Tenant, ids: Sequence[str]) -> list[str]: ...
    def residue(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, int]: ...
    def subject_residue(self, subject: Subject) -> int: ...
    def forget_counters(self, subject: Subject) -> None: ...
    def counter_rows(self, subject: Subject) -> int: ...
    def forget_partition(self, subject: Subject) -> None: ...
    def holds_cached(self, tenant_id: str) -> bool: ...
    def scrub(self, strings: Sequence[str]) -> Scrub: ...

    # the sweep: what is due, what may decay, how far each tenant was swept
    def tenants(self) -> list[str]: ...
    def due(self, tenant: Tenant, at: datetime, after: Record | None,
            limit: int) -> list[Record]: ...  # fmt: skip
    def prunable(self, tenant: Tenant, rule: PruneRule, after: str,
                 limit: int) -> list[Record]: ...  # fmt: skip
    def mark_swept(self, tenant: Tenant, at: datetime) -> datetime | None: ...

    # derived indexes
    def rebuild_lexical(self) -> None: ...
    def iter_all(self, batch: int) -> Iterator[list[Record]]: ...
    def reset_vectors(self) -> None: ...
    def put_vectors(self, records: Sequence[Record], vectors: NDArray[np.float32]) -> None: ...

    # lifecycle: scans of one subject and the per-subject consolidation lease
    def subject_users(self, tenant: Tenant) -> list[str]: ...
    def subject_records(self, subject: Subject, scan: SubjectScan) -> list[Record]: ...
    def take_lease(
        self, subject: Subject, holder: str, wall_now: datetime, until: datetime
    ) -> Lease: ...
    def end_lease(self, subject: Subject, holder: str, last_run: datetime | None) -> None: ...
