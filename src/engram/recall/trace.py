"""The recall trace: ids and numbers only, never memory content.

The pipeline fills one ``Trace`` per recall (stage sizes and timings, channel
counts and failures, rejections by reason, merges, conflict groups, selected
items with score components). ``to_dict`` is what callers and the trace store
see; a test checks that no stored content ever appears in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChannelReport", "StageReport", "Trace"]


@dataclass(slots=True)
class StageReport:
    """Sizes in and out of one stage and how long it took."""

    name: str
    count_in: int
    count_out: int
    ms: float


@dataclass(slots=True)
class ChannelReport:
    """One candidate channel: how many it found, how long, and whether it failed."""

    name: str
    count: int = 0
    ms: float = 0.0
    error: str | None = None


@dataclass(slots=True)
class Trace:
    """Everything a recall decided, as ids and numbers."""

    trace_id: str
    mode: str = ""
    intent: str = ""
    status: str = ""
    as_of: str | None = None
    stages: list[StageReport] = field(default_factory=list)
    channels: dict[str, ChannelReport] = field(default_factory=dict)
    rejections: dict[str, list[str]] = field(default_factory=dict)
    merges: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    selected: list[dict[str, Any]] = field(default_factory=list)
    tokens_used: int = 0
    token_budget: int = 0
    total_ms: float = 0.0

    def reject(self, reason: str, record_id: str) -> None:
        """Count one rejection under ``reason``."""
        self.rejections.setdefault(reason, []).append(record_id)

    def stage_ms(self) -> dict[str, float]:
        """Milliseconds per stage, in pipeline order."""
        return {stage.name: stage.ms for stage in self.stages}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view: per-stage counts, rejections, scores; no content."""
        return {
            "trace_id": self.trace_id,
            "mode": self.mode,
            "intent": self.intent,
            "status": self.status,
            "as_of": self.as_of,
            "stages": [
                {"name": s.name, "in": s.count_in, "out": s.count_out, "ms": round(s.ms, 3)}
                for s in self.stages
            ],
            "channels": {
                name: {"count": c.count, "ms": round(c.ms, 3), "error": c.error}
                for name, c in self.channels.items()
            },
            "rejections": {reason: list(ids) for reason, ids in self.rejections.items()},
            "rejection_counts": {reason: len(ids) for reason, ids in self.rejections.items()},
            "merges": list(self.merges),
            "conflicts": list(self.conflicts),
            "selected": list(self.selected),
            "tokens_used": self.tokens_used,
            "token_budget": self.token_budget,
            "total_ms": round(self.total_ms, 3),
        }
