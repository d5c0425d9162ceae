"""Stage 7: conflicts. Candidates sharing a key but not a value are resolved in order:

1. higher authority;
2. narrower scope (every candidate here is visible, so both scopes apply);
3. the newer version when both are confirmed (confidence at or above the
   ambiguity threshold);
4. recency, unless both are below the threshold.

A contested pair from the write path, or equal authority and scope with both
confidences below the threshold, is left unresolved: neither is selected, and
the result carries a ``Conflict`` and a clarification question.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from engram.config import RecallConfig
from engram.recall.model import Candidate, Conflict
from engram.recall.trace import Trace
from engram.scope import scope_kind

__all__ = ["clarification", "resolve_conflicts"]


def _value(cand: Candidate) -> str:
    r = cand.record
    return json.dumps(r.value, sort_keys=True) if r.value is not None else r.content_hash


def _contested(group: Sequence[Candidate]) -> bool:
    ids = {c.id for c in group}
    return any(c.record.contested_with in ids for c in group)


def _pick(group: list[Candidate], rc: RecallConfig) -> tuple[Candidate | None, str]:
    """The winner of a group with at least two distinct values, and the rule that chose."""
    if _contested(group):
        return None, "contested"

    def authority(c: Candidate) -> float:
        return rc.authority_weights.get(c.record.authority.value, 0.0)

    def scope(c: Candidate) -> float:
        return rc.scope_weights.get(scope_kind(c.record.scope), 0.0)

    steps = (("authority", authority), ("scope", scope))
    for rule, measure in steps:
        best = max(measure(c) for c in group)
        group = [c for c in group if measure(c) == best]
        if len({_value(c) for c in group}) == 1:
            return group[0], rule
    confident = [c for c in group if c.record.confidence >= rc.ambiguity_confidence]
    if not confident:
        return None, "low_confidence_tie"
    newest = max(confident, key=lambda c: (c.record.version, c.record.observed_at, c.id))
    return newest, "newer_confirmed" if len(confident) > 1 else "confidence"


def _groups(candidates: list[Candidate], pool: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """Key groups of the candidates, plus contest partners that fell below the floor."""
    by_id = {c.id: c for c in pool}
    groups: dict[str, list[Candidate]] = {}
    for cand in candidates:
        if cand.record.key is not None:
            groups.setdefault(cand.record.key, []).append(cand)
    for key, group in groups.items():
        ids = {c.id for c in group}
        for cand in list(group):
            partner = by_id.get(cand.record.contested_with or "")
            if partner is not None and partner.id not in ids and partner.record.key == key:
                group.append(partner)
                ids.add(partner.id)
    return groups


def resolve_conflicts(
    candidates: list[Candidate], pool: Sequence[Candidate], rc: RecallConfig, trace: Trace
) -> tuple[list[Candidate], list[Conflict]]:
    """Drop conflict losers; return survivors (order kept) and unresolved conflicts.

    ``pool`` holds every eligible candidate, so a contested partner below the
    relevance floor still makes its pair ambiguous.
    """
    groups = _groups(candidates, pool)
    dropped: set[str] = set()
    unresolved: list[Conflict] = []
    for key, group in groups.items():
        if len({_value(c) for c in group}) < 2:
            continue
        winner, rule = _pick(list(group), rc)
        losers = [c.id for c in group if winner is None or c.id != winner.id]
        dropped.update(losers)
        trace.conflicts.append({"key": key, "ids": [c.id for c in group],
                                "kept": winner.id if winner else None, "rule": rule})  # fmt: skip
        if winner is None:
            unresolved.append(Conflict(key, tuple(c.id for c in group),
                                       tuple(c.record.value for c in group), rule))  # fmt: skip
    return [c for c in candidates if c.id not in dropped], unresolved


def clarification(conflicts: Sequence[Conflict], candidates: Sequence[Candidate]) -> str | None:
    """One question naming each unresolved key and its competing values."""
    if not conflicts:
        return None
    content = {c.id: c.record for c in candidates}
    parts = []
    for conflict in conflicts:
        options = []
        for record_id, value in zip(conflict.record_ids, conflict.values, strict=True):
            shown = value if value is not None else content[record_id].content
            options.append(f"{shown!r}")
        parts.append(f"for {conflict.key}, is it " + " or ".join(options) + "?")
    joined = "; ".join(parts)
    return f"My memory holds conflicting values: {joined} Please confirm which applies."
