"""The write path in order: propose -> policy -> decide -> commit -> index.

``WritePath.prepare`` runs the policy and embeds in batch with no lock held
(the embedder may be slow: a model, a network call), then
``WritePath.commit_prepared`` decides and commits each proposal inside the
caller's transaction, reading the write slot there, so every decision is made
on what the transaction sees and a batch lands whole or not at all.
``WritePath.write`` is both steps for one owner slot in one transaction.

A prepared batch is made of units (``write.passages.Unit``): one proposal, or
the passages of one long content, which are decided together (``_group``) and
give one ``WriteResult``. A unit whose content (any passage of it) was forgotten
or erased meets its tombstone inside the transaction (``write.tombstones``): it
is REJECTed ``tombstoned``, or, stated again explicitly, written and the
tombstone lifted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from engram.config import Config
from engram.embed import Embedder
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, SlotProbe, Update
from engram.store.open import Backend
from engram.store.predicate import OwnerSlot
from engram.types import Operation, Proposal, Record, Status, WriteResult
from engram.write import passages, policy, tombstones
from engram.write.commit import Owner, Plan, carry_out, commit, new_record, plan
from engram.write.decide import Decision, SlotState, decide
from engram.write.index import embed_contents, vectors_enabled
from engram.write.passages import Unit
from engram.write.policy import Verdict, VerdictKind
from engram.write.proposal import content_hash
from engram.write.slots import slot_versions

__all__ = ["Part", "Prepared", "WritePath", "slot_probes", "slot_state"]

_ACTIVE = (Status.ACTIVE.value,)
# One prepared proposal: with its verdict, content hash and vector (None: none).
Part = tuple[Proposal, Verdict, str, NDArray[np.float32] | None]


@dataclass(frozen=True, slots=True)
class Prepared:
    """Proposals with their policy verdicts, content hashes and vectors, computed
    before any lock is taken. ``model`` is the embedder the vectors came from
    (None when no vectors were made). ``sizes`` are the proposals of each unit in
    order (empty: one each)."""

    proposals: tuple[Proposal, ...]
    verdicts: tuple[Verdict, ...]
    hashes: tuple[str, ...]
    vectors: tuple[NDArray[np.float32] | None, ...]
    model: str | None
    sizes: tuple[int, ...] = ()

    def units(self) -> Iterator[slice]:
        """The span of each unit's proposals."""
        start = 0
        for size in self.sizes or (1,) * len(self.proposals):
            yield slice(start, start + size)
            start += size

    def subset(self, indexes: Sequence[int]) -> Prepared:
        """The proposals at ``indexes`` (in that order) with what was computed for them;
        only for a batch of single proposals."""
        assert not self.sizes or set(self.sizes) == {1}
        return Prepared(
            tuple(self.proposals[i] for i in indexes), tuple(self.verdicts[i] for i in indexes),
            tuple(self.hashes[i] for i in indexes), tuple(self.vectors[i] for i in indexes),
            self.model,
        )  # fmt: skip


