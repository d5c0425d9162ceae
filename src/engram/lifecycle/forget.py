"""Hard deletion: one memory with its versions and derived copies, or a whole subject.

Both run in one transaction that reads what to delete (the version chain, the
derived closure, the texts to look for afterwards) and deletes it, so a
``correct`` racing a ``forget`` either lands before it (and its version is
deleted too) or after it (and is refused: ``forgotten``, schema 0013). Queued
recall traces and touches naming an erased id are dropped before the
transaction, and no flush writes while it runs (``UsageRecorder.quiesced``);
stored traces naming one go inside it, and so do the contest links of surviving
records that name one (the partner of a forgotten contested or disputed version
is no longer contested by it), and so do the consolidation marks of the episodes a
derived summary being deleted was made from (the surviving episodes of its group
are summarised again by the next run). ``delete_ids`` and ``finish`` are those two
steps, shared with ``lifecycle.grants.revoke`` (a revoked share's copies are erased
as a forget erases them, without tombstones: a copy is not the user's statement).

Derived copies are deleted, never rebuilt: a summary made from a forgotten
episode, a copy shared to another agent (``source.derived_from``), a later
passage of long content. A summary cannot be rebuilt without the forgotten text
here (the consolidator makes a new one from what remains on its next run).

The same transaction tombstones every deleted content (``store.tombstones``)
and, through ``Delete``, bumps the tenant's cache generation: every process
serving the store drops its in-memory copies of the tenant before it serves
again (``lifecycle.caches``). Then this process drops its own, and the
verification pass runs (``lifecycle.verify``); receipts claim only what it
checked. The audit log names users by a keyed hash under a key of their own
(``store.pseudonyms``); an erasure writes its entry under that name, then
deletes the key, so none of the subject's entries can be linked to them.

Working memory: ``erase_subject`` deletes the subject's items first (an
unreachable Redis fails the erasure before any record is touched, and it can be
run again whole). ``forget`` of one memory leaves working memory alone: working
items are the agent's own scratch state, written by the agent and expiring by
themselves, never derived from a record (nothing links one to a memory). The
byte scan of the working file still runs, and counts as residue any erased text
no live item holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from engram import embed
from engram.config import ConsolidationConfig
from engram.lifecycle.receipts import ErasureReceipt, ForgetReceipt
from engram.lifecycle.verify import Erased, Outcome, verify
from engram.recall.rerank import forget_cached_texts
from engram.recall.usage import UsageRecorder
from engram.store.audit import AuditEntry
from engram.store.contract import (
    AddTombstones,
    AnonymiseTombstones,
    Audit,
    Change,
    Delete,
    Reconsolidate,
    UnlinkContests,
)
from engram.store.open import Backend
from engram.store.predicate import NO_USER, Subject, Tenant, Visibility
from engram.types import Record
from engram.working.base import WorkingStore
from engram.write import passages

__all__ = [
    "Erasing", "ErasureReceipt", "ForgetReceipt", "Invalidate", "delete_ids",
    "derived_closure", "drop_text_caches", "erase_subject", "finish", "forget", "quiesced",
    "versions",
]  # fmt: skip

Invalidate = Callable[[str], None]  # after a deletion commits: drop this process's copies

_SUMMARY = ConsolidationConfig().summary_type


def derived_closure(store: Backend, tenant: Tenant, ids: list[str]) -> list[str]:
    """Records derived from ``ids``, transitively (summaries of summaries)."""
    found: list[str] = []
    frontier = ids
    seen = set(ids)
    while frontier:
        frontier = [i for i in store.derived_ids(tenant, frontier) if i not in seen]
        seen.update(frontier)
        found.extend(frontier)
    return found


def versions(store: Backend, vis: Visibility, record: Record) -> list[str]:
    """The ids of ``record``'s version chain, then those of its passage group's head
    (when ``record`` is a later passage of long content and the head is visible)."""
    chain = [r.id for r in store.history(vis, record.id)] or [record.id]
    head_id = passages.head_id(record)
    found = store.read(vis, [head_id]) if head_id is not None else []
    head = found[0] if found else None
    if head is None or not passages.is_head_of(head, record):
        return chain
    return chain + [r.id for r in store.history(vis, head.id) if r.id not in chain]


@contextmanager
def quiesced(usage: UsageRecorder | None) -> Iterator[None]:
    """No usage flush writes while this runs (when there is a recorder)."""
    with usage.quiesced() if usage is not None else nullcontext():
        yield


def _purge(usage: UsageRecorder | None, ids: list[str], subject: Subject | None) -> int:
    return usage.purge(ids, subject) if usage is not None else 0


def _buried(records: Sequence[Record]) -> dict[str, list[str]]:
    """The content hashes to tombstone, by owner: the record's user (``NO_USER`` for
    tenant-wide records)."""
    owners: dict[str, list[str]] = {}
    for record in records:
        owners.setdefault(record.user_id or NO_USER, []).append(record.content_hash)
    return owners


def _tombstones(
    tenant: Tenant, buried: dict[str, list[str]], at: datetime, subject: Subject | None = None
) -> list[Change]:
    """The tombstone changes; an erased subject's rows name no one (``ERASED``)."""
    erased = subject.user_id if subject is not None else None
    return [AddTombstones(tenant, owner, tuple(hashes), at, owner == erased)
            for owner, hashes in buried.items()]  # fmt: skip


