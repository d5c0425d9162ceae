"""Conversational context for the rerank stage: a memory next to a relevant one is
likely relevant too (the answer follows the question; a follow-up explains it).

For episodic candidates of one scope, ordered by ``observed_at``, each gets a
``context`` component: for each distance d up to ``context_window`` positions
(within ``context_max_gap_seconds``), the better neighbour's relevance over d,
summed. ``context_relevance`` (the neighbour's absolute relevance times
``context_factor``, over the distance) can carry a memory over the floor, so an
answer turn that shares no words with the question is still found.

A session is a run of one scope's episodic candidates with no gap longer than
``context_max_gap_seconds`` between consecutive ones. Each episode's ``session``
component is the best base relevance of the *other* episodes of its session over
the best base relevance among all episodic candidates: a turn of the
conversation that the question is about gains, even when its own words differ
from the question's; a lone episode gains nothing, so it never outranks a
constraint just for being an episode.
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
    gap, last = rc.context_max_gap_seconds, len(group) - 1
    for i, cand in enumerate(group):
        total = best_abs = 0.0
        at = times[i]
        for distance in range(1, rc.context_window + 1):
            lo, hi = i - distance, i + distance  # the nearer-in-list neighbour first on ties
            near_lo = lo >= 0 and abs(times[lo] - at) <= gap
            near_hi = hi <= last and abs(times[hi] - at) <= gap
            if near_lo and near_hi:
                total += max(base[lo], base[hi]) / distance
                best_abs = max(best_abs, max(absolute[lo], absolute[hi]) / distance)
            elif near_lo or near_hi:
                j = lo if near_lo else hi
                total += base[j] / distance
                best_abs = max(best_abs, absolute[j] / distance)
        cand.components["context"] = total
        cand.components["context_relevance"] = rc.context_factor * best_abs


def _sessions(group: Sequence[Candidate], rc: RecallConfig) -> list[list[Candidate]]:
    """Split a time-ordered group where consecutive episodes are too far apart."""
    sessions: list[list[Candidate]] = []
    for cand in group:
        last = sessions[-1][-1].record.observed_at if sessions else None
        if last is None or (cand.record.observed_at - last).total_seconds() > (
            rc.context_max_gap_seconds
        ):
            sessions.append([])
        sessions[-1].append(cand)
    return sessions


def _score_sessions(groups: Sequence[Sequence[Candidate]], rc: RecallConfig) -> None:
    sessions = [s for group in groups for s in _sessions(group, rc)]
    bases = [[_base(c, rc) for c in session] for session in sessions]
    top = max((max(b) for b in bases), default=0.0)
    if top <= 0.0:
        return
    for session, base in zip(sessions, bases, strict=True):
        first = max(range(len(base)), key=base.__getitem__)
        second = max((b for i, b in enumerate(base) if i != first), default=0.0)
        for i, cand in enumerate(session):
            cand.components["session"] = (second if i == first else base[first]) / top


def add_context(candidates: Sequence[Candidate], rc: RecallConfig) -> None:
    """Set ``context``, ``context_relevance`` and ``session`` on every candidate (0 if
    not episodic)."""
    groups: dict[str, list[Candidate]] = {}
    for cand in candidates:
        c = cand.components
        c["context"] = c["context_relevance"] = c["session"] = 0.0
        if cand.record.type in rc.context_types:
            groups.setdefault(cand.record.scope, []).append(cand)
    for group in groups.values():
        group.sort(key=lambda c: (c.record.observed_at, c.id))
        _score_group(group, rc)
    _score_sessions(list(groups.values()), rc)
