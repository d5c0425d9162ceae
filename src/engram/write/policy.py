"""Step 2 of the write path: the write policy, a pure verdict over one proposal.

A proposal is accepted, rejected (nothing is stored) or quarantined (stored as
``disputed``: never active, surfaced for confirmation). Each verdict carries a
short reason code and a sentence for the caller; neither contains the content.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from engram.config import WritePolicy
from engram.types import Proposal, Sensitivity
from engram.write import detectors

__all__ = ["Verdict", "VerdictKind", "evaluate", "stored_texts"]


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


def stored_texts(proposal: Proposal) -> Iterator[tuple[str, str]]:
    """Every text field that is stored and comes back in recall, get and export.

    ``value`` is scanned as its JSON text, so ``{"api_key": "..."}`` still reads as an
    assignment and nested lists and mappings are covered.
    """
    yield "content", proposal.content
    if proposal.key:
        yield "key", proposal.key
    if proposal.value is not None:
        yield "value", json.dumps(proposal.value, ensure_ascii=False)
    if proposal.source.ref:
        yield "source.ref", proposal.source.ref


def _kinds(findings: list[detectors.Finding]) -> str:
    return ", ".join(sorted({f.kind for f in findings}))


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
    for name, field_text in stored_texts(proposal) if policy.reject_secrets else ():
        secrets = detectors.find_secrets(field_text)
        if secrets:
            reason = f"{name} holds a secret ({_kinds(secrets)}); secrets are never stored"
            return _reject("secret", reason, proposal)
    return _sensitive_or_accept(proposal, policy)


def _personal_data(proposal: Proposal) -> list[tuple[str, detectors.Finding]]:
    """Personal-data findings of every stored field, each with the field's name."""
    return [
        (name, finding)
        for name, field_text in stored_texts(proposal)
        for finding in detectors.find_personal_data(field_text)
    ]


def _raised(declared: Sensitivity, kinds: set[str]) -> Sensitivity:
    """Personal data is at least MEDIUM; Art. 9 special categories are HIGH."""
    if kinds & detectors.ART9_KINDS:
        return Sensitivity.HIGH
    if kinds and declared == Sensitivity.LOW:
        return Sensitivity.MEDIUM
    return declared


def _instruction_like(proposal: Proposal) -> bool:
    """Content or value (the fields recall renders) reads as an instruction."""
    rendered = (text for name, text in stored_texts(proposal) if name in {"content", "value"})
    return any(detectors.looks_like_instruction(text) for text in rendered)


def _sensitive_or_accept(proposal: Proposal, policy: WritePolicy) -> Verdict:
    personal = _personal_data(proposal)
    sensitivity = _raised(proposal.sensitivity, {f.kind for _, f in personal})
    needs_basis = sensitivity != Sensitivity.LOW and policy.personal_data_needs_consent
    if needs_basis and proposal.consent_basis is None:
        found = sorted({f"{f.kind} in {name}" if name != "content" else f.kind
                        for name, f in personal})  # fmt: skip
        kinds = ", ".join(found) or f"sensitivity {sensitivity}"
        reason = f"sensitive personal data ({kinds}) needs a consent_basis"
        return Verdict(VerdictKind.REJECT, "needs_consent", reason, sensitivity)
    untrusted = proposal.source.kind in policy.untrusted_sources
    if untrusted and _instruction_like(proposal):
        reason = (
            f"instruction-like text from an untrusted source ({proposal.source.kind}) "
            "is kept only as disputed"
        )
        return Verdict(VerdictKind.QUARANTINE, "untrusted_instruction", reason, sensitivity)
    return Verdict(VerdictKind.ACCEPT, "accepted", "passed the write policy", sensitivity)
