"""The in-memory search engines, behind an interface of their own.

A store with no vector or lexical index of its own (SQLite) ranks in memory: the
vector engine keeps one float32 matrix (and int8 codes) per (tenant, user)
partition, the lexical engine BM25 postings per partition. Both are scoped
before scoring (``Visibility.row_mask``) and answer with a ``Ranking``: ids best
first, status unchecked, which the store then checks against the system of
record (``ranking.alive_top``). A store with indexes (PostgreSQL: HNSW, GIN)
ranks inside its database and does not use these.

The engines read the system of record through ``RowSource``: per-partition
change counters (which tell a cached partition it is stale), the rows after a
cursor, and whether the calling thread is inside its own transaction (whose
uncommitted rows must not reach the shared partitions, ``PartitionCache``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from engram.store import lexicon
from engram.store.lexicon import Bm25, LexicalPartition, LexicalRow, query_terms
from engram.store.partitions import PartitionCache, partitions_for
from engram.store.predicate import Subject, Visibility
from engram.store.ranking import Ranking
from engram.store.vectors import Partition, Scan, ScanPolicy, VectorRow, ranked_positions, top_k

__all__ = [
    "Counters", "LexicalEngine", "MemoryLexicon", "MemoryVectors", "RowSource", "VectorEngine",
]  # fmt: skip

Counters = dict[str, tuple[int, int]]  # user id ('' for global) -> (inserts, deletes)


class RowSource(Protocol):
    """What the in-memory engines read from the system of record."""

    def vector_counters(self, vis: Visibility) -> Counters:
        """Vector change counters of the caller's two partitions."""
        ...

    def lexical_counters(self, vis: Visibility) -> Counters:
        """Record change counters of the caller's two partitions."""
        ...

    def vector_rows(self, subject: Subject, model: str, after: int) -> list[VectorRow]:
        """The partition's vectors of ``model`` after sequence ``after``, in order."""
        ...

    def lexical_rows(self, subject: Subject, after: int) -> list[LexicalRow]:
        """The partition's records after row ``after``, in order."""
        ...

    def private(self) -> bool:
        """Whether the calling thread is inside its own (uncommitted) transaction."""
        ...


class VectorEngine(Protocol):
    """Nearest neighbours over a caller's visible vectors."""

    def scan(self, vis: Visibility, query: NDArray[np.float32], model: str) -> Ranking:
        """Cosine ranking of every vector ``vis`` may read (status unchecked)."""
        ...

    def cached(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]] | None:
        """Vectors of the visible ``ids`` from current partitions; None when one is
        missing or stale (the store then reads them from its table)."""
        ...

    def holds(self, tenant_id: str) -> bool:
        """Whether a partition of the tenant is in memory."""
        ...

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's partitions now."""
        ...

    def clear(self) -> None:
        """Drop every partition."""
        ...


class LexicalEngine(Protocol):
    """BM25 over a caller's visible records."""

    def scan(self, vis: Visibility, text: str) -> Ranking:
        """BM25 ranking of the rows ``vis`` may read (status unchecked)."""
        ...

    def holds(self, tenant_id: str) -> bool:
        """Whether postings of the tenant are in memory."""
        ...

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's postings now (and the process-wide stem cache)."""
        ...

    def clear(self) -> None:
        """Drop every partition's postings."""
        ...


