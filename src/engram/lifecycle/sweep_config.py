"""Configuration of the sweep: batches, and the retention score that decay pruning uses.

``Config.sweep`` (``engram.config``) holds a ``SweepConfig``; ``docs/defaults.md``
lists its defaults (a test compares the table with this class). The score and
the rules it feeds are in ``lifecycle.decay``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engram.errors import ConfigError

__all__ = ["SweepConfig"]


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """How ``Engram.sweep`` forgets.

    ``batch_size`` records are re-read, checked and deleted per transaction, so the
    write lock is held briefly however much is due. Decay pruning (``prune``)
    deletes a memory whose retention score (``lifecycle.decay.retention_score``)
    ``importance_weight * importance + recency_weight * recency + access_weight *
    frequency`` is below ``prune_below``, where recency halves every
    ``recency_half_life_days`` since its last access or confirmation and frequency
    reaches 1 at ``access_saturation`` accesses. It never prunes a memory younger
    than ``min_age_days``, one at or above ``protect_importance``, or one with
    explicit authority (``explicit_user``, ``explicit_admin``: not configurable).
    ``consolidated_types``: memories of these types are consolidated (the
    ``Consolidator`` hook) before any is deleted.
    """

    batch_size: int = 200
    prune: bool = True
    importance_weight: float = 0.5
    recency_weight: float = 0.35
    access_weight: float = 0.15
    recency_half_life_days: float = 7.0
    access_saturation: int = 50
    prune_below: float = 0.15
    protect_importance: float = 0.5
    min_age_days: float = 30.0
    consolidated_types: frozenset[str] = frozenset({"episode"})

    def __post_init__(self) -> None:
        """Refuse values the sweep would misread (NaN compares false everywhere)."""
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ConfigError("sweep.batch_size must be an integer")
        if not 1 <= self.batch_size <= 10_000:
            raise ConfigError(f"sweep.batch_size must be in [1, 10000], got {self.batch_size}")
        if isinstance(self.access_saturation, bool) or not isinstance(self.access_saturation, int):
            raise ConfigError("sweep.access_saturation must be an integer")
        if self.access_saturation < 1:
            raise ConfigError("sweep.access_saturation must be >= 1")
        for name in ("importance_weight", "recency_weight", "access_weight", "prune_below",
                     "protect_importance"):  # fmt: skip
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"sweep.{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("recency_half_life_days", "min_age_days"):
            value = getattr(self, name)
            if not (0.0 < value < math.inf if name == "recency_half_life_days"
                    else 0.0 <= value < math.inf):  # fmt: skip
                raise ConfigError(f"sweep.{name} must be finite and positive, got {value}")