class WritePath:
    """Runs proposals through policy, decision, commit and indexing."""

    def __init__(self, store: Backend, embedder: Embedder, config: Config) -> None:
        self._store = store
        self._embedder = embedder
        self._config = config

    def write(self, owner: Owner, units: Sequence[Unit], now: datetime) -> list[WriteResult]:
        """Write every unit for ``owner`` in one transaction; results in order."""
        prepared = self.prepare_units(units)
        with self._store.transaction():
            return self.commit_prepared(owner, prepared, now)

    def prepare(self, proposals: Sequence[Proposal]) -> Prepared:
        """Policy verdicts, hashes and vectors: the slow part, done with no lock held."""
        return self.prepare_units([Unit("", (p,)) for p in proposals])

    def prepare_units(self, units: Sequence[Unit]) -> Prepared:
        """``prepare`` for units: a unit judged whole gives its verdict to every part."""
        proposals = tuple(p for unit in units for p in unit.parts)
        verdicts = tuple(unit.verdict or policy.evaluate(p, self._config.write)
                         for unit in units for p in unit.parts)  # fmt: skip
        hashes = tuple(content_hash(p.content) for p in proposals)
        vectors, model = self._vectors(proposals, verdicts)
        sizes = tuple(len(unit.parts) for unit in units)
        return Prepared(proposals, verdicts, hashes, vectors, model, sizes)

    def commit_prepared(
        self, owner: Owner, prepared: Prepared, now: datetime,
        unseen: Callable[[Record], bool] | None = None,
    ) -> list[WriteResult]:  # fmt: skip
        """Decide and commit prepared units, one result each; the caller holds the
        transaction.

        ``unseen`` names stored versions the decision of a single proposal does not
        meet (an import's versions of other rows of its file, which the exporting
        store has already decided). Vectors made under another model than the
        store's (the store was re-indexed meanwhile) are dropped rather than mixed in."""
        parts = self.parts(prepared)
        buried = tombstones.buried(self._store, owner, prepared.hashes)
        results = []
        for span in prepared.units():
            unit = parts[span]
            met = [digest for _, _, digest, _ in unit if digest in buried]
            if met and not tombstones.lifts(owner, unit[0][0]):
                results.append(commit(self._store, tombstones.refusal(), None, None, unit[0][0],
                                      owner, now))  # fmt: skip
                continue
            if len(unit) == 1:
                results.append(self._one(owner.slot, owner, *unit[0], now, unseen=unseen))
            else:
                results.append(self._group(owner, unit, now))
            if met and results[-1].record is not None:
                written = [results[-1].record.id, *results[-1].passages[1:]]
                tombstones.lift(self._store, owner, met, written, now)
        return results

    @property
    def store(self) -> Backend:
        """The store this write path writes to."""
        return self._store

    def parts(self, prepared: Prepared) -> list[Part]:
        """Each prepared proposal with its verdict, hash and vector; no vectors when
        they were made under another model than the store's (it was re-indexed
        meanwhile), rather than mixing models."""
        model = prepared.model
        if model is not None and self._store.vector_model() not in (None, model):
            model = None
        vectors = prepared.vectors if model else (None,) * len(prepared.vectors)
        return list(zip(prepared.proposals, prepared.verdicts, prepared.hashes, vectors,
                        strict=True))  # fmt: skip

    def _group(
        self, owner: Owner,
        parts: Sequence[Part],
        now: datetime,
    ) -> WriteResult:  # fmt: skip
        """The passages of one long content: all CONFIRM the same group already stored,
        or all are new (ADD, or DISPUTE when quarantined) and linked to the first.
        They never confirm other memories one by one (which would leave a hole)."""
        slot, verdict = owner.slot, parts[0][1]
        digests = [digest for _, _, digest, _ in parts]
        stored = None
        if verdict.kind == VerdictKind.ACCEPT:
            stored = passages.stored_group(self._store, owner, [p for p, *_ in parts], digests)
        if stored is not None:
            return passages.combined([
                self._one(slot, owner, p, v, d, None, now, SlotState(duplicates=(record,)))
                for (p, v, d, _), record in zip(parts, stored, strict=True)
            ])  # fmt: skip
        head = self._one(slot, owner, *parts[0], now, SlotState())
        assert head.record is not None
        rest = [self._one(slot, owner, passages.linked(p, head.record.id), v, d, vector, now,
                          SlotState()) for p, v, d, vector in parts[1:]]  # fmt: skip
        return passages.combined([head, *rest])

    def _vectors(
        self, proposals: Sequence[Proposal], verdicts: Sequence[Verdict]
    ) -> tuple[tuple[NDArray[np.float32] | None, ...], str | None]:
        wanted = [i for i, v in enumerate(verdicts) if v.kind != VerdictKind.REJECT]
        out: list[NDArray[np.float32] | None] = [None] * len(proposals)
        if not wanted or not vectors_enabled(self._store, self._embedder):
            return tuple(out), None
        matrix = embed_contents(self._embedder, [proposals[i].content for i in wanted],
                                self._config.write.embed_timeout_seconds)  # fmt: skip
        for row, index in enumerate(wanted):
            out[index] = matrix[row]
        return tuple(out), self._embedder.model_id

    def _one(
        self,
        slot: OwnerSlot,
        owner: Owner,
        proposal: Proposal,
        verdict: Verdict,
        digest: str,
        vector: NDArray[np.float32] | None,
        now: datetime,
        state: SlotState | None = None,
        unseen: Callable[[Record], bool] | None = None,
    ) -> WriteResult:
        """Decide and commit one proposal against ``state`` (by default, what the
        slot holds now, less the ``unseen`` versions)."""
        done = self.plan_one(slot, owner, proposal, verdict, digest, vector, now, state, unseen)
        return carry_out(self._store, done, now)

    def plan_one(
        self,
        slot: OwnerSlot,
        owner: Owner,
        proposal: Proposal,
        verdict: Verdict,
        digest: str,
        vector: NDArray[np.float32] | None,
        now: datetime,
        state: SlotState | None = None,
        unseen: Callable[[Record], bool] | None = None,
    ) -> Plan:
        """Decide one proposal against ``state`` (by default, what the slot holds now,
        less the ``unseen`` versions) and plan its writes; versions past their
        retention take no part (they are stored as expired now, ``_live``)."""
        if state is None:
            state = _without(self._slot_state(slot, proposal, digest, verdict), unseen)
        state = self._live(state, owner, now)
        threshold = self._config.write.conflict_threshold
        decision = decide(proposal, verdict, state, digest, threshold)
        decision = _confined(_promoted(owner, decision, state))
        if proposal.private or proposal.agent_scope == "agent":
            decision = _kept_apart(owner, decision)
        else:
            owner = _inherited(owner, decision)
        decision = _unlinked(owner, decision)
        new = None
        if decision.creates:
            model = self._embedder.model_id if vector is not None else None
            proposal = _with_sensitivity(proposal, verdict)
            new = new_record(proposal, owner, decision, now, self._config, digest, model)
        return plan(decision, new, vector, proposal, owner, now)

    def _live(self, state: SlotState, owner: Owner, now: datetime) -> SlotState:
        """``state`` without the versions past their retention: they read as expired
        everywhere, so they decide nothing and are never confirmed back to life. A
        keyed one is stored as expired here (what every read already reports), which
        frees its place as the key's one active version; a contest it was in ends."""
        due = {r.id: r for r in state.key_versions if _due(r, now)}
        if not due:
            if not any(_due(r, now) for r in state.duplicates):
                return state
            return SlotState(state.key_versions, [r for r in state.duplicates if not _due(r, now)])
        live = []
        changes: list[Change] = []
        for record in state.key_versions:
            if record.id in due:
                continue
            if record.contested_with in due:
                record = record.replace(contested_with=None, updated_at=now)
                changes.append(Update(record))
            live.append(record)
        changes += [Update(record.replace(status=Status.EXPIRED, contested_with=None,
                                          updated_at=now)) for record in due.values()]  # fmt: skip
        entry = AuditEntry(now, owner.tenant_id, owner.user_id, "retention",
                           Operation.EXPIRE.value, list(due), "retention_ended")  # fmt: skip
        changes.append(Audit(entry))
        self._store.apply(changes)
        duplicates = [r for r in state.duplicates if r.id not in due and not _due(r, now)]
        return SlotState(live, duplicates)

    def _slot_state(
        self, slot: OwnerSlot, proposal: Proposal, digest: str, verdict: Verdict
    ) -> SlotState:
        """The slot's active versions of the key and of the content, read after the
        slot is locked for both (``lock_slot``), so no concurrent writer of the same
        key or content decides on the same state."""
        probes = slot_probes(slot, proposal, digest, verdict)
        return slot_state(proposal, slot_versions(self._store, probes)) if probes else SlotState()


