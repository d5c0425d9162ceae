"""Caller-driven changes to an existing memory: correct, retract, expire.

A correction is a SUPERSEDE with a new version (history is kept); a retraction
marks a version wrong; an expiry closes its validity. Each re-reads the memory
inside the one transaction that writes the change, so it decides on what is
stored now, not on what the caller read earlier: a concurrent writer cannot be
overwritten with a stale row, and a retraction or deletion is never undone by a
correction that raced it. Only the embedding of a correction's text happens
before the transaction (it may be slow and must not hold the write lock).

Share copies follow in the same transaction (``write.copies``): retracting or
correcting a memory retracts the copies other agents received of it (a
correction is a new version, which its sharer may share again), and expiring it
expires them. What consolidation derived from it (its summaries, the facts
extracted from it) is retracted with a retraction or an expiry, and the
summaries' episodes are summarised again by the next run (``write.derivations``).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from engram.config import Config
from engram.embed import Embedder
from engram.errors import Conflict, NotFound
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, SlotProbe, Update
from engram.store.open import Backend
from engram.store.predicate import OwnerSlot, Visibility
from engram.types import (
    Authority,
    Operation,
    Proposal,
    Record,
    Source,
    SourceKind,
    Status,
    WriteResult,
)
from engram.write import copies, derivations, policy, tombstones
from engram.write.commit import Owner, commit, new_record
from engram.write.decide import Decision
from engram.write.index import embed_contents, vectors_enabled
from engram.write.policy import VerdictKind
from engram.write.proposal import content_hash
from engram.write.slots import slot_versions

__all__ = ["correct", "expire", "retract"]

_CHANGEABLE = (Status.ACTIVE, Status.DISPUTED)


def owner_of(record: Record, actor: str) -> Owner:
    """The write slot an existing record lives in."""
    return Owner(record.tenant_id, record.user_id, record.agent_id, record.scope, actor)


def _reread(store: Backend, vis: Visibility, record_id: str) -> Record:
    """The record as the open transaction sees it (it may have been deleted since)."""
    found = store.read(vis, [record_id])
    if not found:
        raise NotFound(f"no memory {record_id!r} is visible to this context")
    return found[0]


def _get(store: Backend, vis: Visibility, record_id: str | None) -> Record | None:
    """A visible record by id (None for no id, or one not visible)."""
    found = store.read(vis, [record_id]) if record_id else []
    return found[0] if found else None


def _require_changeable(record: Record) -> None:
    if record.status in _CHANGEABLE:
        return
    current = f"; the current version is {record.superseded_by}" if record.superseded_by else ""
    raise Conflict(
        f"record {record.id} is {record.status}; only active or disputed versions can be "
        f"changed{current} (see history)"
    )


def _correction_targets(store: Backend, vis: Visibility, record: Record) -> list[Record]:
    """The record, its contest partner and every other active version of its key in its
    slot: the correction becomes the one active version (a disputed record's link may
    point at a version that has since been superseded)."""
    _require_changeable(record)
    partner = _get(store, vis, record.contested_with)
    targets = [record] + ([partner] if partner and partner.status == Status.ACTIVE else [])
    if record.key is not None:
        slot = OwnerSlot.of(record.tenant_id, record.user_id, record.agent_id, record.scope)
        known = {t.id for t in targets}
        probe = SlotProbe(slot, (Status.ACTIVE.value,), key=record.key)
        active = slot_versions(store, [probe])[0]
        targets += [r for r in active if r.id not in known]
    return targets


def _correction_owner(
    record: Record, targets: list[Record], owner: Owner
) -> tuple[list[Record], Owner]:
    """Where the correction of an agent's version lands: where the user's own version it
    also replaces is (every agent reads it), unless the record is private; then it
    stays with the agent and the user's version is left as it is. Either way no
    version another agent reads names one it may not."""
    if record.agent_id is None or all(t.agent_id is not None for t in targets):
        return targets, owner
    if record.private:
        return [t for t in targets if t.agent_id is not None], owner
    return targets, dataclasses.replace(owner, agent_id=None)


def _correction(record: Record, content: str, value: object, now: datetime) -> Proposal:
    """The user-stated new version of ``record``: same type, scope and key; its source
    is the conversation with the user, whatever the corrected version came from (a
    user's correction of a document's claim is the user's own statement)."""
    return Proposal(
        content=content.strip(), type=record.type, scope=record.scope, key=record.key,
        value=record.value if value is None else value, authority=Authority.EXPLICIT_USER,
        confidence=1.0, observed_at=now, source=Source(SourceKind.CONVERSATION),
        sensitivity=record.sensitivity,
        purpose=record.purpose, consent_basis=record.consent_basis, retention=record.retention,
        importance=record.importance, private=record.private,
    )  # fmt: skip


def _vector(
    store: Backend, embedder: Embedder, content: str, timeout: float | None
) -> NDArray[np.float32] | None:
    if not vectors_enabled(store, embedder):
        return None
    vector: NDArray[np.float32] = embed_contents(embedder, [content.strip()], timeout)[0]
    return vector


def correct(
    store: Backend, embedder: Embedder, config: Config, vis: Visibility, record_id: str,
    content: str, value: object, actor: str, now: datetime,
) -> WriteResult:  # fmt: skip
    """Supersede ``record_id`` (and its contest partner) with a user-stated new version.

    ``Conflict`` when the record is no longer active or disputed: a concurrent
    correction superseded it first (the message names the version that did), or it
    was retracted or expired. Two racing corrections thus never fork the chain."""
    vector = _vector(store, embedder, content, config.write.embed_timeout_seconds)
    with store.transaction():
        record = _reread(store, vis, record_id)
        targets = _correction_targets(store, vis, record)
        proposal = _correction(record, content, value, now)
        verdict = policy.evaluate(proposal, config.write)
        owner = owner_of(record, actor)
        targets, owner = _correction_owner(record, targets, owner)
        if verdict.kind != VerdictKind.ACCEPT:
            decision = Decision(Operation.REJECT, verdict.code, verdict.reason)
            return commit(store, decision, None, None, proposal, owner, now)
        proposal = dataclasses.replace(proposal, sensitivity=verdict.sensitivity)
        decision = Decision(Operation.SUPERSEDE, "correction", "corrected by the user",
                            Status.ACTIVE, supersede=tuple(targets))  # fmt: skip
        if vector is not None and store.vector_model() not in (None, embedder.model_id):
            vector = None  # re-indexed under another model meanwhile
        model = embedder.model_id if vector is not None else None
        digest = content_hash(proposal.content)
        new = new_record(proposal, owner, decision, now, config, digest, model)
        result = commit(store, decision, new, vector, proposal, owner, now)
        stated = dataclasses.replace(owner, stated=True)  # the user's own words: lifts
        if tombstones.buried(store, stated, [digest]):
            tombstones.lift(store, stated, [digest], [new.id], now)
        return result


def _finish(
    store: Backend, vis: Visibility, record: Record, changed: Record, operation: Operation,
    code: str, reason: str, actor: str, now: datetime,
) -> WriteResult:  # fmt: skip
    """Write ``changed`` and end the contest ``record`` was in; inside the transaction."""
    changes: list[Update | Audit] = [Update(changed)]
    related = []
    partner = _get(store, vis, record.contested_with)
    if partner is not None and partner.contested_with == record.id:
        changes.append(Update(partner.replace(contested_with=None, updated_at=now)))
        related.append(partner.id)
    owner = owner_of(record, actor)
    entry = AuditEntry(now, owner.tenant_id, owner.user_id, actor, operation.value,
                       [record.id, *related], code)  # fmt: skip
    store.apply([*changes, Audit(entry)])
    copies.follow(store, record.tenant_id, [record.id], changed.status, f"original_{code}",
                  actor, now)  # fmt: skip
    derivations.follow_derived(store, vis, record, f"source_{code}", actor, now)
    return WriteResult(operation, changed, reason, related=related)


def retract(
    store: Backend, vis: Visibility, record_id: str, reason: str, actor: str, now: datetime
) -> WriteResult:
    """Mark the record wrong: it stays in history but is never recalled. ``Conflict``
    when it is no longer active or disputed (e.g. a correction superseded it first:
    the caller never saw that version, so it is not retracted on their behalf)."""
    with store.transaction():
        record = _reread(store, vis, record_id)
        _require_changeable(record)
        changed = record.replace(status=Status.RETRACTED, contested_with=None, updated_at=now)
        return _finish(store, vis, record, changed, Operation.RETRACT, "retracted", reason,
                       actor, now)  # fmt: skip


def expire(
    store: Backend, vis: Visibility, record_id: str, actor: str, now: datetime
) -> WriteResult:
    """Close the record's validity now: it is history from here on (``Conflict`` as
    for ``retract``)."""
    with store.transaction():
        record = _reread(store, vis, record_id)
        _require_changeable(record)
        end = record.valid_to if record.valid_to and record.valid_to < now else now
        if record.valid_from is not None and end < record.valid_from:
            end = record.valid_from
        changed = record.replace(status=Status.EXPIRED, valid_to=end, contested_with=None,
                                 updated_at=now)  # fmt: skip
        return _finish(store, vis, record, changed, Operation.EXPIRE, "expired",
                       "validity ended", actor, now)  # fmt: skip
