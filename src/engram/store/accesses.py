"""A usage flush's touches, coalesced: one statement per visibility, not per recall.

A background flush writes about a second of recalls at once, each a
``contract.Touch`` (the visible ids one recall selected, and when). Each touch as
its own statement cost PostgreSQL about a millisecond of planning and execution
(plans are made per call, ``plan_cache_mode = force_custom_plan``), 40 of them a
flush of 40 recalls, inside the transaction that holds the tenant's writer lock.
``coalesce`` turns a run of touches into one ``Accesses`` per visibility: each id
once, with how many of the touches named it and the latest time one did. The
stores apply it as one statement that adds the counts, keeps the latest access
time and renews retention from it (``store.renewal``), under the visibility's
own predicate: an id another caller's touch named is counted only through that
caller's ``Accesses``, under that caller's predicate.

What this changes: counts add up and ``last_accessed_at`` only moves forward, as
they would touch by touch; the retention renewal is made from the latest access
(per visibility), which can end up to one renewal step (a hundredth of the
period) later than renewing at every access in turn (``store.renewal``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engram.store.contract import Touch
from engram.store.predicate import Visibility
from engram.store.rows import to_micros

__all__ = ["Accesses", "coalesce"]


@dataclass(frozen=True, slots=True)
class Accesses:
    """Each of ``ids``, if ``vis`` may read it, was recalled ``counts[i]`` times, the
    last at ``ats[i]`` (microseconds since the epoch)."""

    vis: Visibility
    ids: tuple[str, ...]
    counts: tuple[int, ...]
    ats: tuple[int, ...]


def coalesce(touches: Sequence[Touch]) -> list[Accesses]:
    """One ``Accesses`` per visibility of ``touches``, in the order each first
    appears, its ids in the order first named. An id named twice by one touch
    counts once, as a touch's own statement counted it."""
    seen: dict[Visibility, dict[str, list[int]]] = {}
    for touch in touches:
        at = to_micros(touch.at) or 0
        found = seen.setdefault(touch.vis, {})
        for record_id in dict.fromkeys(touch.ids):
            entry = found.get(record_id)
            if entry is None:
                found[record_id] = [1, at]
            else:
                entry[0] += 1
                entry[1] = max(entry[1], at)
    out = []
    for vis, found in seen.items():
        if found:
            counts = tuple(entry[0] for entry in found.values())
            out.append(Accesses(vis, tuple(found), counts, tuple(e[1] for e in found.values())))
    return out
