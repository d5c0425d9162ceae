"""Which probe a recall waits for, per backend: the probes of real recalls replayed
one at a time. Not a test; a phase of ``backends.py``.

A recall asks its store for every channel in one ``Store.candidates`` call (key,
working, lexical and vector probes, then a neighbour probe for the context
channel), and the trace gives each channel that call's wall time. To see which
probe costs what, each query is recalled once through a ``Capture`` that passes
every call on and keeps the probes asked; each probe is then run again alone,
on its own, against the same store and timed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, cast

from backends_data import Scope
from common import context, summarize
from engram import Engram
from engram.config import Budget
from engram.errors import EngramError
from engram.store.contract import Hits, Probe
from engram.store.open import Backend
from engram.store.predicate import Visibility

__all__ = ["channel_phase"]


class Capture:
    """A store wrapper keeping the probes of each ``candidates`` call."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.asked: list[tuple[Visibility, Probe]] = []

    def candidates(self, vis: Visibility, probes: Sequence[Probe]) -> list[Hits | EngramError]:
        """Keep the probes, then answer through the wrapped store."""
        self.asked.extend((vis, probe) for probe in probes)
        return self.inner.candidates(vis, probes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _replay(store: Backend, asked: Sequence[tuple[Visibility, Probe]]) -> dict[str, float]:
    """Milliseconds of each probe run alone (kinds repeated within a recall add up)."""
    times: dict[str, float] = defaultdict(float)
    for vis, probe in asked:
        tick = time.perf_counter()
        store.candidates(vis, [probe])
        times[type(probe).__name__] += (time.perf_counter() - tick) * 1000
    return times


def channel_phase(mems: Mapping[str, Engram], users: Sequence[Scope], count: int) -> dict[str, Any]:
    """Per user and backend: p50/p95 of each probe kind alone over ``count`` recalls."""
    out: dict[str, Any] = {}
    budget = Budget(max_items=10)
    for scope in users:
        ctx = context(scope.user)
        by_backend: dict[str, Any] = {}
        for name, mem in mems.items():
            store = mem.store
            capture = Capture(store)
            kinds: dict[str, list[float]] = defaultdict(list)
            mem.store = cast(Backend, capture)  # the pipeline reads its store from here
            try:
                for query in scope.queries[:count]:
                    capture.asked.clear()
                    mem.recall(ctx, query.text, budget=budget)
                    for kind, ms in _replay(store, capture.asked).items():
                        kinds[kind].append(ms)
            finally:
                mem.store = store
            by_backend[name] = {kind: summarize(values) for kind, values in kinds.items()}
        out[scope.user] = by_backend
    return out
