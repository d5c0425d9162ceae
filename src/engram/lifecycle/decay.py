"""Decay pruning's rules, as pure functions of a record, a time and ``SweepConfig``.

The retention score blends importance (set at write time), recency (halving every
``recency_half_life_days`` since the last access or confirmation, whichever is
later; a record never recalled counts from its creation or last confirmation)
and access frequency (``log1p(count) / log1p(saturation)``, capped at 1). Age is
a gate: nothing younger than ``min_age_days`` is pruned. A clock earlier than a
record's own times (a sweep run with a ``now`` in the past) gives age 0 and
recency 1: such a record is never pruned.

``prunable`` is the whole rule; ``never_pruned`` is its part that no
configuration changes: explicit authority, or importance at or above
``protect_importance``.
"""

from __future__ import annotations

import math
from datetime import datetime

from engram.lifecycle.sweep_config import SweepConfig
from engram.types import Authority, Record, Status

__all__ = [
    "EXPLICIT", "PRUNED_STATUSES", "last_used", "never_pruned", "prunable", "retention_score",
]  # fmt: skip

EXPLICIT = (Authority.EXPLICIT_USER.value, Authority.EXPLICIT_ADMIN.value)
PRUNED_STATUSES = (Status.ACTIVE.value, Status.DISPUTED.value)
_DAY = 86_400.0


def _days(later: datetime, earlier: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds() / _DAY)


def last_used(record: Record) -> datetime:
    """The latest of the last access, the last change or confirmation, the creation."""
    return max(t for t in (record.last_accessed_at, record.updated_at, record.created_at) if t)


def retention_score(record: Record, now: datetime, config: SweepConfig) -> float:
    """The record's retention score at ``now``, in [0, 1] when the weights sum to 1."""
    recency = math.exp(-math.log(2.0) * _days(now, last_used(record))
                       / config.recency_half_life_days)  # fmt: skip
    frequency = min(1.0, math.log1p(record.access_count) / math.log1p(config.access_saturation))
    return (config.importance_weight * record.importance + config.recency_weight * recency
            + config.access_weight * frequency)  # fmt: skip


def never_pruned(record: Record, config: SweepConfig) -> bool:
    """Explicit authority or importance at or above the protection threshold."""
    return record.authority in EXPLICIT or record.importance >= config.protect_importance


def prunable(record: Record, now: datetime, config: SweepConfig) -> bool:
    """Whether decay pruning deletes ``record`` at ``now`` (a live chain head, old
    enough, unprotected, scoring below ``prune_below``)."""
    if not config.prune or never_pruned(record, config):
        return False
    if record.status not in PRUNED_STATUSES or record.superseded_by is not None:
        return False
    age = (now - record.created_at).total_seconds() / _DAY  # negative: written "later"
    if age < config.min_age_days:  # (clock skew, an import): never old enough
        return False
    return retention_score(record, now, config) < config.prune_below
