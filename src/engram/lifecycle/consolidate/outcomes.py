"""Procedure outcomes: ``record_outcome`` and the outcomes episodes report.

A procedure's successes and failures are counted beside it (``procedure_stats``,
one row per procedure version: a corrected procedure starts afresh, its steps
changed). Recall's rerank reads the smoothed success rate
(``RecallConfig.outcome_prior``, a Beta prior). Consolidation counts the outcome
an episode reports, once (the episode is read once):

* a structured one: the episode's ``value`` is a mapping with ``procedure_id``
  and ``success`` (true or false), and optionally a numeric ``reward``;
* a stated one: the episode derives from a procedure (``source.derived_from``
  names it) and its text states success or failure, not both (the summariser's
  ``outcome`` and ``error`` sentence patterns).

Only a visible, active procedure of the episode's own user counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.config import RecallConfig
from engram.errors import InvalidArgument
from engram.lifecycle.consolidate.summarise import CATEGORIES
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, Outcome, OutcomeStats, Store
from engram.store.predicate import Subject, Visibility
from engram.types import Record, Status, Tier

__all__ = ["ProcedureOutcomes", "episode_outcomes", "record_outcome", "stated_outcome"]

MAX_REWARD = 1.0
_PATTERNS = dict(CATEGORIES)


@dataclass(frozen=True, slots=True)
class ProcedureOutcomes:
    """A procedure's counted outcomes and what recall makes of them."""

    procedure_id: str
    successes: int
    failures: int
    success_rate: float  # smoothed by the configured Beta prior
    mean_reward: float | None

    @classmethod
    def of(cls, procedure_id: str, stats: OutcomeStats, recall: RecallConfig) -> ProcedureOutcomes:
        """The view of ``stats`` under ``recall``'s prior."""
        rate = stats.success_rate(*recall.outcome_prior)
        return cls(procedure_id, stats.successes, stats.failures, rate, stats.mean_reward)


def checked_reward(reward: object) -> float | None:
    """None, or a finite number in [-1, 1]; ``InvalidArgument`` otherwise."""
    if reward is None:
        return None
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        raise InvalidArgument("reward must be None or a number between -1 and 1")
    if not (math.isfinite(reward) and -MAX_REWARD <= reward <= MAX_REWARD):
        raise InvalidArgument("reward must be None or a number between -1 and 1")
    return float(reward)


def _procedure(record: Record, now: datetime) -> Record:
    if record.tier != Tier.PROCEDURAL:
        raise InvalidArgument(f"memory {record.id!r} is a {record.type}, not a procedure")
    if record.status != Status.ACTIVE or (record.expires_at and record.expires_at <= now):
        raise InvalidArgument(f"procedure {record.id!r} is not active; record outcomes of "
                              "its current version")  # fmt: skip
    return record


def record_outcome(
    store: Store, vis: Visibility, record: Record, success: object, reward: object, actor: str,
    now: datetime, recall: RecallConfig,
) -> ProcedureOutcomes:  # fmt: skip
    """Count one outcome of the caller's procedure ``record`` in one transaction, with an
    audit entry (ids and the reason code, never content); the counts after it."""
    if not isinstance(success, bool):
        raise InvalidArgument("success must be True or False")
    amount = checked_reward(reward)
    procedure = _procedure(record, now)
    subject = Subject.of(procedure.tenant_id, procedure.user_id)
    reason = "outcome_success" if success else "outcome_failure"
    entry = AuditEntry(now, procedure.tenant_id, procedure.user_id, actor, "OUTCOME",
                       [procedure.id], reason)  # fmt: skip
    with store.transaction():
        store.apply([Outcome(subject, procedure.id, success, amount, now), Audit(entry)])
    stats = store.outcomes(vis, [procedure.id]).get(procedure.id, OutcomeStats())
    return ProcedureOutcomes.of(procedure.id, stats, recall)


def stated_outcome(text: str) -> bool | None:
    """True when ``text`` states a success and no failure, False for the reverse,
    None when it states neither or both."""
    good = _PATTERNS["outcome"].search(text) is not None
    bad = _PATTERNS["error"].search(text) is not None
    return None if good == bad else good


def _structured(value: object) -> tuple[str, bool, float | None] | None:
    if not isinstance(value, Mapping):
        return None
    procedure, success = value.get("procedure_id"), value.get("success")
    if not isinstance(procedure, str) or not isinstance(success, bool):
        return None
    try:
        return procedure, success, checked_reward(value.get("reward"))
    except InvalidArgument:
        return procedure, success, None


def _claims(episode: Record) -> list[tuple[str, bool, float | None]]:
    structured = _structured(episode.value)
    if structured is not None:
        return [structured]
    stated = stated_outcome(episode.content)
    if stated is None:
        return []
    return [(procedure_id, stated, None) for procedure_id in episode.source.derived_from]


def episode_outcomes(
    store: Store, vis: Visibility, episodes: Sequence[Record], now: datetime, actor: str
) -> list[Change]:
    """The outcome changes (with one audit entry each) the episodes report, for
    procedures ``vis`` sees that are active at ``now``."""
    claims = [(episode, claim) for episode in episodes for claim in _claims(episode)]
    if not claims:
        return []
    wanted = sorted({claim[0] for _, claim in claims})
    live = {r.id for r in store.read(vis, wanted)
            if r.tier == Tier.PROCEDURAL and r.status == Status.ACTIVE
            and (r.expires_at is None or r.expires_at > now)}  # fmt: skip
    changes: list[Change] = []
    for episode, (procedure_id, success, reward) in claims:
        if procedure_id not in live:
            continue
        subject = Subject.of(episode.tenant_id, episode.user_id)
        reason = "episode_outcome_success" if success else "episode_outcome_failure"
        entry = AuditEntry(now, episode.tenant_id, episode.user_id, actor, "OUTCOME",
                           [procedure_id, episode.id], reason)  # fmt: skip
        changes += [Outcome(subject, procedure_id, success, reward, now), Audit(entry)]
    return changes
