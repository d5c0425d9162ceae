"""Stage 5: dedup. One survivor per meaning, with the others recorded as ``merged_from``.

Duplicates are: the same key and value, the same normalised content hash, or a
vector closer than ``near_duplicate_cosine`` to a kept candidate or to one of its
exact duplicates (so a paraphrase of an exact duplicate joins it). The survivor
is the strongest: narrower scope, then higher authority, then confidence, then
most recent. Two values of one key are never duplicates, however alike their
text: they are a conflict, and the conflicts stage must see both.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Hashable, Mapping

import numpy as np
from numpy.typing import NDArray

from engram.config import RecallConfig
from engram.kernels import pairwise_dots
from engram.passage_refs import group_of
from engram.recall.model import Candidate
from engram.recall.trace import Trace
from engram.scope import scope_kind

__all__ = ["dedupe"]


Strength = Callable[[Candidate], tuple[float, float, float, float]]


def _strength(candidates: list[Candidate], config: RecallConfig) -> Strength:
    """The survivor order, computed once per candidate for the three passes."""
    table = {
        c.id: (
            config.scope_weights.get(scope_kind(c.record.scope), 0.0),
            config.authority_weights.get(c.record.authority.value, 0.0),
            c.record.confidence,
            c.record.observed_at.timestamp(),
        )
        for c in candidates
    }
    return lambda cand: table[cand.id]


def _merge(winner: Candidate, loser: Candidate, trace: Trace, why: str) -> None:
    winner.merged_from.extend([loser.id, *loser.merged_from])
    for name, score in loser.channels.items():
        winner.channels.setdefault(name, score)
    trace.merges.append({"kept": winner.id, "merged": loser.id, "by": why})


def _value_of(cand: Candidate) -> str | None:
    value = cand.record.value
    return None if value is None else json.dumps(value, sort_keys=True)


def _conflicting(a: Candidate, b: Candidate) -> bool:
    """Never near-duplicates: two values of one key (a conflict to resolve), or two
    passages of one long memory (each holds text the other does not)."""
    same_key = a.record.key is not None and a.record.key == b.record.key
    if same_key and _value_of(a) != _value_of(b):
        return True
    group = group_of(a.record)
    return group is not None and group == group_of(b.record)


def _group(
    candidates: list[Candidate], label: Callable[[Candidate], Hashable | None], why: str,
    strength: Strength, trace: Trace,
) -> list[Candidate]:  # fmt: skip
    best: dict[Hashable, Candidate] = {}
    out: list[Candidate] = []
    for cand in sorted(candidates, key=strength, reverse=True):
        tag = label(cand)
        if tag is not None and tag in best and not _conflicting(best[tag], cand):
            _merge(best[tag], cand, trace, why)
            continue
        if tag is not None:
            best.setdefault(tag, cand)
        out.append(cand)
    return out


def _key_value(cand: Candidate) -> Hashable | None:
    value = _value_of(cand)
    return None if cand.record.key is None or value is None else (cand.record.key, value)


_BLOCK = 48  # rows of ``_close`` per product


def _close(
    queries: NDArray[np.float32], matrix: NDArray[np.float32], rows: list[int],
    owner: list[int], cosine: float,
) -> NDArray[np.bool_]:  # fmt: skip
    """``close[r, m]``: row ``r``'s vector is within ``cosine`` of member ``m``'s and
    ``m`` belongs to a stronger candidate (``owner[m] < rows[r]``; both ascend).

    Only those pairs are compared: a block of rows against the members owned by
    candidates stronger than its last row, about half the products of the whole
    matrix. Each dot product is computed on its own (``pairwise_dots``), so its
    value does not depend on the block it was computed in."""
    close = np.zeros((len(rows), len(owner)), dtype=bool)
    for lo in range(0, len(rows), _BLOCK):
        hi = min(lo + _BLOCK, len(rows))
        cols = bisect.bisect_left(owner, rows[hi - 1])
        if cols:
            sims = pairwise_dots(queries[lo:hi], matrix[:cols])  # no BLAS threads
            close[lo:hi, :cols] = sims >= cosine
    close &= np.array(owner)[None, :] < np.array(rows)[:, None]  # only stronger groups
    return close


def _near_duplicates(
    candidates: list[Candidate], vectors: Mapping[str, NDArray[np.float32]],
    strength: Strength, config: RecallConfig, trace: Trace,
) -> list[Candidate]:  # fmt: skip
    """Greedy, strongest first: a candidate too close to a stronger kept candidate, or to
    an exact duplicate merged into it by key or content hash, joins it. Near-duplicate
    merges do not extend a group further, so paraphrases never chain."""
    ordered = sorted(candidates, key=strength, reverse=True)
    rows = [i for i, c in enumerate(ordered) if c.vector is not None]
    if len(rows) < 2:
        return ordered
    members = [(i, vectors[m]) for i, c in enumerate(ordered)
               for m in (c.id, *c.merged_from) if m in vectors]  # fmt: skip
    owner = [i for i, _ in members]
    queries = np.stack([ordered[i].vector for i in rows])  # type: ignore[misc]
    close = _close(queries, np.stack([v for _, v in members]), rows, owner,
                   config.near_duplicate_cosine)  # fmt: skip
    merged: set[int] = set()
    for row in np.flatnonzero(close.any(axis=1)).tolist():
        index = rows[row]
        kept = sorted({owner[col] for col in np.flatnonzero(close[row]).tolist()} - merged)
        twin = next((k for k in kept if not _conflicting(ordered[k], ordered[index])), None)
        if twin is not None:
            merged.add(index)
            _merge(ordered[twin], ordered[index], trace, "near_duplicate")
    return [c for i, c in enumerate(ordered) if i not in merged]


def dedupe(candidates: list[Candidate], config: RecallConfig, trace: Trace) -> list[Candidate]:
    """Collapse duplicates, keeping the strongest of each group."""
    vectors = {c.id: c.vector for c in candidates if c.vector is not None}
    strength = _strength(candidates, config)
    out = _group(candidates, _key_value, "key_value", strength, trace)
    out = _group(out, lambda c: c.record.content_hash, "content_hash", strength, trace)
    out = _near_duplicates(out, vectors, strength, config, trace)
    order = {c.id: i for i, c in enumerate(candidates)}
    return sorted(out, key=lambda c: order[c.id])
