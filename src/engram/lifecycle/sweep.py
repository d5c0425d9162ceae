"""The sweep: hard-delete what retention ended and what decay pruned, in short batches.

``sweep(store, config, now, ...)`` goes through each tenant (one, or every tenant
with a record) in two passes, each paging by id:

1. retention: chain heads past their ``expires_at`` (any status: an active or
   disputed memory past it reads as ``expired`` everywhere until now);
2. decay (``SweepConfig.prune``): live chain heads whose retention score fell
   below the threshold (``lifecycle.decay``), never an explicit or important one.

A memory goes with its whole version chain and, for long content, its passage
group (the other passages derive from the first). Copies derived from it in
other ways (a summary, a copy shared to another agent) have retention of their
own and stay, their ``source.derived_from`` still naming it: forgetting is not
erasure (``forget`` deletes derived copies and tombstones the content; the sweep
does neither). Deletion reuses the forget machinery: contest links unlinked,
vectors and postings deleted with the rows, stored and queued traces naming
them dropped, the tenant's cache generation bumped (every process drops its
copies), one audit entry per owner and reason (ids only).

Order. Before a page's memories of ``consolidated_types`` (episodes) are deleted,
the ``Consolidator`` hook runs once for each of their owners (tenant and user), so
episodes are summarised before they are dropped. When it raises, that owner's
episodes are kept (``SweepReport.unconsolidated``) and the next sweep tries
again. ``Engram.sweep`` passes ``Engram.consolidate`` (a user another
consolidator holds counts as failed); this function's default hook,
``no_consolidation``, consolidates nothing. The episodes are deleted at the store
level (``contract.Delete``), never through ``forget``: their summaries stay, and
their consolidation marks go with them (``docs/lifecycle.md``).

Concurrency. Each batch of ``batch_size`` is one transaction that re-reads its
records under the tenant's writer lock and deletes only those that still
qualify: a recall's access, a confirmation or a correction that committed first
renews or supersedes a record, and the sweep leaves it. So the write lock is held
for one batch at a time, and writes and recalls go on in between.

Clock. The sweep deletes what is due at ``now``; a ``now`` earlier than the last
sweep of a tenant (a clock set back, a replay) is reported (``clock_behind``)
and the sweep runs as asked: an earlier ``now`` finds a subset of what a later one
would (expiry times only pass, ages and recency only grow), so it can delete
nothing a correct clock would keep. Each tenant's mark never moves back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engram import passage_refs
from engram.lifecycle import decay
from engram.lifecycle.sweep_config import SweepConfig
from engram.recall.usage import UsageRecorder
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, Delete, PruneRule, UnlinkContests
from engram.store.open import Backend
from engram.store.predicate import Tenant
from engram.types import Record
from engram.write import passages

__all__ = ["DECAYED", "EXPIRED", "Consolidator", "SweepReport", "no_consolidation", "sweep"]

EXPIRED = "retention_ended"
DECAYED = "decay_pruned"
Consolidator = Callable[[str, str | None, datetime], object]  # (tenant, user or None, now)
Invalidate = Callable[[str], None]
Qualifies = Callable[[Record], bool]
_COUNTS = (EXPIRED, DECAYED, "versions", "consolidated", "unconsolidated", "batches")


def no_consolidation(tenant_id: str, user_id: str | None, now: datetime) -> None:
    """The default ``Consolidator``: consolidates nothing (``Engram.consolidate`` is
    meant to be wired in here)."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep did: counts per reason, never content; the audit entries (by
    hash) name the ids. ``expired`` and ``pruned`` count memories (chain heads),
    ``versions`` the older versions and passages deleted with them;
    ``consolidated`` the owners the hook ran for, ``unconsolidated`` the memories
    kept because it failed; ``checked`` / ``failed`` the physical pass (WAL
    checkpoint, ``VACUUM``)."""

    now: datetime
    tenants: tuple[str, ...]
    expired: int
    pruned: int
    versions: int
    consolidated: int
    unconsolidated: int
    batches: int
    clock_behind: tuple[str, ...]
    audit_ids: tuple[str, ...]
    checked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def deleted(self) -> dict[str, int]:
        """Memories deleted by reason."""
        return {EXPIRED: self.expired, DECAYED: self.pruned}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly fields (``engram sweep --json``)."""
        return {
            "now": self.now.isoformat(), "tenants": list(self.tenants),
            "deleted": self.deleted, "versions": self.versions,
            "consolidated": self.consolidated, "unconsolidated": self.unconsolidated,
            "batches": self.batches, "clock_behind": list(self.clock_behind),
            "audit_ids": list(self.audit_ids), "checked": list(self.checked),
            "failed": list(self.failed),
        }  # fmt: skip