def _invalidate(
    store: Backend, tenant_id: str, invalidate: Invalidate | None, subjects: Sequence[Subject]
) -> None:
    """Drop this process's copies of the tenant: through the cache guard when given,
    else the partitions of ``subjects`` (the tenant-wide one when none) and the text
    caches."""
    if invalidate is not None:
        invalidate(tenant_id)
        return
    for subject in subjects or [Subject(tenant_id, NO_USER)]:
        store.forget_partition(subject)
    drop_text_caches()


def drop_text_caches() -> None:
    """Drop every process cache of memory texts (rerank stems and flags, the hashing
    embedder's vectors): after a forget, an erasure or a working-memory delete."""
    forget_cached_texts()
    embed.forget_cached_texts()


@dataclass(slots=True)
class Erasing:
    """The records one deletion removed and what to check for afterwards: their
    texts, the contents tombstoned by owner, the traces dropped, the audit ids."""

    tenant: Tenant
    ids: list[str]
    strings: list[str]
    traces: int
    buried: dict[str, list[str]] = field(default_factory=dict)
    audit_ids: tuple[str, ...] = ()


def delete_ids(
    store: Backend, tenant: Tenant, ids: list[str], derived: list[str],
    usage: UsageRecorder | None, changes: Sequence[Change], summary_type: str, now: datetime,
    *, bury: bool = False,
) -> Erasing:  # fmt: skip
    """Inside the caller's transaction (under ``quiesced(usage)``): delete ``ids`` with
    the traces naming them, their contest links and, for the ``derived`` summaries
    among them, their episodes' consolidation marks; tombstone their contents when
    ``bury``; apply ``changes`` (the audit entries) with them. ``Delete`` bumps the
    tenant's cache generation. ``finish`` does the rest after the commit."""
    buried = _buried(store.records_of(tenant, ids)) if bury else {}
    strings = store.erasure_strings(tenant, ids)
    traces = _purge(usage, ids, None) + store.delete_traces_naming(tenant, ids)
    applied = store.apply([UnlinkContests(tenant, tuple(ids), now),
                           Reconsolidate(tenant, tuple(derived), summary_type),
                           Delete(tenant, tuple(ids)), *_tombstones(tenant, buried, now),
                           *changes])  # fmt: skip
    return Erasing(tenant, ids, strings, traces, buried, tuple(applied.audit_ids))


def finish(
    store: Backend, erasing: Erasing, usage: UsageRecorder | None, subjects: Sequence[Subject],
    invalidate: Invalidate | None = None, working: WorkingStore | None = None,
) -> Outcome:  # fmt: skip
    """After the commit of ``delete_ids``, still under the same ``quiesced(usage)``: drop
    the traces queued meanwhile (``erasing.traces`` counts them), this process's
    copies (``invalidate``, else the partitions of ``subjects`` and the text caches),
    then verify (``lifecycle.verify``)."""
    erasing.traces += _purge(usage, erasing.ids, None)
    _invalidate(store, erasing.tenant.tenant_id, invalidate, subjects)
    erased = Erased(erasing.tenant, erasing.ids, erasing.strings, erasing.buried)
    return verify(store, erased, usage, working)


