"""Step 2 of the write path: the write policy, a pure verdict over one proposal.

A proposal is accepted, rejected (nothing is stored) or quarantined (stored as
``disputed``: never active, surfaced for confirmation). Each verdict carries a
short reason code and a sentence for the caller; neither contains the content.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engram.config import WritePolicy
from engram.types import Proposal, Sensitivity
from engram.write import detectors

__all__ = ["Verdict", "VerdictKind", "evaluate"]


class VerdictKind(StrEnum):
    """What the policy decided."""

    ACCEPT = "accept"
    REJECT = "reject"
    QUARANTINE = "quarantine"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The policy's decision with a machine code and a human reason."""

    kind: VerdictKind
    code: str
    reason: str
    sensitivity: Sensitivity


def _reject(code: str, reason: str, proposal: Proposal) -> Verdict:
    return Verdict(VerdictKind.REJECT, code, reason, proposal.sensitivity)


def evaluate(proposal: Proposal, policy: WritePolicy) -> Verdict:
    """Apply every rule in order; the first that objects decides."""
    text = proposal.content
    if not text:
        return _reject("empty", "content is empty", proposal)
    size = len(text.encode())
    if size > policy.max_content_bytes:
        reason = f"content is {size} bytes; the limit is {policy.max_content_bytes}"
        return _reject("oversized", reason, proposal)
    if policy.reject_transient_chatter and detectors.is_transient_chatter(text):
        return _reject("transient", "content-free chatter is not worth remembering", proposal)
    secrets = detectors.find_secrets(text) if policy.reject_secrets else []
    if secrets:
        kinds = ", ".join(sorted({f.kind for f in secrets}))
        return _reject("secret", f"content holds a secret ({kinds}); secrets are never stored",
                       proposal)  # fmt: skip
    return _sensitive_or_accept(proposal, policy)


def _sensitive_or_accept(proposal: Proposal, policy: WritePolicy) -> Verdict:
    personal = detectors.find_personal_data(proposal.content)
    sensitivity = proposal.sensitivity
    if personal and sensitivity == Sensitivity.LOW:
        sensitivity = Sensitivity.MEDIUM
    needs_basis = sensitivity != Sensitivity.LOW and policy.personal_data_needs_consent
    if needs_basis and proposal.consent_basis is None:
        kinds = ", ".join(sorted({f.kind for f in personal})) or f"sensitivity {sensitivity}"
        reason = f"sensitive personal data ({kinds}) needs a consent_basis"
        return Verdict(VerdictKind.REJECT, "needs_consent", reason, sensitivity)
    untrusted = proposal.source.kind in policy.untrusted_sources
    if untrusted and detectors.looks_like_instruction(proposal.content):
        reason = (
            f"instruction-like text from an untrusted source ({proposal.source.kind}) "
            "is kept only as disputed"
        )
        return Verdict(VerdictKind.QUARANTINE, "untrusted_instruction", reason, sensitivity)
    return Verdict(VerdictKind.ACCEPT, "accepted", "passed the write policy", sensitivity)
