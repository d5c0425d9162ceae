"""Step 4 of the write path: carry a decision out inside one transaction.

Builds the new version (if any), updates the versions it confirms, supersedes or
contests, inserts the vector (step 5, ``index``, computed it beforehand) and
appends one audit entry. The caller wraps all of it in ``store.transaction()``,
so a failure anywhere leaves the store exactly as it was. The share copies of
the versions a decision supersedes are retracted with them (``write.copies``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from engram.config import RETENTION_PERIODS, Config
from engram.ids import new_id
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, Insert, Store, Update
from engram.store.predicate import OwnerSlot
from engram.types import Operation, Proposal, Record, Status, WriteResult
from engram.write import copies
from engram.write.decide import Decision

__all__ = [
    "Owner",
    "Plan",
    "carry_out",
    "commit",
    "follow_retired",
    "new_record",
    "plan",
    "renewed_expiry",
]


@dataclass(frozen=True, slots=True)
class Owner:
    """Where a write lands and who made it.

    ``user_id`` is None for the tenant's global memories; ``agent_id`` is the agent
    the new memory belongs to (None for the user's own); ``writer_agent`` the agent
    of the context that wrote it, whose memories the write may meet
    (``OwnerSlot.key_sql``). ``stated`` is True for the caller's own words
    (``remember``, ``correct``), False for a proposer, an import, a consolidation
    or a share: only a stated explicit write lifts a tombstone (``write.tombstones``)."""

    tenant_id: str
    user_id: str | None
    agent_id: str | None
    scope: str
    actor: str
    writer_agent: str | None = None
    stated: bool = False

    @property
    def slot(self) -> OwnerSlot:
        """The write slot, reaching the writer's own agent memories."""
        return OwnerSlot.of(self.tenant_id, self.user_id, self.agent_id, self.scope,
                            self.writer_agent or self.agent_id)  # fmt: skip


def new_record(
    proposal: Proposal,
    owner: Owner,
    decision: Decision,
    now: datetime,
    config: Config,
    content_hash: str,
    embedding_model: str | None,
) -> Record:
    """The version ``decision`` creates, linked to what it supersedes or contests."""
    assert decision.new_status is not None
    policy = config.policy(proposal.type)
    retention = proposal.retention or policy.retention_for(proposal.authority)
    period = RETENTION_PERIODS[retention]
    previous = _predecessor(decision.supersede, owner.agent_id)
    return Record(
        id=new_id(),
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        agent_id=owner.agent_id,
        scope=owner.scope,
        tier=policy.tier,
        type=proposal.type,
        key=proposal.key,
        value=proposal.value,
        content=proposal.content,
        authority=proposal.authority,
        confidence=proposal.confidence,
        source=proposal.source,
        observed_at=proposal.observed_at or now,
        valid_from=proposal.valid_from,
        valid_to=proposal.valid_to,
        created_at=now,
        updated_at=now,
        status=decision.new_status,
        version=max((r.version for r in decision.supersede), default=0) + 1,
        supersedes=previous.id if previous else None,
        superseded_by=None,
        sensitivity=proposal.sensitivity,
        purpose=proposal.purpose,
        consent_basis=proposal.consent_basis,
        retention=retention,
        expires_at=None if period is None else now + period,
        importance=proposal.importance,
        access_count=0,
        last_accessed_at=None,
        private=proposal.private,
        embedding_model=embedding_model,
        content_hash=content_hash,
        contested_with=decision.linked.id if decision.linked else None,
    )


def _predecessor(replaced: tuple[Record, ...], agent_id: str | None) -> Record | None:
    """The version a new one in ``agent_id``'s slot names as its predecessor: one of its
    own slot, else (for an agent's version) any it replaces; a version of the user's own
    never names an agent's, which the user's other agents may not read."""
    same = [r for r in replaced if r.agent_id == agent_id]
    if same:
        return same[0]
    return replaced[0] if replaced and agent_id is not None else None


def _close_at(new: Record, old: Record) -> datetime:
    """When the old version stops being valid: the new one's start, else when it was learned."""
    end = new.valid_from or new.observed_at
    if old.valid_from is not None and end < old.valid_from:
        return old.valid_from
    return end


def _links(decision: Decision, new: Record | None, now: datetime) -> list[Change]:
    """The updates of the versions ``decision`` supersedes, contests or retires."""
    changes: list[Change] = []
    for old in decision.supersede:
        assert new is not None
        end = _close_at(new, old)
        if old.valid_to is not None and old.valid_to < end:
            end = old.valid_to
        changes.append(Update(old.replace(status=Status.SUPERSEDED, superseded_by=new.id,
                                          valid_to=end, contested_with=None,
                                          updated_at=now)))  # fmt: skip
    if decision.operation == Operation.CONTEST and decision.linked and new is not None:
        changes.append(Update(decision.linked.replace(contested_with=new.id, updated_at=now)))
    winner = decision.confirm
    for loser in decision.retire:
        assert winner is not None
        changes.append(Update(loser.replace(status=Status.SUPERSEDED, superseded_by=winner.id,
                                            valid_to=loser.valid_to or now, contested_with=None,
                                            updated_at=now)))  # fmt: skip
    return changes


def renewed_expiry(record: Record, now: datetime) -> datetime | None:
    """When ``record`` expires if it is confirmed at ``now``: retention counts from
    the last confirmation or access, never shortened (an access renews in steps,
    in storage: ``store.renewal``)."""
    period = RETENTION_PERIODS[record.retention]
    if record.expires_at is None or period is None:
        return record.expires_at
    return max(record.expires_at, now + period)


def _confirmed(record: Record, proposal: Proposal, now: datetime, retired: bool) -> Record:
    observed = max(record.observed_at, proposal.observed_at or now)
    return record.replace(
        confidence=max(record.confidence, proposal.confidence),
        observed_at=observed,
        updated_at=now,
        contested_with=None if retired else record.contested_with,
        expires_at=renewed_expiry(record, now),
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """What carrying out one decision writes, before it is applied: the updates of
    the versions it links (``links``), the new version (``new``, inserted with
    ``vector``) or the confirmed one (``confirmed``), the audit entry, the result to
    report and the ids whose share copies retire with them (``retired``)."""

    links: tuple[Change, ...]
    new: Record | None
    vector: NDArray[np.float32] | None
    confirmed: Record | None
    entry: AuditEntry
    result: WriteResult
    retired: tuple[str, ...]

    def writes(self) -> list[Change]:
        """The record changes in order: links first (the database allows one active,
        uncontested version per key and checks it per statement), then the new or
        confirmed version."""
        if self.new is not None:
            model = self.new.embedding_model
            return [*self.links, Insert(self.new, self.vector if model else None)]
        return [*self.links, *([Update(self.confirmed)] if self.confirmed else [])]

    def with_new(self, record: Record) -> Plan:
        """The plan writing ``record`` (the same id, fields adjusted) as the new version."""
        assert self.new is not None
        assert record.id == self.new.id
        return replace(self, new=record, result=replace(self.result, record=record))


def plan(
    decision: Decision,
    new: Record | None,
    vector: NDArray[np.float32] | None,
    proposal: Proposal,
    owner: Owner,
    now: datetime,
) -> Plan:
    """What carrying out ``decision`` writes (``Plan``), touching no store."""
    confirmed = None
    if new is None and decision.confirm is not None:
        confirmed = _confirmed(decision.confirm, proposal, now, bool(decision.retire))
    result_record = new or confirmed
    touched = [r.id for r in (*decision.supersede, *decision.retire)]
    if decision.linked is not None:
        touched.append(decision.linked.id)
    ids = ([result_record.id] if result_record else []) + touched
    entry = AuditEntry(now, owner.tenant_id, owner.user_id, owner.actor,
                       decision.operation.value, ids, decision.code)  # fmt: skip
    retired = tuple(r.id for r in (*decision.supersede, *decision.retire))
    result = WriteResult(operation=decision.operation, record=result_record,
                         reason=decision.reason, superseded=list(retired),
                         related=touched)  # fmt: skip
    return Plan(tuple(_links(decision, new, now)), new, vector, confirmed, entry, result,
                retired)  # fmt: skip


def carry_out(store: Store, done: Plan, now: datetime) -> WriteResult:
    """Apply one plan in one batch of changes (the caller holds the transaction),
    then retract the share copies of the versions it retired."""
    store.apply([*done.writes(), Audit(done.entry)])
    follow_retired(store, [done], now)
    return done.result


def follow_retired(store: Store, plans: list[Plan], now: datetime) -> None:
    """Retract the live share copies of what each plan retired (``write.copies``)."""
    for done in plans:
        copies.follow(store, done.entry.tenant_id, done.retired, Status.RETRACTED,
                      "original_superseded", done.entry.actor, now)  # fmt: skip


def commit(
    store: Store,
    decision: Decision,
    new: Record | None,
    vector: NDArray[np.float32] | None,
    proposal: Proposal,
    owner: Owner,
    now: datetime,
) -> WriteResult:
    """Apply ``decision`` in one batch of changes; the caller holds the transaction.

    The versions a new one replaces are closed before it is inserted: the database
    allows one active, uncontested version per key and checks it per statement."""
    return carry_out(store, plan(decision, new, vector, proposal, owner, now), now)
