"""Caller-driven changes to an existing memory: correct, retract, expire.

A correction is a SUPERSEDE with a new version (history is kept); a retraction
marks a version wrong; an expiry closes its validity. Each runs in one
transaction with an audit entry, and ends a contest the record was part of.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from engram.config import Config
from engram.embed import Embedder
from engram.errors import InvalidArgument
from engram.store.audit import AuditEntry
from engram.store.base import Store
from engram.store.predicate import NO_AGENT, NO_USER, OwnerSlot, Visibility
from engram.store.rows import to_micros
from engram.types import Authority, Operation, Proposal, Record, Status, WriteResult
from engram.write import policy
from engram.write.commit import Owner, commit, new_record
from engram.write.decide import Decision
from engram.write.index import embed_contents, vectors_enabled
from engram.write.policy import VerdictKind
from engram.write.proposal import content_hash

__all__ = ["correct", "expire", "retract"]

_CHANGEABLE = (Status.ACTIVE, Status.DISPUTED)


def owner_of(record: Record, actor: str) -> Owner:
    """The write slot an existing record lives in."""
    return Owner(record.tenant_id, record.user_id or NO_USER, record.agent_id or NO_AGENT,
                 record.scope, actor)  # fmt: skip


def _changeable(store: Store, vis: Visibility, record: Record) -> list[Record]:
    if record.status not in _CHANGEABLE:
        raise InvalidArgument(
            f"record {record.id} is {record.status}; only active or disputed versions "
            "can be changed (see history for the current version)"
        )
    partner = store.get(vis, record.contested_with) if record.contested_with else None
    return [record] + ([partner] if partner and partner.status == Status.ACTIVE else [])


def _correction_targets(store: Store, vis: Visibility, record: Record) -> list[Record]:
    """The record, its contest partner and every other active version of its key in its
    slot: the correction becomes the one active version (a disputed record's link may
    point at a version that has since been superseded)."""
    targets = _changeable(store, vis, record)
    if record.key is not None:
        slot = OwnerSlot(record.tenant_id, record.user_id or NO_USER,
                         record.agent_id or NO_AGENT, record.scope)  # fmt: skip
        known = {t.id for t in targets}
        active = store.slot_by_key(slot, record.key, (Status.ACTIVE.value,))
        targets += [r for r in active if r.id not in known]
    return targets


def correct(
    store: Store, embedder: Embedder, config: Config, vis: Visibility, record: Record,
    content: str, value: object, actor: str, now: datetime,
) -> WriteResult:  # fmt: skip
    """Supersede ``record`` (and its contest partner) with a user-stated new version."""
    targets = _correction_targets(store, vis, record)
    proposal = Proposal(
        content=content.strip(), type=record.type, scope=record.scope, key=record.key,
        value=record.value if value is None else value, authority=Authority.EXPLICIT_USER,
        confidence=1.0, observed_at=now, source=record.source, sensitivity=record.sensitivity,
        purpose=record.purpose, consent_basis=record.consent_basis, retention=record.retention,
        importance=record.importance, private=record.private,
    )  # fmt: skip
    verdict = policy.evaluate(proposal, config.write)
    owner = owner_of(record, actor)
    if verdict.kind != VerdictKind.ACCEPT:
        decision = Decision(Operation.REJECT, verdict.code, verdict.reason)
        with store.transaction():
            return commit(store, decision, None, None, proposal, owner, now)
    proposal = dataclasses.replace(proposal, sensitivity=verdict.sensitivity)
    decision = Decision(Operation.SUPERSEDE, "correction", "corrected by the user",
                        Status.ACTIVE, supersede=tuple(targets))  # fmt: skip
    vector = None
    if vectors_enabled(store, embedder):
        vector = embed_contents(embedder, [proposal.content])[0]
    digest = content_hash(proposal.content)
    with store.transaction():
        model = embedder.model_id if vector is not None else None
        new = new_record(proposal, owner, decision, now, config, digest, model)
        return commit(store, decision, new, vector, proposal, owner, now)


def _finish(
    store: Store, vis: Visibility, record: Record, changed: Record, operation: Operation,
    code: str, reason: str, actor: str, now: datetime,
) -> WriteResult:  # fmt: skip
    with store.transaction():
        store.update(changed)
        related = []
        if record.contested_with:
            partner = store.get(vis, record.contested_with)
            if partner is not None and partner.contested_with == record.id:
                store.update(partner.replace(contested_with=None, updated_at=now))
                related.append(partner.id)
        owner = owner_of(record, actor)
        entry = AuditEntry(to_micros(now) or 0, owner.tenant_id, owner.user_id, actor,
                           operation.value, [record.id, *related], code)  # fmt: skip
        store.append_audit(entry)
    return WriteResult(operation, changed, reason, related=related)


def retract(
    store: Store, vis: Visibility, record: Record, reason: str, actor: str, now: datetime
) -> WriteResult:
    """Mark ``record`` wrong: it stays in history but is never recalled."""
    _changeable(store, vis, record)
    changed = record.replace(status=Status.RETRACTED, contested_with=None, updated_at=now)
    return _finish(store, vis, record, changed, Operation.RETRACT, "retracted", reason, actor, now)


def expire(store: Store, vis: Visibility, record: Record, actor: str, now: datetime) -> WriteResult:
    """Close ``record``'s validity now: it is history from here on."""
    _changeable(store, vis, record)
    end = record.valid_to if record.valid_to and record.valid_to < now else now
    if record.valid_from is not None and end < record.valid_from:
        end = record.valid_from
    changed = record.replace(status=Status.EXPIRED, valid_to=end, contested_with=None,
                             updated_at=now)  # fmt: skip
    return _finish(store, vis, record, changed, Operation.EXPIRE, "expired",
                   "validity ended", actor, now)  # fmt: skip
