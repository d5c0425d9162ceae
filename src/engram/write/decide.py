"""Step 3 of the write path: choose the operation, in pure code.

Given the policy verdict and the current state of the write slot (active
versions of the same key, active records with the same content hash), decide
ADD, CONFIRM, SUPERSEDE, DISPUTE, CONTEST or REJECT, with a reason. Nothing here
touches storage; ``commit`` carries the decision out.

Authority before recency: a lower authority never supersedes a higher one (it
becomes DISPUTE). Equal authority supersedes when the new statement is
confident; when both sides are below the conflict threshold neither wins and
the pair is CONTESTed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engram.types import Authority, Operation, Proposal, Record, Status
from engram.write.policy import Verdict, VerdictKind

__all__ = ["AUTHORITY_RANK", "Decision", "SlotState", "decide"]

AUTHORITY_RANK: dict[Authority, int] = {
    Authority.EXPLICIT_USER: 6,
    Authority.EXPLICIT_ADMIN: 6,
    Authority.CONFIRMED_SYSTEM: 5,
    Authority.TOOL_OBSERVATION: 4,
    Authority.SHARED: 3,
    Authority.DERIVED_SUMMARY: 2,
    Authority.MODEL_INFERENCE: 1,
}


@dataclass(frozen=True, slots=True)
class SlotState:
    """What the write slot holds now: active versions of the key, and duplicates."""

    key_versions: Sequence[Record] = ()
    duplicates: Sequence[Record] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """The chosen operation and every record it touches."""

    operation: Operation
    code: str
    reason: str
    new_status: Status | None = None
    confirm: Record | None = None
    supersede: tuple[Record, ...] = ()
    linked: Record | None = None
    retire: tuple[Record, ...] = field(default_factory=tuple)

    @property
    def creates(self) -> bool:
        """True when a new record is inserted."""
        return self.new_status is not None


def _same_value(proposal: Proposal, record: Record, content_hash: str) -> bool:
    if proposal.value is not None or record.value is not None:
        return bool(proposal.value == record.value)
    return content_hash == record.content_hash


def decide(proposal: Proposal, verdict: Verdict, state: SlotState, content_hash: str,
           conflict_threshold: float) -> Decision:  # fmt: skip
    """Pick the operation for ``proposal`` in a slot in ``state``."""
    if verdict.kind == VerdictKind.REJECT:
        return Decision(Operation.REJECT, verdict.code, verdict.reason)
    if verdict.kind == VerdictKind.QUARANTINE:
        return Decision(Operation.DISPUTE, verdict.code, verdict.reason, Status.DISPUTED)
    if proposal.key is None or not state.key_versions:
        same = [r for r in state.duplicates if r.key == proposal.key]  # a key is never lost
        if same:
            return _confirm(same[0], (), "duplicate", "same content already stored")
        return Decision(Operation.ADD, "new", "new memory", Status.ACTIVE)
    return _against_versions(proposal, state.key_versions, content_hash, conflict_threshold)


def _confirm(record: Record, others: Sequence[Record], code: str, reason: str) -> Decision:
    return Decision(Operation.CONFIRM, code, reason, confirm=record, retire=tuple(others))


def _against_versions(
    proposal: Proposal, versions: Sequence[Record], content_hash: str, threshold: float
) -> Decision:
    new_rank = AUTHORITY_RANK[proposal.authority]
    for record in versions:
        if _same_value(proposal, record, content_hash):
            # it ends the contest of the versions it may replace, never a stronger one
            others = tuple(r for r in versions if r.id != record.id
                           and AUTHORITY_RANK[r.authority] <= new_rank)  # fmt: skip
            reason = "same key and value" + (", which ends the contest" if others else "")
            return _confirm(record, others, "same_value", reason)
    top_rank = max(AUTHORITY_RANK[r.authority] for r in versions)
    strongest = max(versions, key=lambda r: (AUTHORITY_RANK[r.authority], r.confidence))
    if new_rank < top_rank:
        reason = (
            f"{proposal.authority} may not replace {strongest.authority}; kept as disputed "
            "for confirmation"
        )
        return Decision(Operation.DISPUTE, "lower_authority", reason, Status.DISPUTED,
                        linked=strongest)  # fmt: skip
    if new_rank > top_rank or proposal.confidence >= threshold:
        reason = f"new value of {proposal.key} with authority {proposal.authority}"
        return Decision(Operation.SUPERSEDE, "new_value", reason, Status.ACTIVE,
                        supersede=tuple(versions))  # fmt: skip
    if len(versions) == 1 and versions[0].confidence < threshold:
        reason = (
            f"conflicting values of {proposal.key} with equal authority and confidence below "
            f"{threshold}: both kept active as a contested pair until confirmed"
        )
        return Decision(Operation.CONTEST, "contested", reason, Status.ACTIVE, linked=versions[0])
    reason = (
        f"a low-confidence contradiction of {proposal.key} does not displace the current "
        "value; kept as disputed"
    )
    return Decision(Operation.DISPUTE, "weaker_evidence", reason, Status.DISPUTED, linked=strongest)