def slot_probes(slot: OwnerSlot, proposal: Proposal, digest: str,
                verdict: Verdict) -> list[SlotProbe]:  # fmt: skip
    """What a write of ``proposal`` to ``slot`` reads to decide: the active versions of
    its key (when keyed), then those of its content; nothing unless it is accepted."""
    if verdict.kind != VerdictKind.ACCEPT:
        return []
    probes = [SlotProbe(slot, _ACTIVE, content_hash=digest)]
    if proposal.key:
        probes.insert(0, SlotProbe(slot, _ACTIVE, key=proposal.key))
    return probes


def slot_state(proposal: Proposal, found: Sequence[Sequence[Record]]) -> SlotState:
    """The state the answers of ``slot_probes`` (in order) describe."""
    versions = found[0] if proposal.key else []
    return SlotState(key_versions=versions, duplicates=found[-1])


def _without(state: SlotState, unseen: Callable[[Record], bool] | None) -> SlotState:
    if unseen is None:
        return state
    return SlotState([r for r in state.key_versions if not unseen(r)],
                     [r for r in state.duplicates if not unseen(r)])  # fmt: skip


def _due(record: Record, now: datetime) -> bool:
    return record.expires_at is not None and record.expires_at <= now


def _promoted(owner: Owner, decision: Decision, state: SlotState) -> Decision:
    """What the user states, confirming a copy their agent held, becomes the user's
    own version (visible to every agent) instead of confirming the agent's copy,
    unless a stronger version of the user's own stays (it was not retired)."""
    held = decision.confirm
    if owner.agent_id is not None or held is None or held.agent_id is None:
        return decision
    retired = {record.id for record in decision.retire}
    if any(r.agent_id is None and r.id not in retired for r in state.key_versions):
        return decision
    reason = "the user stated what an agent of theirs held: now the user's, for every agent"
    return Decision(Operation.SUPERSEDE, "to_user", reason, Status.ACTIVE,
                    supersede=(held, *decision.retire))  # fmt: skip


