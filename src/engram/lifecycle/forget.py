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
are summarised again by the next run). Then the in-memory copies go, the WAL is
checkpointed and the files are scanned for the erased texts
(``store.erasure``).

Receipts claim only what was verified: ``checked`` names every check made after
the commit, ``failed`` those that found something, and ``verified`` is True
only when none did. The audit log names users by a keyed hash under a key of
their own (``store.pseudonyms``), never by their id; an erasure writes its
entry under that name, then deletes the key, so none of the subject's entries
can be linked to them any more (they still verify).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime

from engram import embed
from engram.config import ConsolidationConfig
from engram.recall.rerank import forget_cached_texts
from engram.recall.usage import UsageRecorder
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, Delete, Reconsolidate, UnlinkContests
from engram.store.erasure import Scrub
from engram.store.open import Backend
from engram.store.predicate import Subject, Tenant, Visibility
from engram.types import Record
from engram.write import passages

__all__ = [
    "Erasing", "ErasureReceipt", "ForgetReceipt", "delete_ids", "derived_closure",
    "drop_text_caches", "erase_subject", "finish", "forget", "quiesced",
]  # fmt: skip


_SUMMARY = ConsolidationConfig().summary_type


@dataclass(frozen=True, slots=True)
class ForgetReceipt:
    """What ``forget`` deleted and what was verified afterwards.

    ``traces`` counts stored and queued traces removed; ``scanned`` erased texts
    were looked for in the files (``short`` were under 8 bytes, not scanned)."""

    deleted: tuple[str, ...]
    derived: tuple[str, ...]
    verified: bool
    traces: int = 0
    checked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    scanned: int = 0
    short: int = 0


@dataclass(frozen=True, slots=True)
class ErasureReceipt:
    """What ``erase_subject`` deleted and what was verified afterwards (see
    ``ForgetReceipt``)."""

    tenant_id: str
    user_id: str
    records: int
    derived: int
    traces: int
    verified: bool
    checked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    scanned: int = 0
    short: int = 0
    working: int = 0  # working-memory items erased (``engram.working.erasure``)


@dataclass(frozen=True, slots=True)
class _Outcome:
    checked: tuple[str, ...]
    failed: tuple[str, ...]
    scrub: Scrub

    @property
    def verified(self) -> bool:
        return not self.failed


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


def _versions(store: Backend, vis: Visibility, record: Record) -> list[str]:
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


def _verify(
    store: Backend, tenant: Tenant, ids: list[str], strings: list[str], subject: Subject | None,
) -> _Outcome:  # fmt: skip
    """Every check after the commit: rows, counters, caches, then the files."""
    counts = store.residue(tenant, ids)
    if subject is not None:
        counts["subject rows"] = store.subject_residue(subject)
        counts["counter rows"] = store.counter_rows(subject)
    counts["partition caches"] = int(store.holds_cached(tenant.tenant_id))
    scrub = store.scrub(strings)
    checked = (*counts, *scrub.checked)
    failed = tuple(name for name, n in counts.items() if n) + scrub.failed
    return _Outcome(checked, failed, scrub)


def _drop_copies(store: Backend, subject: Subject) -> None:
    store.forget_partition(subject)
    drop_text_caches()


def drop_text_caches() -> None:
    """Drop every process cache of memory texts (rerank stems and flags, the hashing
    embedder's vectors): after a forget, an erasure or a working-memory delete."""
    forget_cached_texts()
    embed.forget_cached_texts()


@dataclass(slots=True)
class Erasing:
    """The records one deletion removed and what to check for afterwards."""

    tenant: Tenant
    ids: list[str]
    strings: list[str]
    traces: int


