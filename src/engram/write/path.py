"""The write path in order: propose -> policy -> decide -> commit -> index.

``WritePath.write`` takes validated proposals for one owner slot, runs the
policy and embeds in batch outside the transaction, then decides and commits
each proposal inside ONE transaction, so a batch lands whole or not at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from engram.config import Config
from engram.embed import Embedder
from engram.store.base import Store
from engram.store.predicate import OwnerSlot
from engram.types import Proposal, Status, WriteResult
from engram.write import policy
from engram.write.commit import Owner, commit, new_record
from engram.write.decide import SlotState, decide
from engram.write.index import embed_contents, vectors_enabled
from engram.write.policy import Verdict, VerdictKind
from engram.write.proposal import content_hash

__all__ = ["WritePath"]

_ACTIVE = (Status.ACTIVE.value,)


class WritePath:
    """Runs proposals through policy, decision, commit and indexing."""

    def __init__(self, store: Store, embedder: Embedder, config: Config) -> None:
        self._store = store
        self._embedder = embedder
        self._config = config

    def write(
        self, owner: Owner, proposals: Sequence[Proposal], now: datetime
    ) -> list[WriteResult]:
        """Write every proposal for ``owner`` in one transaction; results in order."""
        verdicts = [policy.evaluate(p, self._config.write) for p in proposals]
        hashes = [content_hash(p.content) for p in proposals]
        vectors = self._vectors(proposals, verdicts)
        slot = OwnerSlot(owner.tenant_id, owner.user_id, owner.agent_id, owner.scope)
        results = []
        with self._store.transaction():
            for proposal, verdict, digest, vector in zip(
                proposals, verdicts, hashes, vectors, strict=True
            ):
                results.append(self._one(slot, owner, proposal, verdict, digest, vector, now))
        return results

    def _vectors(
        self, proposals: Sequence[Proposal], verdicts: Sequence[Verdict]
    ) -> list[NDArray[np.float32] | None]:
        wanted = [i for i, v in enumerate(verdicts) if v.kind != VerdictKind.REJECT]
        out: list[NDArray[np.float32] | None] = [None] * len(proposals)
        if not wanted or not vectors_enabled(self._store, self._embedder):
            return out
        matrix = embed_contents(self._embedder, [proposals[i].content for i in wanted])
        for row, index in enumerate(wanted):
            out[index] = matrix[row]
        return out

    def _one(
        self,
        slot: OwnerSlot,
        owner: Owner,
        proposal: Proposal,
        verdict: Verdict,
        digest: str,
        vector: NDArray[np.float32] | None,
        now: datetime,
    ) -> WriteResult:
        state = self._slot_state(slot, proposal, digest, verdict)
        threshold = self._config.write.conflict_threshold
        decision = decide(proposal, verdict, state, digest, threshold)
        new = None
        if decision.creates:
            model = self._embedder.model_id if vector is not None else None
            proposal = _with_sensitivity(proposal, verdict)
            new = new_record(proposal, owner, decision, now, self._config, digest, model)
        return commit(self._store, decision, new, vector, proposal, owner, now)

    def _slot_state(
        self, slot: OwnerSlot, proposal: Proposal, digest: str, verdict: Verdict
    ) -> SlotState:
        if verdict.kind != VerdictKind.ACCEPT:
            return SlotState()
        versions = self._store.slot_by_key(slot, proposal.key, _ACTIVE) if proposal.key else []
        duplicates = self._store.slot_by_hash(slot, digest, _ACTIVE)
        return SlotState(key_versions=versions, duplicates=duplicates)


def _with_sensitivity(proposal: Proposal, verdict: Verdict) -> Proposal:
    if verdict.sensitivity == proposal.sensitivity:
        return proposal
    return dataclasses.replace(proposal, sensitivity=verdict.sensitivity)