class MemoryVectors:
    """Exact (or int8-shortlisted, then exact) cosine over cached partitions."""

    def __init__(self, source: RowSource, max_rows: int, policy: ScanPolicy) -> None:
        self._source = source
        self._cache: PartitionCache[Partition] = PartitionCache(max_rows)
        self._policy = policy

    def scan(self, vis: Visibility, query: NDArray[np.float32], model: str) -> Ranking:
        """Scores of every row ``vis`` may read (mostly SIMD work that releases the GIL)."""
        query = np.ascontiguousarray(query, dtype=np.float32)
        counters = self._source.vector_counters(vis)
        parts: list[tuple[Partition, NDArray[np.intp]]] = []
        scores: list[NDArray[np.float32]] = []
        estimated = False
        for subject in partitions_for(vis):
            for part in self._partition(subject, model, query.shape[0], counters):
                rows, part_scores, part_estimated = part.search(vis, query, self._policy)
                parts.append((part, rows))
                scores.append(part_scores.astype(np.float32, copy=False))
                estimated = estimated or part_estimated
        scan = Scan(parts, np.concatenate(scores), query, estimated)
        return Ranking(partial(top_k, scan), scan.scores.size)

    def _partition(
        self, subject: Subject, model: str, dim: int, counters: Counters
    ) -> list[Partition]:
        state = counters.get(subject.user_id, (0, 0))
        return self._cache.read(
            (subject.tenant_id, subject.user_id, model), state,
            lambda: Partition(dimension=dim),
            lambda after: self._source.vector_rows(subject, model, after),
            private=self._source.private(), fits=lambda part: part.dimension == dim,
        )  # fmt: skip

    def cached(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]] | None:
        """See ``VectorEngine.cached``."""
        counters = self._source.vector_counters(vis)
        found: dict[str, NDArray[np.float32]] = {}
        for subject in partitions_for(vis):
            state = counters.get(subject.user_id, (0, 0))
            part = self._cache.current((subject.tenant_id, subject.user_id, model), state)
            if part is None:
                if state != (0, 0):
                    return None
                continue  # an empty partition holds nothing
            found.update(part.vectors_of(vis, ids))
        return found

    def holds(self, tenant_id: str) -> bool:
        """See ``VectorEngine.holds``."""
        return self._cache.holds(tenant_id)

    def forget(self, tenant_id: str) -> None:
        """See ``VectorEngine.forget``."""
        self._cache.drop_tenant(tenant_id)

    def clear(self) -> None:
        """See ``VectorEngine.clear``."""
        self._cache.clear()


class MemoryLexicon:
    """BM25 over cached postings, with statistics over the rows the caller may read."""

    def __init__(self, source: RowSource, max_rows: int, bm25: Bm25 | None = None) -> None:
        self._source = source
        self._cache: PartitionCache[LexicalPartition] = PartitionCache(max_rows)
        self._bm25 = bm25 or Bm25()

    def scan(self, vis: Visibility, text: str) -> Ranking:
        """See ``LexicalEngine.scan``."""
        words = query_terms(text)
        if not words:
            return Ranking.of([])
        counters = self._source.lexical_counters(vis)
        parts = [part for subject in partitions_for(vis)
                 for part in self._partition(subject, counters)]  # fmt: skip
        found = lexicon.search(parts, vis, words, self._bm25)
        if not found:
            return Ranking.of([])
        scores = np.concatenate([part_scores for _, _, part_scores in found])
        ids = [part.owners.ids for part, _, _ in found]
        rows = np.concatenate([part_rows for _, part_rows, _ in found])
        which = np.concatenate([np.full(r.size, i) for i, (_, r, _) in enumerate(found)])

        def ranked(k: int) -> list[tuple[str, float]]:
            best, best_scores = ranked_positions(scores, k)
            found_ids = [ids[which[p]][rows[p]] for p in best.tolist()]
            return list(zip(found_ids, best_scores.tolist(), strict=True))

        return Ranking(ranked, scores.size)

    def _partition(self, subject: Subject, counters: Counters) -> list[LexicalPartition]:
        state = counters.get(subject.user_id, (0, 0))
        key = (subject.tenant_id, subject.user_id, "lexical")
        return self._cache.read(
            key, state, LexicalPartition,
            lambda after: self._source.lexical_rows(subject, after),
            private=self._source.private(),
        )  # fmt: skip

    def holds(self, tenant_id: str) -> bool:
        """See ``LexicalEngine.holds``."""
        return self._cache.holds(tenant_id)

    def forget(self, tenant_id: str) -> None:
        """See ``LexicalEngine.forget``: postings, term counts and the stem cache."""
        self._cache.drop_tenant(tenant_id)
        lexicon.forget_cached_words()

    def clear(self) -> None:
        """See ``LexicalEngine.clear``."""
        self._cache.clear()
