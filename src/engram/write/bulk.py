"""Many single proposals decided and committed together: one slot read, one apply.

``WritePath.commit_prepared`` decides and commits its proposals one after the
other: each reads its slot (a statement), then applies its writes (on PostgreSQL
a savepoint around them). A share of 100 memories sent 620 statements that way.
``commit_together`` reaches the same outcome in a bounded number: it reads the
slots of every proposal at once (one ``Store.candidates`` call per tenant and
user; PostgreSQL answers a run of slot probes in one statement per slot),
decides each proposal on what it read, and applies every write in one
``Store.apply`` (the inserts batched, the audit entries with them).

Deciding on one read gives what the one-by-one order gives only when no
proposal's decision depends on another's write. A proposal may depend on
another when they share a slot lock name (the same key or content in the same
tenant, user and scope: what ``slots.lock_in_order`` locks), or a record their
reads found; a record found in a contest (its link may be ended by another
write's retraction of share copies) and a content that meets a tombstone are
left out too. Those proposals are committed after the others, one by one in
their order (``commit_prepared``), as before: nothing the others wrote is
something they read, nor the other way round.

The caller holds the transaction and has locked the slots (``lock_in_order``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from engram.store.contract import Audit, Change, Insert, SlotProbe
from engram.store.open import Backend
from engram.types import Record, WriteResult
from engram.write import tombstones
from engram.write.commit import Owner, Plan, follow_retired
from engram.write.decide import SlotState
from engram.write.path import Part, Prepared, WritePath, slot_probes, slot_state
from engram.write.slots import slot_versions

__all__ = ["Shape", "commit_together"]

# Adjusts a new version before it is inserted (same id): (job, proposal index, record).
Shape = Callable[[int, int, Record], Record]
_Name = tuple[str, str, str, str]  # (tenant, user, scope, "key:..." or "hash:...")
_At = tuple[int, int]  # (job, proposal index)


@dataclass
class _Item:
    """One proposal of the batch: where it is, what it reads, what its write may meet
    (``names``, as ``lock_in_order`` locks them) and what its reads found."""

    at: _At
    part: Part
    probes: list[SlotProbe]
    names: set[_Name]
    found: list[list[Record]] = field(default_factory=list)

    @property
    def state(self) -> SlotState:
        """The slot state its reads describe."""
        return slot_state(self.part[0], self.found) if self.probes else SlotState()


def commit_together(
    writer: WritePath, jobs: Sequence[tuple[Owner, Prepared]], now: datetime,
    shape: Shape | None = None,
) -> list[list[WriteResult]]:  # fmt: skip
    """Decide and commit each job's prepared single proposals for its owner; one list
    of results per job, in order, as ``commit_prepared`` of each job in turn gives
    them. ``shape`` adjusts the new versions written in the batch (the proposals
    committed one by one are left as the write path makes them)."""
    if any(set(prepared.sizes) - {1} for _, prepared in jobs):
        raise ValueError("commit_together takes single proposals, not passages of one content")
    store = writer.store
    items = [_item((j, i), owner, part) for j, (owner, prepared) in enumerate(jobs)
             for i, part in enumerate(writer.parts(prepared))]  # fmt: skip
    _read(store, items)
    apart = _apart(items, _buried(store, jobs))
    plans: list[Plan] = []
    results: dict[_At, WriteResult] = {}
    for item in items:
        if item.at in apart:
            continue
        owner = jobs[item.at[0]][0]
        done = writer.plan_one(owner.slot, owner, *item.part, now, item.state)
        if shape is not None and done.new is not None:
            done = done.with_new(shape(*item.at, done.new))
        plans.append(done)
        results[item.at] = done.result
    _apply(store, plans)
    follow_retired(store, plans, now)
    for j, (owner, prepared) in enumerate(jobs):
        later = [i for i in range(len(prepared.proposals)) if (j, i) in apart]
        if later:
            written = writer.commit_prepared(owner, prepared.subset(later), now)
            results.update(((j, i), result) for i, result in zip(later, written, strict=True))
    return [[results[(j, i)] for i in range(len(p.proposals))] for j, (_, p) in enumerate(jobs)]


def _item(at: _At, owner: Owner, part: Part) -> _Item:
    proposal, verdict, digest, _ = part
    where = (owner.tenant_id, owner.user_id or "", owner.scope)
    names = {(*where, f"hash:{digest}")}
    if proposal.key:
        names.add((*where, f"key:{proposal.key}"))
    return _Item(at, part, slot_probes(owner.slot, proposal, digest, verdict), names)


def _read(store: Backend, items: Sequence[_Item]) -> None:
    """Every item's slot reads: one ``candidates`` call per tenant and user (a slot
    probe reads only its caller's), answers dealt back in order."""
    groups: dict[tuple[str, str], list[_Item]] = {}
    for item in items:
        if item.probes:
            slot = item.probes[0].slot
            groups.setdefault((slot.tenant_id, slot.user_id), []).append(item)
    for group in groups.values():
        answers = iter(slot_versions(store, [p for item in group for p in item.probes]))
        for item in group:
            item.found = [next(answers) for _ in item.probes]


def _buried(store: Backend, jobs: Sequence[tuple[Owner, Prepared]]) -> set[_At]:
    """The proposals whose content meets a tombstone of their owner."""
    met: set[_At] = set()
    for j, (owner, prepared) in enumerate(jobs):
        buried = tombstones.buried(store, owner, prepared.hashes)
        met.update((j, i) for i, digest in enumerate(prepared.hashes) if digest in buried)
    return met


def _apart(items: Sequence[_Item], buried: set[_At]) -> set[_At]:
    """The proposals to commit one by one (see the module): those meeting a
    tombstone, sharing a name or a found record with another, or finding a record
    in a contest."""
    names = Counter(name for item in items for name in item.names)
    found = {item.at: {r.id: r for answer in item.found for r in answer} for item in items}
    ids = Counter(record_id for records in found.values() for record_id in records)
    apart = set(buried)
    for item in items:
        records = found[item.at]
        if (any(names[name] > 1 for name in item.names)
                or any(ids[record_id] > 1 for record_id in records)
                or any(r.contested_with is not None for r in records.values())):  # fmt: skip
            apart.add(item.at)
    return apart


def _apply(store: Backend, plans: Sequence[Plan]) -> None:
    """Every plan's writes in one ``apply``: the updates first (each plan's in its
    order), then the inserts together, then the audit entries in plan order. No plan
    reads or writes what another does (``_apart``), so only each one's own order
    matters (its links close versions before its insert)."""
    if not plans:
        return
    first: list[Change] = []
    inserts: list[Change] = []
    for done in plans:
        for change in done.writes():
            (inserts if isinstance(change, Insert) else first).append(change)
    store.apply([*first, *inserts, *(Audit(done.entry) for done in plans)])
