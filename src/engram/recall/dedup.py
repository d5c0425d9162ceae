"""Stage 5: dedup. One survivor per meaning, with the others recorded as ``merged_from``.

Duplicates are: the same key and value, the same normalised content hash, or
vectors closer than ``near_duplicate_cosine``. The survivor is the strongest:
narrower scope, then higher authority, then confidence, then most recent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable

import numpy as np

from engram.config import RecallConfig
from engram.recall.model import Candidate
from engram.recall.trace import Trace
from engram.scope import scope_kind

__all__ = ["dedupe"]


def _strength(config: RecallConfig) -> Callable[[Candidate], tuple[float, float, float, float]]:
    def key(cand: Candidate) -> tuple[float, float, float, float]:
        r = cand.record
        return (
            config.scope_weights.get(scope_kind(r.scope), 0.0),
            config.authority_weights.get(r.authority.value, 0.0),
            r.confidence,
            r.observed_at.timestamp(),
        )

    return key


def _merge(winner: Candidate, loser: Candidate, trace: Trace, why: str) -> None:
    winner.merged_from.extend([loser.id, *loser.merged_from])
    for name, score in loser.channels.items():
        winner.channels.setdefault(name, score)
    trace.merges.append({"kept": winner.id, "merged": loser.id, "by": why})


def _group(
    candidates: list[Candidate], label: Callable[[Candidate], Hashable | None], why: str,
    config: RecallConfig, trace: Trace,
) -> list[Candidate]:  # fmt: skip
    strength = _strength(config)
    best: dict[Hashable, Candidate] = {}
    out: list[Candidate] = []
    for cand in sorted(candidates, key=strength, reverse=True):
        tag = label(cand)
        if tag is None:
            out.append(cand)
        elif tag in best:
            _merge(best[tag], cand, trace, why)
        else:
            best[tag] = cand
            out.append(cand)
    return out


def _key_value(cand: Candidate) -> Hashable | None:
    r = cand.record
    if r.key is None or r.value is None:
        return None
    return (r.key, json.dumps(r.value, sort_keys=True))


def _near_duplicates(
    candidates: list[Candidate], config: RecallConfig, trace: Trace
) -> list[Candidate]:
    """Greedy, strongest first: drop a candidate whose vector is too close to a kept one."""
    ordered = sorted(candidates, key=_strength(config), reverse=True)
    rows = [i for i, c in enumerate(ordered) if c.vector is not None]
    if len(rows) < 2:
        return ordered
    matrix = np.stack([ordered[i].vector for i in rows])  # type: ignore[misc]
    close = np.tril(matrix @ matrix.T >= config.near_duplicate_cosine, k=-1)
    suspects = set(np.flatnonzero(close.any(axis=1)).tolist())
    dropped: set[int] = set()
    for row in sorted(suspects):
        earlier = [j for j in np.flatnonzero(close[row]).tolist() if j not in dropped]
        if earlier:
            dropped.add(row)
            _merge(ordered[rows[earlier[0]]], ordered[rows[row]], trace, "near_duplicate")
    gone = {rows[row] for row in dropped}
    return [c for i, c in enumerate(ordered) if i not in gone]


def dedupe(candidates: list[Candidate], config: RecallConfig, trace: Trace) -> list[Candidate]:
    """Collapse duplicates, keeping the strongest of each group."""
    out = _group(candidates, _key_value, "key_value", config, trace)
    out = _group(out, lambda c: c.record.content_hash, "content_hash", config, trace)
    out = _near_duplicates(out, config, trace)
    order = {c.id: i for i, c in enumerate(candidates)}
    return sorted(out, key=lambda c: order[c.id])
