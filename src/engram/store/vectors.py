"""Exact vector search over in-memory partitions, scoped before scoring.

Vectors live in the ``vectors`` table (the derived index); for search they are
held in memory as one float32 matrix per (tenant, user) partition, plus one per
tenant for its global records. A query scores only rows that the caller's
``Visibility`` admits (its mask is applied before the matrix product), so a
caller whose scope holds 1 % of all vectors still gets k results when k exist.

Partitions refresh from ``partition_state`` counters that triggers keep:
new inserts are appended incrementally; any delete reloads the partition.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from engram.store.predicate import NO_USER, Subject, Visibility

__all__ = [
    "IdLookup", "Partition", "PartitionCache", "ScanPolicy", "VectorRow", "partitions_for", "top_k",
]  # fmt: skip

VectorRow = tuple[int, str, str, str, str, bytes]  # seq, id, user, scope, agent, blob
Loader = Callable[[Subject, int], list[VectorRow]]


@dataclass
class Partition:
    """The vectors of one (tenant, user) partition, with the columns the mask needs.

    String columns are held as int32 codes (``vocab``) so the visibility mask is a
    few vectorised integer comparisons.
    """

    dimension: int
    inserts: int = 0
    deletes: int = 0
    max_seq: int = 0
    size: int = 0
    ids: list[str] = field(default_factory=list)
    vocab: dict[str, int] = field(default_factory=dict)
    matrix: NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    users: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    scopes: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    agents: NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))

    def __post_init__(self) -> None:
        self.matrix = np.zeros((0, self.dimension), dtype=np.float32)

    def _code(self, value: str) -> int:
        return self.vocab.setdefault(value, len(self.vocab))

    def append(self, rows: Sequence[VectorRow]) -> None:
        """Add rows (already ordered by seq), growing buffers geometrically."""
        if not rows:
            return
        needed = self.size + len(rows)
        if needed > self.matrix.shape[0]:
            self._grow(max(needed, 2 * self.matrix.shape[0], 64))
        start = self.size
        block = np.frombuffer(b"".join(row[5] for row in rows), dtype=np.float32)
        self.matrix[start:needed] = block.reshape(len(rows), self.dimension)
        self.users[start:needed] = [self._code(row[2]) for row in rows]
        self.scopes[start:needed] = [self._code(row[3]) for row in rows]
        self.agents[start:needed] = [self._code(row[4]) for row in rows]
        self.ids.extend(row[1] for row in rows)
        self.size = needed
        self.max_seq = rows[-1][0]

    def _grow(self, capacity: int) -> None:
        matrix = np.zeros((capacity, self.dimension), dtype=np.float32)
        if self.size:
            matrix[: self.size] = self.matrix[: self.size]
        self.matrix = matrix
        for name in ("users", "scopes", "agents"):
            column = np.zeros(capacity, dtype=np.int32)
            column[: self.size] = getattr(self, name)[: self.size]
            setattr(self, name, column)

    def search(
        self, vis: Visibility, query: NDArray[np.float32], scan: ScanPolicy | None = None
    ) -> tuple[NDArray[np.intp], NDArray[np.float32]]:
        """Row numbers of visible rows and their cosine scores (rows are unit vectors)."""
        n = self.size
        mask = vis.row_mask(self.vocab, self.users[:n], self.scopes[:n], self.agents[:n])
        rows = np.flatnonzero(mask)
        policy = scan or ScanPolicy()
        # For a mostly visible partition, scoring every row beats copying the visible
        # ones first.
        if rows.size < n // 8:
            return rows, policy.scores(self.matrix[rows], query)
        scores = policy.scores(self.matrix[:n], query)
        return rows, scores if rows.size == n else scores[rows]


@dataclass(frozen=True, slots=True)
class ScanPolicy:
    """How one exact scan runs: matrices of at least ``parallel_rows`` rows are split
    into ``threads`` contiguous blocks scored at once (numpy releases the GIL), so a
    large partition is not bound by one core's memory bandwidth.

    ``einsum`` rather than BLAS: OpenBLAS worker threads spin after each product
    and compete with the caller for the cores.
    """

    threads: int = 1
    parallel_rows: int = 32_768

    def scores(
        self, matrix: NDArray[np.float32], query: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """``matrix @ query``, in parallel blocks when the matrix is large enough."""
        n = matrix.shape[0]
        out = np.empty(n, dtype=np.float32)
        if self.threads < 2 or n < self.parallel_rows:
            np.einsum("ij,j->i", matrix, query, out=out)
            return out
        bounds = [int(b) for b in np.linspace(0, n, self.threads + 1)]

        def score(block: tuple[int, int]) -> None:
            lo, hi = block
            np.einsum("ij,j->i", matrix[lo:hi], query, out=out[lo:hi])

        list(_executor(self.threads).map(score, itertools.pairwise(bounds)))
        return out


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child inherits the pools but not their threads, and the lock in
    whatever state the forking thread saw: it gets a fresh lock and its own pools."""
    global _POOLS_LOCK
    _POOLS_LOCK = threading.Lock()
    _POOLS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _executor(threads: int) -> ThreadPoolExecutor:
    """One process-wide pool per thread count (configurations use one or two)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="engram-scan")
        return pool


class IdLookup:
    """Maps a position in the concatenated scores of several partitions to a record id."""

    def __init__(self, parts: Sequence[tuple[Partition, NDArray[np.intp]]]) -> None:
        self._parts = parts
        self._offsets = np.cumsum([0, *(rows.size for _, rows in parts)])

    def __getitem__(self, position: int) -> str:
        which = int(np.searchsorted(self._offsets, position, side="right")) - 1
        part, rows = self._parts[which]
        return part.ids[int(rows[position - self._offsets[which]])]


def top_k(ids: IdLookup, scores: NDArray[np.float32], k: int) -> list[tuple[str, float]]:
    """The k best (id, score) pairs, best first, via argpartition."""
    if k <= 0 or scores.size == 0:
        return []
    n = scores.size
    part = np.argpartition(scores, n - k)[n - k :] if k < n else np.arange(n)
    order = part[np.argsort(-scores[part], kind="stable")]
    return [(ids[int(i)], float(scores[i])) for i in order]


class PartitionCache:
    """LRU of loaded partitions, bounded by total rows; thread-safe."""

    def __init__(self, max_rows: int) -> None:
        self._max_rows = max_rows
        self._parts: OrderedDict[tuple[str, str, str], Partition] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        subject: Subject,
        model: str,
        dimension: int,
        counters: tuple[int, int],
        load: Loader,
    ) -> Partition:
        """The partition, refreshed to match ``counters`` (inserts, deletes)."""
        key = (subject.tenant_id, subject.user_id, model)
        with self._lock:
            part = self._parts.get(key)
            if part is None or part.deletes != counters[1] or part.dimension != dimension:
                part = Partition(dimension=dimension)
                part.append(load(subject, 0))
            elif part.inserts != counters[0]:
                part.append(load(subject, part.max_seq))
            part.inserts, part.deletes = counters
            self._parts[key] = part
            self._parts.move_to_end(key)
            self._evict()
            return part

    def _evict(self) -> None:
        total = sum(part.size for part in self._parts.values())
        while total > self._max_rows and len(self._parts) > 1:
            _, dropped = self._parts.popitem(last=False)
            total -= dropped.size

    def drop_subject(self, tenant_id: str, user_id: str) -> None:
        """Forget a subject's partitions now (erasure must not leave vectors in memory)."""
        with self._lock:
            for key in [k for k in self._parts if k[0] == tenant_id and k[1] == user_id]:
                del self._parts[key]

    def clear(self) -> None:
        """Forget every partition (after an index rebuild)."""
        with self._lock:
            self._parts.clear()


def partitions_for(vis: Visibility) -> tuple[Subject, Subject]:
    """The caller's own partition and the tenant's global one."""
    return Subject(vis.tenant_id, vis.user_id), Subject(vis.tenant_id, NO_USER)
