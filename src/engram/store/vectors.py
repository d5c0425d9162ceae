"""Exact vector search over in-memory partitions, scoped before scoring.

Vectors live in the ``vectors`` table (the derived index); for search they are
held in memory as one float32 matrix per (tenant, user) partition, plus one per
tenant for its global records. A query scores only rows that the caller's
``Visibility`` admits (its mask is applied before the matrix product), so a
caller whose scope holds 1 % of all vectors still gets k results when k exist.

Large partitions are scanned twice: a cheap pass over int8 codes shortlists
candidates, and their float32 rows give the exact scores (``ScanPolicy``).

Partitions refresh from ``partition_state`` counters that triggers keep:
new inserts are appended incrementally; any delete reloads the partition.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from engram.store import quantize
from engram.store.columns import OwnerColumns, grow
from engram.store.predicate import Visibility

__all__ = [
    "Partition", "Scan", "ScanPolicy", "VectorRow", "best_positions", "ranked_positions", "top_k",
]  # fmt: skip

_APPEND_CHUNK = 65_536  # rows encoded at once: float temporaries stay under 100 MB

VectorRow = tuple[int, str, str, str, str, bytes]  # seq, id, user, scope, agent, blob


class Partition:
    """The vectors of one (tenant, user) partition: float32 rows, their int8 codes,
    and the owner columns the visibility mask needs (``OwnerColumns``)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.inserts = 0
        self.deletes = 0
        self.cursor = 0  # the last ``vectors.seq`` appended
        self.owners = OwnerColumns()
        self.matrix = np.zeros((0, dimension), dtype=np.float32)
        self.codes = np.zeros((0, dimension), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)
        self.rows_by_id: dict[str, int] = {}

    @property
    def size(self) -> int:
        """Rows held."""
        return self.owners.size

    @property
    def ids(self) -> list[str]:
        """Record ids by row."""
        return self.owners.ids

    def append(self, rows: Sequence[VectorRow]) -> None:
        """Add rows (already ordered by seq), growing buffers geometrically."""
        if not rows:
            return
        start, needed = self.size, self.size + len(rows)
        grow(self, ("matrix", "codes", "scales"), start, needed)
        for lo in range(0, len(rows), _APPEND_CHUNK):  # bounded temporaries at 1M rows
            chunk = rows[lo : lo + _APPEND_CHUNK]
            first, last = start + lo, start + lo + len(chunk)
            block = np.frombuffer(b"".join(row[5] for row in chunk), dtype=np.float32)
            self.matrix[first:last] = block.reshape(len(chunk), self.dimension)
            self.codes[first:last], self.scales[first:last] = quantize.encode(
                self.matrix[first:last]
            )
        self.owners.append([(row[1], row[2], row[3], row[4]) for row in rows])
        self.rows_by_id.update((row[1], start + i) for i, row in enumerate(rows))
        self.cursor = rows[-1][0]

    def visible_rows(self, vis: Visibility) -> NDArray[np.intp]:
        """Row numbers ``vis`` may read."""
        return self.owners.visible(vis)[1]

    def vectors_of(self, vis: Visibility, ids: Sequence[str]) -> dict[str, NDArray[np.float32]]:
        """The rows of ``ids`` held here that ``vis`` may read (read-only views)."""
        mask = self.owners.visible(vis)[0]
        found = {}
        for record_id in ids:
            row = self.rows_by_id.get(record_id)
            if row is not None and row < mask.size and mask[row]:
                found[record_id] = self.matrix[row]
        return found

    def search(
        self, vis: Visibility, query: NDArray[np.float32], scan: ScanPolicy | None = None
    ) -> tuple[NDArray[np.intp], NDArray[np.float32], bool]:
        """Row numbers of visible rows, their cosine scores (rows are unit vectors),
        and whether those scores are int8 estimates rather than exact."""
        n = self.size  # read once: another thread may append meanwhile
        rows = self.owners.visible(vis, n)[1]
        policy = scan or ScanPolicy()
        # For a mostly visible partition, scoring every row beats copying the visible
        # ones first.
        subset = rows.size < n // 8
        if policy.estimates(rows.size):
            codes, scales = (self.codes[rows], self.scales[rows]) if subset else (
                self.codes[:n], self.scales[:n])  # fmt: skip
            scores = policy.estimate(codes, scales, query)
            estimated = True
        else:
            scores = policy.scores(self.matrix[rows] if subset else self.matrix[:n], query)
            estimated = False
        if not subset and rows.size < n:
            scores = scores[rows]
        return rows, scores, estimated


