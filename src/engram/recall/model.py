"""Values that flow through the read path: plan, candidates, items, result.

Stages are pure functions from one of these to the next; only ``pipeline`` runs
them, times them and feeds the trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.recall.trace import Trace
from engram.scope import Scope
from engram.types import Record

__all__ = [
    "Candidate",
    "Conflict",
    "Intent",
    "Mode",
    "Plan",
    "RecallItem",
    "RecallResult",
    "RecallStatus",
]


class Mode(StrEnum):
    """Which channels a request needs (the intent gate's answer)."""

    NONE = "none"
    STRUCTURED = "structured"
    EPISODIC = "episodic"
    HYBRID = "hybrid"


class Intent(StrEnum):
    """What kind of request this is, for task fit: act, ask about the past, or ask about me."""

    ACTION = "action"
    PAST = "past"
    PROFILE = "profile"
    GENERAL = "general"


class RecallStatus(StrEnum):
    """Distinct outcomes: a miss, a failure, partial coverage and ambiguity differ."""

    OK = "ok"
    EMPTY = "empty"
    PARTIAL = "partial"
    UNAVAILABLE = "unavailable"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True, slots=True)
class Plan:
    """What to search, where, as of when, and how many candidates per channel."""

    mode: Mode
    intent: Intent
    scope: Scope
    query: str
    types: tuple[str, ...]
    statuses: tuple[str, ...]
    now: datetime
    as_of: datetime
    time_travel: bool
    limits: Mapping[str, int]
    context_seeds: int = 0
    period: tuple[datetime, datetime] | None = None


@dataclass(slots=True)
class Candidate:
    """One record on its way through the stages, with everything learned about it."""

    record: Record
    channels: dict[str, float] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    fused: float = 0.0
    vector: NDArray[np.float32] | None = None
    components: dict[str, float] = field(default_factory=dict)
    relevance: float = 0.0
    score: float = 0.0
    merged_from: list[str] = field(default_factory=list)
    reason: str = ""
    id: str = field(init=False)  # the record id (read often: a field, not a property)

    def __post_init__(self) -> None:
        self.id = self.record.id


@dataclass(frozen=True, slots=True)
class Conflict:
    """An unresolved group: same key, values that no rule could choose between."""

    key: str
    record_ids: tuple[str, ...]
    values: tuple[Any, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class RecallItem:
    """A selected memory: the record, its score, the score's parts and why it was chosen."""

    record: Record
    score: float
    components: Mapping[str, float]
    reason: str
    merged_from: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What ``recall`` returns (docs/contract.md section 7)."""

    status: RecallStatus
    items: Sequence[RecallItem]
    conflicts: Sequence[Conflict]
    clarification: str | None
    prompt: str
    trace: Trace
    tokens: int = 0

    @property
    def ids(self) -> list[str]:
        """Selected record ids, best first."""
        return [item.record.id for item in self.items]
