"""Conversational context for the rerank stage: a memory next to a relevant one is
likely relevant too (the answer follows the question; a follow-up explains it).

For episodic candidates of one scope, ordered by ``observed_at``, each gets a
``context`` component: for each distance d up to ``context_window`` positions
(within ``context_max_gap_seconds``), the better neighbour's relevance over d,
summed. ``context_relevance`` (the neighbour's absolute relevance times
``context_factor``, over the distance) can carry a memory over the floor, so an
answer turn that shares no words with the question is still found.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.config import RecallConfig
from engram.recall.model import Candidate

__all__ = ["add_context"]


def _base(cand: Candidate, rc: RecallConfig) -> float:
    w, c = rc.weights, cand.components
    total = w.semantic + w.lexical
    return (w.semantic * c["semantic"] + w.lexical * c["lexical"]) / total if total else 0.0


def _absolute(cand: Candidate) -> float:
    return max(cand.components["semantic"], cand.components["coverage"])


def _score_group(group: Sequence[Candidate], rc: RecallConfig) -> None:
    base = [_base(c, rc) for c in group]
    absolute = [_absolute(c) for c in group]
    times = [c.record.observed_at.timestamp() for c in group]
    for i, cand in enumerate(group):
        total = best_abs = 0.0
        for distance in range(1, rc.context_window + 1):
            near = [
                j
                for j in (i - distance, i + distance)
                if 0 <= j < len(group) and abs(times[j] - times[i]) <= rc.context_max_gap_seconds
            ]
            if near:
                total += max(base[j] for j in near) / distance
                best_abs = max(best_abs, max(absolute[j] for j in near) / distance)
        cand.components["context"] = total
        cand.components["context_relevance"] = rc.context_factor * best_abs


def add_context(candidates: Sequence[Candidate], rc: RecallConfig) -> None:
    """Set ``context`` and ``context_relevance`` on every candidate (0 if not episodic)."""
    groups: dict[str, list[Candidate]] = {}
    for cand in candidates:
        cand.components["context"] = cand.components["context_relevance"] = 0.0
        if cand.record.type in rc.context_types:
            groups.setdefault(cand.record.scope, []).append(cand)
    for group in groups.values():
        group.sort(key=lambda c: (c.record.observed_at, c.id))
        _score_group(group, rc)
