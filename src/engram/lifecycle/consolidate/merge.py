"""Merge: near-duplicate semantic facts of one slot become one.

Candidates are the subject's active, uncontested semantic facts, compared
within one scope and governance (private, purpose, consent basis, sensitivity)
by their stored vectors: a pair at least ``merge_cosine`` alike is a duplicate
unless it is a conflict (two values of one key), merging would lose a key (a
keyed fact only merges into a fact of the same key), or the survivor would be
hidden from a reader of the other (an agent's fact merges into the user's own or
into that agent's, never the user's into an agent's). The survivor is the
stronger: higher authority, then higher confidence, then the keyed one, then
the user's own, then the older (the established wording). Merges do not chain:
a fact merged away absorbs nothing.

Nothing is overwritten: the merged-away fact keeps its content and becomes
``superseded`` by the survivor (``superseded_by``, its validity closed now), so
its history stays; the audit entry (operation ``SUPERSEDE``, reason
``near_duplicate_merge``) names survivor and merged fact, which is where
``merged_from`` is recorded. The version walk (``Store.history``) follows
``superseded_by`` backwards, so the merged fact is a version of the survivor:
forgetting either deletes both (they state one fact). Share copies of the merged
fact follow it (``write.copies``): they are retracted, reason
``original_superseded``, as when a remembered version supersedes it. Each merge
is one transaction that re-reads both facts first and skips the pair when either
changed meanwhile.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from engram.config import Config
from engram.lifecycle.consolidate.grouping import Slot, slot_of
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, SubjectScan, Update
from engram.store.open import Backend
from engram.store.predicate import OwnerSlot, Subject, Visibility
from engram.types import Record, Status, Tier
from engram.write import copies
from engram.write.decide import AUTHORITY_RANK

__all__ = ["REASON", "Merge", "find_merges", "merge", "plan_merges", "semantic_facts",
           "slot_visibility"]  # fmt: skip

_FAR = datetime(9999, 1, 1, tzinfo=UTC)
REASON = "near_duplicate_merge"


@dataclass(frozen=True, slots=True)
class Merge:
    """``loser`` merges into ``kept``."""

    kept: Record
    loser: Record


def slot_visibility(subject: Subject, slot: Slot) -> Visibility:
    """What a reader of exactly ``slot`` sees (its agent, its scope named)."""
    return OwnerSlot.of(subject.tenant_id, subject.user_id, slot.agent_id, slot.scope).visibility


def semantic_facts(
    store: Backend, subject: Subject, config: Config, now: datetime
) -> Iterator[Record]:
    """The subject's active semantic facts (every scope and agent), oldest first."""
    types = tuple(name for name, policy in config.types.items() if policy.tier == Tier.SEMANTIC)
    after: tuple[datetime, str] | None = None
    while True:
        page = store.subject_records(subject, SubjectScan(types, (Status.ACTIVE.value,), _FAR,
                                                          now, config.consolidation.page_size,
                                                          after))  # fmt: skip
        yield from (r for r in page if r.contested_with is None)
        if len(page) < config.consolidation.page_size:
            return
        after = (page[-1].observed_at, page[-1].id)


def _strength(record: Record) -> tuple[int, float, int, int, float, str]:
    return (AUTHORITY_RANK[record.authority], record.confidence, int(record.key is not None),
            int(record.agent_id is None), -record.observed_at.timestamp(), record.id)  # fmt: skip


def _value(record: Record) -> str:
    return json.dumps(record.value, sort_keys=True)


def _mergeable(kept: Record, loser: Record) -> bool:
    """A duplicate, not a conflict, no key lost, the survivor seen by the other's readers."""
    if kept.agent_id not in (None, loser.agent_id):
        return False
    if loser.key is None:
        return True
    return kept.key == loser.key and _value(kept) == _value(loser)


def find_merges(
    records: Sequence[Record], vectors: Mapping[str, NDArray[np.float32]], cosine: float
) -> list[Merge]:
    """The merges among one slot's facts (strongest first, no chains)."""
    ordered = sorted((r for r in records if r.id in vectors), key=_strength, reverse=True)
    if len(ordered) < 2:
        return []
    matrix = np.stack([vectors[r.id] for r in ordered]).astype(np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    sims = matrix @ matrix.T
    gone: set[int] = set()
    found: list[Merge] = []
    for i, kept in enumerate(ordered):
        if i in gone:
            continue
        for j in np.flatnonzero(sims[i, i + 1 :] >= cosine).tolist():
            j += i + 1
            if j not in gone and _mergeable(kept, ordered[j]):
                gone.add(j)
                found.append(Merge(kept, ordered[j]))
    return found


def _slots(facts: Sequence[Record]) -> dict[tuple[Slot, str], list[Record]]:
    """Facts by scope and governance (any agent): only facts under one governance merge."""
    slots: dict[tuple[Slot, str], list[Record]] = {}
    for record in facts:
        key = dataclasses.replace(slot_of(record), agent_id=None)
        slots.setdefault((key, record.sensitivity.value), []).append(record)
    return slots


def _vectors(
    store: Backend, subject: Subject, slot: Slot, facts: Sequence[Record], model: str
) -> dict[str, NDArray[np.float32]]:
    """The stored vectors of ``facts``, read under each owning agent's visibility."""
    found: dict[str, NDArray[np.float32]] = {}
    for agent in sorted({r.agent_id or "" for r in facts}):
        vis = slot_visibility(subject, dataclasses.replace(slot, agent_id=agent or None))
        ids = [r.id for r in facts if (r.agent_id or "") == agent]
        found.update(store.vectors(vis, ids, model))
    return found


def plan_merges(store: Backend, subject: Subject, config: Config, now: datetime) -> list[Merge]:
    """Every merge the subject's facts call for (nothing when no vectors are stored)."""
    model = store.vector_model()
    if model is None:
        return []
    found: list[Merge] = []
    for (slot, _), facts in _slots(list(semantic_facts(store, subject, config, now))).items():
        if len(facts) < 2:
            continue
        vectors = _vectors(store, subject, slot, facts, model)
        found += find_merges(facts, vectors, config.consolidation.merge_cosine)
    return found


def _closed(record: Record, now: datetime) -> datetime:
    """When a merged-away fact stops being valid: now, never before it started."""
    end = record.valid_to or now
    return record.valid_from if record.valid_from is not None and end < record.valid_from else end


def merge(store: Backend, subject: Subject, pair: Merge, actor: str, now: datetime) -> bool:
    """Carry out one merge in its own transaction; False when either fact changed
    since it was planned (a concurrent correction, retraction or deletion)."""
    vis = slot_visibility(subject, slot_of(pair.loser))
    with store.transaction():
        current = {r.id: r for r in store.read(vis, [pair.kept.id, pair.loser.id])}
        if current.get(pair.kept.id) != pair.kept or current.get(pair.loser.id) != pair.loser:
            return False
        loser = pair.loser.replace(status=Status.SUPERSEDED, superseded_by=pair.kept.id,
                                   valid_to=_closed(pair.loser, now), updated_at=now)  # fmt: skip
        entry = AuditEntry(now, subject.tenant_id, subject.user_id, actor, "SUPERSEDE",
                           [pair.kept.id, pair.loser.id], REASON)  # fmt: skip
        store.apply([Update(loser), Audit(entry)])
        copies.follow(store, subject.tenant_id, [pair.loser.id], Status.RETRACTED,
                      "original_superseded", actor, now)  # fmt: skip
    return True