def forget(
    store: Backend, vis: Visibility, record: Record, actor: str, now: datetime,
    usage: UsageRecorder | None = None, working: WorkingStore | None = None,
    invalidate: Invalidate | None = None, summary_type: str = _SUMMARY,
) -> ForgetReceipt:  # fmt: skip
    """Delete ``record``, every version in its chain and every copy derived from them,
    tombstoning their contents.

    A passage of long content is forgotten with its whole group: the chain of its
    head (passage 1) is deleted too, and the other passages derive from it. The
    derived records of ``summary_type`` release their other episodes to the next
    consolidation."""
    tenant = Tenant(vis.tenant_id)
    with quiesced(usage):
        with store.transaction():
            chain = versions(store, vis, record)
            derived = derived_closure(store, tenant, chain)
            ids = chain + derived
            entry = AuditEntry(now, record.tenant_id, record.user_id, actor, "DELETE", ids,
                               "forget")  # fmt: skip
            erasing = delete_ids(store, tenant, ids, derived, usage, [Audit(entry)],
                                 summary_type, now, bury=True)  # fmt: skip
        outcome = finish(store, erasing, usage, [Subject.of(record.tenant_id, record.user_id)],
                         invalidate, working)  # fmt: skip
    scrub = outcome.scrub
    return ForgetReceipt(tuple(chain), tuple(derived), outcome.verified, erasing.traces,
                         outcome.checked, outcome.failed, scrub.scanned, scrub.short,
                         MappingProxyType(outcome.counts), erasing.audit_ids[-1],
                         sum(map(len, erasing.buried.values())))  # fmt: skip


def erase_subject(
    store: Backend, tenant_id: str, user_id: str, now: datetime,
    usage: UsageRecorder | None = None, working: WorkingStore | None = None,
    invalidate: Invalidate | None = None,
) -> ErasureReceipt:  # fmt: skip
    """Delete every record, vector, trace, counter, working item and derived copy of
    one user of one tenant, and every trace naming one of those records; the
    subject's tombstones stay, naming no one (``store.tombstones``)."""
    subject, tenant = Subject(tenant_id, user_id), Tenant(tenant_id)
    items = working.erase_subject(tenant_id, user_id) if working is not None else 0
    with quiesced(usage):
        with store.transaction():
            own = store.subject_ids(subject)
            derived = derived_closure(store, tenant, own)
            ids = own + derived
            buried = _buried(store.records_of(tenant, ids))
            strings = store.erasure_strings(tenant, ids)
            traces = _purge(usage, ids, subject) + store.delete_traces_naming(tenant, ids)
            store.apply([UnlinkContests(tenant, tuple(ids), now), Delete(tenant, tuple(ids)),
                         AnonymiseTombstones(subject),
                         *_tombstones(tenant, buried, now, subject)])  # fmt: skip
            traces += store.delete_traces(subject)
            store.forget_counters(subject)
            entry = AuditEntry(now, tenant_id, user_id, "admin", "ERASE", [],
                               f"erased {len(own)} records")  # fmt: skip
            applied = store.apply([Audit(entry)])
            store.forget_audit_subject(subject)
        traces += _purge(usage, ids, subject)
    _invalidate(store, tenant_id, invalidate, [subject])
    outcome = verify(store, Erased(tenant, ids, strings, buried, subject), usage, working)
    scrub = outcome.scrub
    return ErasureReceipt(tenant_id, user_id, len(own), len(derived), traces, outcome.verified,
                          outcome.checked, outcome.failed, scrub.scanned, scrub.short, items,
                          MappingProxyType(outcome.counts), applied.audit_ids[-1],
                          sum(map(len, buried.values())))  # fmt: skip
