"""Test helpers: one candidate probe at a time through ``Store.candidates``.

The store answers a batch of probes; tests that look at one channel ask for a
batch of one and get its hits, or the ids and scores, with a failed probe's
error raised rather than returned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engram.errors import EngramError
from engram.store.contract import (
    Hits,
    KeyProbe,
    LexicalProbe,
    Probe,
    RecentProbe,
    Store,
    VectorProbe,
)
from engram.store.predicate import Visibility
from engram.types import Record

__all__ = ["by_key", "hits", "keyed", "lexical", "lexical_hits", "recent", "vector", "vector_hits"]


def hits(store: Store, vis: Visibility, probe: Probe) -> Hits:
    """The hits of one probe (its error raised)."""
    answer = store.candidates(vis, [probe])[0]
    if isinstance(answer, EngramError):
        raise answer
    return answer


def lexical_hits(
    store: Store, vis: Visibility, text: str, statuses: Sequence[str], limit: int
) -> Hits:
    """BM25 hits as records."""
    return hits(store, vis, LexicalProbe(text, tuple(statuses), limit))


def lexical(
    store: Store, vis: Visibility, text: str, statuses: Sequence[str], limit: int
) -> list[tuple[str, float]]:
    """BM25 hits as (id, score)."""
    return [(r.id, s) for r, s in lexical_hits(store, vis, text, statuses, limit)]


def vector_hits(
    store: Store, vis: Visibility, query: NDArray[np.float32], model: str,
    statuses: Sequence[str], limit: int,
) -> Hits:  # fmt: skip
    """Cosine hits as records."""
    return hits(store, vis, VectorProbe(query, model, tuple(statuses), limit))


def vector(
    store: Store, vis: Visibility, query: NDArray[np.float32], model: str,
    statuses: Sequence[str], limit: int,
) -> list[tuple[str, float]]:  # fmt: skip
    """Cosine hits as (id, score)."""
    return [(r.id, s) for r, s in vector_hits(store, vis, query, model, statuses, limit)]


def by_key(
    store: Store, vis: Visibility, keys: Sequence[str], statuses: Sequence[str], limit: int
) -> list[Record]:
    """Records whose key is one of ``keys``."""
    probe = KeyProbe(tuple(statuses), limit, keys=tuple(keys))
    return [r for r, _ in hits(store, vis, probe)]


def keyed(
    store: Store, vis: Visibility, types: Sequence[str], statuses: Sequence[str], limit: int
) -> list[Record]:
    """Keyed records of ``types``, newest observed first."""
    probe = KeyProbe(tuple(statuses), limit, types=tuple(types))
    return [r for r, _ in hits(store, vis, probe)]


def recent(
    store: Store, vis: Visibility, statuses: Sequence[str], limit: int,
    types: Sequence[str] | None = None,
) -> list[Record]:  # fmt: skip
    """The newest records (of ``types`` when given)."""
    probe = RecentProbe(tuple(statuses), limit, None if types is None else tuple(types))
    return [r for r, _ in hits(store, vis, probe)]