@dataclass
class _Run:
    """One sweep's collaborators and running counts."""

    store: Backend
    config: SweepConfig
    now: datetime
    consolidator: Consolidator
    usage: UsageRecorder | None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))
    audit_ids: list[str] = field(default_factory=list)
    behind: list[str] = field(default_factory=list)
    done: set[tuple[str, str | None]] = field(default_factory=set)
    failed: set[tuple[str, str | None]] = field(default_factory=set)


def sweep(
    store: Backend, config: SweepConfig, now: datetime, tenant_id: str | None = None,
    consolidator: Consolidator = no_consolidation, usage: UsageRecorder | None = None,
    invalidate: Invalidate | None = None,
) -> SweepReport:  # fmt: skip
    """Sweep one tenant, or every tenant with a record (see the module)."""
    run = _Run(store, config, now, consolidator, usage)
    tenants = [tenant_id] if tenant_id is not None else store.tenants()
    for name in tenants:
        _tenant(run, Tenant(name))
        if invalidate is not None:
            invalidate(name)
    checked, failed = _physical(store) if run.counts["batches"] else ((), ())
    counts = run.counts
    return SweepReport(now, tuple(tenants), counts[EXPIRED], counts[DECAYED], counts["versions"],
                       counts["consolidated"], counts["unconsolidated"], counts["batches"],
                       tuple(run.behind), tuple(run.audit_ids), checked, failed)  # fmt: skip


def _physical(store: Backend) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The store's physical pass with no text to scan for: the WAL checkpoint
    (SQLite) or ``VACUUM`` (PostgreSQL); byte scans, which need texts, are left out."""
    scrub = store.scrub([])
    checked = tuple(c for c in scrub.checked if not c.endswith(" bytes"))
    return checked, tuple(f for f in scrub.failed if f in checked)


def _tenant(run: _Run, tenant: Tenant) -> None:
    """Both passes over one tenant, then one audit entry with its counts."""
    store, now, config = run.store, run.now, run.config
    previous = store.mark_swept(tenant, now)
    behind = previous is not None and previous > now
    if behind:
        run.behind.append(tenant.tenant_id)
    before = (run.counts[EXPIRED], run.counts[DECAYED])

    def due(record: Record) -> bool:
        return (record.expires_at is not None and record.expires_at <= now
                and record.superseded_by is None)  # fmt: skip

    _pass(run, tenant, EXPIRED, lambda last: store.due(tenant, now, last, config.batch_size), due)
    if config.prune:
        rule = PruneRule(now - timedelta(days=config.min_age_days), config.protect_importance,
                         decay.EXPLICIT, decay.PRUNED_STATUSES)  # fmt: skip

        def decayed(record: Record) -> bool:
            return decay.prunable(record, now, config)

        def candidates(last: Record | None) -> list[Record]:
            return store.prunable(tenant, rule, last.id if last else "", config.batch_size)

        _pass(run, tenant, DECAYED, candidates, decayed)
    expired, pruned = run.counts[EXPIRED] - before[0], run.counts[DECAYED] - before[1]
    reason = f"expired {expired}, pruned {pruned}" + (", clock behind" if behind else "")
    entry = AuditEntry(now, tenant.tenant_id, None, "sweep", "SWEEP", [], reason)
    run.audit_ids += store.apply([Audit(entry)]).audit_ids


def _pass(run: _Run, tenant: Tenant, reason: str,
          page: Callable[[Record | None], list[Record]], qualifies: Qualifies) -> None:  # fmt: skip
    """Page through candidates (each page after the last record of the one before);
    consolidate, then delete each page's due ones."""
    last: Record | None = None
    while True:
        found = page(last)
        if not found:
            return
        last = found[-1]
        wanted = [r for r in found if qualifies(r) and passages.head_id(r) is None]
        wanted = _consolidated(run, tenant.tenant_id, wanted)
        if wanted:
            _delete(run, tenant, wanted, reason, qualifies)


