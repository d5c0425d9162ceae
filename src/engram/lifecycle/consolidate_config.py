"""Configuration of the sleep cycle: which episodes, how they group, summaries, merges.

``Config.consolidation`` (``engram.config``) holds a ``ConsolidationConfig``;
``docs/defaults.md`` lists its defaults (a test compares the table with this
class). The run itself is ``lifecycle.consolidate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engram.errors import ConfigError

__all__ = ["ConsolidationConfig"]


@dataclass(frozen=True, slots=True)
class ConsolidationConfig:
    """The sleep cycle (``Engram.consolidate``): which episodes, how they are grouped,
    how long a summary may be, when facts merge, how long a consolidator's lease lasts.

    Episodes (``episode_types``) observed more than ``min_age_days`` before ``now``
    are grouped by session (their owner, scope and governance, and no gap longer than
    ``session_gap_minutes``), then by topic within a session: a group takes at least
    ``min_topic_episodes`` before an episode less similar than ``topic_similarity``
    to it starts the next, and at most ``max_group_episodes``. Each group becomes
    one ``summary_type`` record of at most ``summary_max_chars`` characters. Active
    semantic facts of one slot whose vectors are at least ``merge_cosine`` alike
    merge. ``lease_seconds`` bounds how long a consolidator that died keeps a user
    locked; ``page_size`` is how many records one scan reads.
    """

    min_age_days: float = 7.0
    episode_types: tuple[str, ...] = ("episode", "incident")
    summary_type: str = "summary"
    session_gap_minutes: float = 60.0
    topic_similarity: float = 0.2
    min_topic_episodes: int = 3
    max_group_episodes: int = 16
    summary_max_chars: int = 1000
    merge_cosine: float = 0.92
    lease_seconds: float = 600.0
    page_size: int = 500

    def __post_init__(self) -> None:
        """Refuse values no run could use (a negative age, an empty group, NaN)."""
        positive = ("min_age_days", "session_gap_minutes", "lease_seconds")
        for name in positive:
            if not 0 <= getattr(self, name) < math.inf:
                raise ConfigError(f"consolidation.{name} must be finite and >= 0")
        counts = ("min_topic_episodes", "max_group_episodes", "page_size")
        for name in counts:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"consolidation.{name} must be an integer >= 1")
        if not 1 <= self.max_group_episodes <= 256:  # limits.MAX_DERIVED_FROM
            raise ConfigError("consolidation.max_group_episodes must be at most 256")
        if not 200 <= self.summary_max_chars <= 8000:
            raise ConfigError("consolidation.summary_max_chars must be in [200, 8000]")
        for name in ("topic_similarity", "merge_cosine"):
            if not -1.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"consolidation.{name} must be in [-1, 1]")
        if not self.episode_types:
            raise ConfigError("consolidation.episode_types must name at least one type")
        if self.summary_type in self.episode_types:
            raise ConfigError("consolidation.summary_type must not be one of its episode_types")
