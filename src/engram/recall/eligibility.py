"""Stage 4: eligibility. Hard filters, never scores: a forbidden memory cannot survive
on a small score. Every rejection is counted by reason in the trace.

* status: active, or a superseded or expired version whose closed validity
  interval holds ``as_of`` (the version valid then, or the current value until a
  future-dated change starts);
* validity: ``valid_from <= t < valid_to`` at ``as_of`` (default now). For a past
  ``as_of`` an unknown ``valid_from`` is read as "not before it was observed";
* retention: not past ``expires_at`` (judged at ``now``, not ``as_of``);
* confidence: at or above the type's floor;
* sensitivity and purpose: high-sensitivity memories only for a matching purpose;
  a memory stored for one purpose is not used for another.
"""

from __future__ import annotations

from datetime import datetime

from engram.config import Config
from engram.recall.model import Candidate, Plan
from engram.recall.trace import Trace
from engram.types import Record, Sensitivity, Status

__all__ = ["filter_eligible", "rejection"]


def _valid(record: Record, plan: Plan) -> bool:
    when = plan.as_of
    start = record.valid_from
    if start is None and plan.time_travel:
        start = record.observed_at
    if start is not None and when < start:
        return False
    return record.valid_to is None or when < record.valid_to


def _status_ok(record: Record, plan: Plan) -> bool:
    """Active, or a closed version (superseded, expired) whose interval is checked next."""
    if record.status == Status.ACTIVE:
        return True
    return record.status in (Status.SUPERSEDED, Status.EXPIRED) and record.valid_to is not None


def _purpose_ok(record: Record, purpose: str | None) -> str | None:
    if record.purpose and purpose and record.purpose != purpose:
        return "purpose_mismatch"
    if record.sensitivity == Sensitivity.HIGH and (purpose is None or purpose != record.purpose):
        return "sensitivity"
    return None


def rejection(record: Record, plan: Plan, config: Config, now: datetime) -> str | None:
    """Why ``record`` may not be used for this request, or None if it may."""
    if not _status_ok(record, plan):
        return f"status_{record.status.value}"
    if not _valid(record, plan):
        return "not_valid_at_as_of"
    if record.expires_at is not None and record.expires_at <= now:
        return "retention_expired"
    if record.confidence < config.policy(record.type).confidence_floor:
        return "below_confidence_floor"
    return _purpose_ok(record, plan.scope.purpose)


def filter_eligible(
    candidates: list[Candidate], plan: Plan, config: Config, trace: Trace
) -> list[Candidate]:
    """Keep eligible candidates; record every rejection's reason in the trace."""
    kept = []
    for cand in candidates:
        reason = rejection(cand.record, plan, config, plan.now)
        if reason is None:
            kept.append(cand)
        else:
            trace.reject(reason, cand.id)
    return kept