@dataclass(frozen=True, slots=True)
class ScanPolicy:
    """How one scan runs.

    - A scan of at least ``estimate_rows`` rows first scores int8 codes (a quarter
      of the bytes; ``quantize``) and the caller rescores a shortlist exactly;
      0 turns this off, as does a missing ``simsimd``.
    - A scan reading at least as many bytes as ``parallel_rows`` float32 rows is
      split into ``threads`` contiguous blocks scored at once (numpy and the int8
      kernel release the GIL), so it is not bound by one core's memory bandwidth.

    ``einsum`` rather than BLAS: OpenBLAS worker threads spin after each product
    and compete with the caller for the cores.
    """

    threads: int = 1
    parallel_rows: int = 32_768
    estimate_rows: int = 0

    def estimates(self, rows: int) -> bool:
        """Whether a scan of ``rows`` rows scores int8 codes first."""
        return 0 < self.estimate_rows <= rows and quantize.available()

    def estimate(
        self, codes: NDArray[np.int8], scales: NDArray[np.float32], query: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """Estimated ``rows @ query`` from int8 codes (a code is a quarter of a float)."""
        threads = self.threads if codes.shape[0] >= 4 * self.parallel_rows else 1
        return quantize.estimate(codes, scales, query, threads)

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


@dataclass(frozen=True, slots=True)
class Scan:
    """The scores of one query over the visible rows of several partitions, in one
    array; ``estimated`` when any of them came from int8 codes."""

    parts: Sequence[tuple[Partition, NDArray[np.intp]]]
    scores: NDArray[np.float32]
    query: NDArray[np.float32]
    estimated: bool = False
    shortlist_factor: int = 4
    shortlist_extra: int = 64
    offsets: NDArray[np.intp] = field(init=False)

    def __post_init__(self) -> None:
        offsets = np.cumsum([0, *(rows.size for _, rows in self.parts)], dtype=np.intp)
        object.__setattr__(self, "offsets", offsets)

    def record_ids(self, positions: NDArray[np.intp]) -> list[str]:
        """The record ids at ``positions`` of ``scores``."""
        which = np.searchsorted(self.offsets, positions, side="right") - 1
        rows = [int(self.parts[w][1][p - self.offsets[w]]) for w, p in zip(
            which.tolist(), positions.tolist(), strict=True)]  # fmt: skip
        return [self.parts[w][0].ids[row] for w, row in zip(which.tolist(), rows, strict=True)]

    def exact(self, positions: NDArray[np.intp]) -> NDArray[np.float32]:
        """Float32 cosine scores of the rows at ``positions``."""
        out = np.zeros(positions.size, dtype=np.float32)
        which = np.searchsorted(self.offsets, positions, side="right") - 1
        for index, (part, rows) in enumerate(self.parts):
            picked = np.flatnonzero(which == index)
            if picked.size:
                matrix = part.matrix[rows[positions[picked] - self.offsets[index]]]
                out[picked] = np.einsum("ij,j->i", matrix, self.query)
        return out

    def shortlist(self, k: int) -> int:
        """How many estimated candidates to rescore for an exact top ``k``."""
        return max(self.shortlist_factor * k, k + self.shortlist_extra)


def best_positions(scores: NDArray[np.float32], m: int) -> NDArray[np.intp]:
    """Positions of the ``m`` highest scores, in no order.

    A full ``argpartition`` of 100K scores takes about 0.75 ms. A threshold read
    from a strided sample first cuts the field to the few rows above it; when at
    least ``m`` rows pass, the top ``m`` are all among them, so the answer is the
    same. An unlucky sample falls back to the full partition.
    """
    n = scores.size
    if m <= 0:
        return np.zeros(0, dtype=np.intp)
    if m >= n:
        return np.arange(n)
    if n >= _SAMPLE_FROM:
        stride = n // _SAMPLE_SIZE
        sample = scores[::stride]
        kth = min(sample.size - 1, 2 * (m // stride) + 8)
        threshold = np.partition(sample, sample.size - 1 - kth)[sample.size - 1 - kth]
        above = np.flatnonzero(scores >= threshold)
        if m <= above.size < n // 2:
            return above[np.argpartition(scores[above], above.size - m)[above.size - m :]]
    return np.argpartition(scores, n - m)[n - m :]


_SAMPLE_FROM = 16_384
_SAMPLE_SIZE = 2048


def ranked_positions(
    scores: NDArray[np.float32],
    k: int,
    wanted: int | None = None,
    rescore: Callable[[NDArray[np.intp]], NDArray[np.float32]] | None = None,
) -> tuple[NDArray[np.intp], NDArray[np.float32]]:
    """The ``k`` best positions of ``scores`` and their scores, best first; equal
    scores in position order, so an answer never depends on how it was found.

    ``wanted`` (at least ``k``) positions are shortlisted, with every position
    tied at the shortlist's cutoff; ``rescore`` replaces the shortlist's scores
    (exact scores for int8 estimates) before the final order.
    """
    n = scores.size
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float32)
    best = best_positions(scores, min(n, max(k, wanted or k)))
    if best.size < n:
        best = np.union1d(best, np.flatnonzero(scores == scores[best].min()))
    final = scores[best] if rescore is None else rescore(best)
    order = np.lexsort((best, -final))[:k]  # best score first, then lowest position
    return best[order], final[order]


def top_k(scan: Scan, k: int) -> list[tuple[str, float]]:
    """The k best (id, score) pairs of a scan, best first (``ranked_positions``).
    Estimated scores only choose a shortlist; the pairs carry exact scores,
    ranked by them. A shortlist can still miss exact top rows when more than it
    holds lie within the int8 error (about 1e-3) of the cutoff: thousands of
    near-identical vectors."""
    if scan.estimated:
        chosen, exact = ranked_positions(scan.scores, k, scan.shortlist(k), scan.exact)
    else:
        chosen, exact = ranked_positions(scan.scores, k)
    return list(zip(scan.record_ids(chosen), exact.tolist(), strict=True))