def _consolidated(run: _Run, tenant_id: str, records: Sequence[Record]) -> list[Record]:
    """``records`` after the hook ran for the owners of those to consolidate first;
    those of an owner whose consolidation failed are kept (left out)."""
    types = run.config.consolidated_types
    for owner in sorted({(tenant_id, r.user_id) for r in records if r.type in types}
                        - run.done - run.failed, key=lambda o: o[1] or ""):  # fmt: skip
        try:
            run.consolidator(owner[0], owner[1], run.now)
        except Exception:  # any failure of the hook (a model, a network) keeps the episodes
            run.failed.add(owner)
            continue
        run.done.add(owner)
        run.counts["consolidated"] += 1
    kept = [r for r in records if r.type not in types or (tenant_id, r.user_id) not in run.failed]
    run.counts["unconsolidated"] += len(records) - len(kept)
    return kept


def _delete(run: _Run, tenant: Tenant, records: Sequence[Record], reason: str,
            qualifies: Qualifies) -> None:  # fmt: skip
    """One batch, one transaction: re-read, keep what still qualifies, delete it with
    its versions and passages, drop the traces naming them, audit per owner."""
    store, usage = run.store, run.usage
    with usage.quiesced() if usage is not None else nullcontext():
        with store.transaction():
            heads = [r for r in store.records_of(tenant, [r.id for r in records]) if qualifies(r)]
            if not heads:
                return
            groups = _groups(store, tenant, heads)
            ids = list(dict.fromkeys(i for group in groups.values() for i in group))
            if usage is not None:
                usage.purge(ids)
            store.delete_traces_naming(tenant, ids)
            changes: list[Change] = [UnlinkContests(tenant, tuple(ids), run.now),
                                     Delete(tenant, tuple(ids))]  # fmt: skip
            changes += _audits(run.now, tenant, heads, groups, reason)
            run.audit_ids += store.apply(changes).audit_ids
        if usage is not None:
            usage.purge(ids)  # queued while the transaction ran
    run.counts[reason] += len(heads)
    run.counts["versions"] += len(ids) - len(heads)
    run.counts["batches"] += 1


def _groups(store: Backend, tenant: Tenant, heads: Sequence[Record]) -> dict[str, list[str]]:
    """Each head's ids: the head, its older versions, and (for the first passage of
    long content) the other passages of its group. One query per chain level."""
    groups = {head.id: [head.id] for head in heads}
    frontier = {head.supersedes: head.id for head in heads if head.supersedes}
    while frontier:
        found = store.records_of(tenant, list(frontier))
        nxt: dict[str, str] = {}
        for record in found:
            head_id = frontier[record.id]
            groups[head_id].append(record.id)
            if record.supersedes and record.supersedes not in groups[head_id]:
                nxt[record.supersedes] = head_id
        frontier = nxt
    firsts = [head for head in heads if _first_passage(head)]
    if firsts:  # only the first passage of long content has a group to take along
        members = store.records_of(tenant, store.derived_ids(tenant, [h.id for h in firsts]))
        for head in firsts:
            groups[head.id] += [m.id for m in members if passages.is_head_of(head, m)]
    return groups


def _first_passage(record: Record) -> bool:
    place = passage_refs.parsed(record.source.ref)
    return place is not None and place[1] == 1 and place[2] > 1


def _audits(
    now: datetime, tenant: Tenant, heads: Iterable[Record], groups: dict[str, list[str]],
    reason: str,
) -> list[Change]:  # fmt: skip
    """One audit entry per owner (its user is pseudonymised), naming the ids deleted."""
    by_user: dict[str | None, list[str]] = {}
    for head in heads:
        by_user.setdefault(head.user_id, []).extend(groups[head.id])
    return [Audit(AuditEntry(now, tenant.tenant_id, user, "sweep", "DELETE", ids, reason))
            for user, ids in by_user.items()]  # fmt: skip
