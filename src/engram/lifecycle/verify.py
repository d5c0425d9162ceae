"""The verification pass after a deletion commits: query every store, count what is left.

Each check has a name and a count (0 when nothing is left); a receipt lists
them all and verifies only when every count is 0. Per store:

* records, versions and derived copies: ``records rows`` (the chain, the derived
  closure), ``derived rows`` (anything still derived from or superseding an
  erased id), ``contest links``; for a subject, ``subject rows``;
* vectors: ``vectors rows`` (SQLite's ``vectors`` table; PostgreSQL's
  ``embedding`` column);
* lexical postings and in-memory vectors: ``partition caches`` (this process's
  partitions of the tenant), ``counter rows`` (a subject's partition counters);
  PostgreSQL's ``tsvector`` is a column of the deleted rows;
* traces: ``traces rows`` (stored, naming an erased id), ``queued traces`` (this
  process's usage queue);
* tombstones: ``tombstones`` (erased contents left without one), and for a
  subject ``tombstone rows`` (tombstones still naming the user);
* working memory: ``working memory`` (the subject's items, SQLite file or Redis);
* files: the store's ``scrub`` (SQLite: WAL checkpoint and byte scan of the
  database, WAL and shared-memory files; PostgreSQL: ``VACUUM``, dead tuples,
  and the relation files when this process can read them) and the working
  store's (its SQLite file's bytes; Redis persistence rewritten).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engram.recall.usage import UsageRecorder
from engram.store.erasure import Scrub, merged
from engram.store.open import Backend
from engram.store.predicate import Subject, Tenant
from engram.working.base import ScrubbedWorking, WorkingStore

__all__ = ["WORKING_CHECK", "Erased", "Outcome", "verify"]

WORKING_CHECK = "working memory"


@dataclass(frozen=True, slots=True)
class Outcome:
    """Every check's count, and the physical pass."""

    counts: dict[str, int]
    scrub: Scrub

    @property
    def checked(self) -> tuple[str, ...]:
        return tuple(self.counts)

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(name for name, count in self.counts.items() if count)

    @property
    def verified(self) -> bool:
        return not self.failed


@dataclass(frozen=True, slots=True)
class Erased:
    """What one deletion removed: ids, texts, tombstoned contents by owner, and
    (for ``erase_subject``) the subject."""

    tenant: Tenant
    ids: Sequence[str]
    strings: Sequence[str]
    buried: Mapping[str, Sequence[str]]
    subject: Subject | None = None


def verify(
    store: Backend, erased: Erased, usage: UsageRecorder | None = None,
    working: WorkingStore | None = None,
) -> Outcome:  # fmt: skip
    """Every check after the commit: rows, caches, queues, tombstones, working
    memory, then the files (see the module)."""
    tenant, ids, subject = erased.tenant, list(erased.ids), erased.subject
    counts = dict(store.residue(tenant, ids))
    if subject is not None:
        counts["subject rows"] = store.subject_residue(subject)
        counts["counter rows"] = store.counter_rows(subject)
        counts["tombstone rows"] = store.tombstone_rows(tenant, [subject.user_id])
    counts["partition caches"] = int(store.holds_cached(tenant.tenant_id))
    if usage is not None:
        counts["queued traces"] = usage.queued(ids, subject)
    counts["tombstones"] = _missing(store, tenant, erased.buried)
    if subject is not None and working is not None:
        counts[WORKING_CHECK] = working.subject_residue(subject.tenant_id, subject.user_id)
    scrub = store.scrub(erased.strings)
    if isinstance(working, ScrubbedWorking):
        scrub = merged(scrub, working.scrub(erased.strings, subject is not None))
    counts.update({name: int(name in scrub.failed) for name in scrub.checked})
    return Outcome(counts, scrub)


def _missing(store: Backend, tenant: Tenant, buried: Mapping[str, Sequence[str]]) -> int:
    """How many of the contents meant to be tombstoned have no tombstone."""
    missing = 0
    for owner, hashes in buried.items():
        wanted = set(hashes)
        missing += len(wanted - store.tombstoned(tenant, owner, list(wanted)))
    return missing