def delete_ids(
    store: Backend, tenant: Tenant, ids: list[str], derived: list[str],
    usage: UsageRecorder | None, changes: Sequence[Change], summary_type: str, now: datetime,
) -> Erasing:  # fmt: skip
    """Inside the caller's transaction (under ``quiesced(usage)``): delete ``ids`` with
    the traces naming them, their contest links and, for the ``derived`` summaries
    among them, their episodes' consolidation marks; apply ``changes`` (the audit
    entries) with them. ``finish`` does the rest after the commit."""
    strings = store.erasure_strings(tenant, ids)
    traces = _purge(usage, ids, None) + store.delete_traces_naming(tenant, ids)
    store.apply([UnlinkContests(tenant, tuple(ids), now),
                 Reconsolidate(tenant, tuple(derived), summary_type),
                 Delete(tenant, tuple(ids)), *changes])  # fmt: skip
    return Erasing(tenant, ids, strings, traces)


def finish(
    store: Backend, erasing: Erasing, usage: UsageRecorder | None, subjects: Sequence[Subject]
) -> _Outcome:
    """After the commit of ``delete_ids``, still under the same ``quiesced(usage)``: drop
    the traces queued meanwhile (``erasing.traces`` counts them), the in-memory copies
    of ``subjects`` and the text caches, then check."""
    erasing.traces += _purge(usage, erasing.ids, None)
    for subject in subjects:
        store.forget_partition(subject)
    drop_text_caches()
    return _verify(store, erasing.tenant, erasing.ids, erasing.strings, None)


def forget(
    store: Backend, vis: Visibility, record: Record, actor: str, now: datetime,
    usage: UsageRecorder | None = None, summary_type: str = _SUMMARY,
) -> ForgetReceipt:  # fmt: skip
    """Delete ``record``, every version in its chain and every copy derived from them.

    A passage of long content is forgotten with its whole group: the chain of its
    head (passage 1) is deleted too, and the other passages derive from it. The
    derived records of ``summary_type`` release their other episodes to the next
    consolidation."""
    tenant = Tenant(vis.tenant_id)
    with quiesced(usage):
        with store.transaction():
            chain = _versions(store, vis, record)
            derived = derived_closure(store, tenant, chain)
            ids = chain + derived
            entry = AuditEntry(now, record.tenant_id, record.user_id, actor, "DELETE", ids,
                               "forget")  # fmt: skip
            erasing = delete_ids(store, tenant, ids, derived, usage, [Audit(entry)],
                                 summary_type, now)  # fmt: skip
        outcome = finish(store, erasing, usage, [Subject.of(record.tenant_id, record.user_id)])
    return ForgetReceipt(tuple(chain), tuple(derived), outcome.verified, erasing.traces,
                         outcome.checked, outcome.failed, outcome.scrub.scanned,
                         outcome.scrub.short)  # fmt: skip


def erase_subject(
    store: Backend, tenant_id: str, user_id: str, now: datetime,
    usage: UsageRecorder | None = None,
) -> ErasureReceipt:  # fmt: skip
    """Delete every record, vector, trace, counter and derived copy of one user of one
    tenant, and every trace naming one of those records."""
    subject, tenant = Subject(tenant_id, user_id), Tenant(tenant_id)
    with quiesced(usage):
        with store.transaction():
            own = store.subject_ids(subject)
            derived = derived_closure(store, tenant, own)
            ids = own + derived
            strings = store.erasure_strings(tenant, ids)
            traces = _purge(usage, ids, subject) + store.delete_traces_naming(tenant, ids)
            store.apply([UnlinkContests(tenant, tuple(ids), now), Delete(tenant, tuple(ids))])
            traces += store.delete_traces(subject)
            store.forget_counters(subject)
            entry = AuditEntry(now, tenant_id, user_id, "admin", "ERASE", [],
                               f"erased {len(own)} records")  # fmt: skip
            store.apply([Audit(entry)])
            store.forget_audit_subject(subject)
        traces += _purge(usage, ids, subject)
    _drop_copies(store, subject)
    outcome = _verify(store, tenant, ids, strings, subject)
    return ErasureReceipt(tenant_id, user_id, len(own), len(derived), traces, outcome.verified,
                          outcome.checked, outcome.failed, outcome.scrub.scanned,
                          outcome.scrub.short)  # fmt: skip