def _confined(decision: Decision) -> Decision:
    """A confirmation of an agent's version never retires the user's own: every other
    agent would find it superseded by a version it may not read."""
    held = decision.confirm
    if held is None or held.agent_id is None:
        return decision
    kept = tuple(record for record in decision.retire if record.agent_id is not None)
    return decision if kept == decision.retire else dataclasses.replace(decision, retire=kept)


def _kept_apart(owner: Owner, decision: Decision) -> Decision:
    """A private or ``agent_scope="agent"`` write of an agent stays with it and leaves
    the user's own versions as they are: it replaces only the agent's versions, and a
    contradiction of the user's version alone is a new memory of the agent's."""
    if owner.agent_id is None:
        return decision
    own = tuple(record for record in decision.supersede if record.agent_id is not None)
    contest = decision.operation == Operation.CONTEST
    if own == decision.supersede and not (contest and _users(decision.linked)):
        return decision
    if own:
        return dataclasses.replace(decision, supersede=own)
    reason = "kept with this agent; the user's own version is unchanged"
    return Decision(Operation.ADD, "agent_own", reason, Status.ACTIVE)


def _unlinked(owner: Owner, decision: Decision) -> Decision:
    """A version of the user's own never names an agent's (its contest partner is
    then none; a contradiction evidence cannot settle is a new memory of the user's)."""
    linked = decision.linked
    if owner.agent_id is not None or linked is None or linked.agent_id is None:
        return decision
    if decision.operation == Operation.CONTEST:
        return Decision(Operation.ADD, "new", "new memory of the user's own", Status.ACTIVE)
    return dataclasses.replace(decision, linked=None)


def _users(record: Record | None) -> bool:
    return record is not None and record.agent_id is None


def _inherited(owner: Owner, decision: Decision) -> Owner:
    """An agent's new version of a key takes the place of the user's own version it
    replaces or contests: it stays visible to every agent of the user."""
    if owner.agent_id is None or decision.new_status != Status.ACTIVE:
        return owner
    met = [*decision.supersede, *([decision.linked] if decision.linked else [])]
    if any(record.agent_id is None for record in met):
        return dataclasses.replace(owner, agent_id=None)
    return owner


def _with_sensitivity(proposal: Proposal, verdict: Verdict) -> Proposal:
    if verdict.sensitivity == proposal.sensitivity:
        return proposal
    return dataclasses.replace(proposal, sensitivity=verdict.sensitivity)
