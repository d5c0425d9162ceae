"""The records of ``backends.py``: one corpus made into SDK-shaped records once and
loaded into both stores through the storage contract, with exact top-k kept aside.

Not a test. ``Scope`` is one benchmark user (``u-all`` holds the store's full size,
``u-small`` 1 % of it on top), its recall queries and their query vectors. ``Batches``
turns corpus memories into the very ``Record`` values ``remember_many`` would
insert: the SDK's own staging (``write.batch.stage``), policy verdicts, content
hashes and hashing vectors (``WritePath.prepare_units``) and ``write.commit.new_record``.
What a bulk load skips is the per-record decision against the slot, so a memory
whose content hash or key its user already holds is left out here (the SDK would
confirm or supersede it) and the next corpus memory is taken instead; no audit
entry is written for bulk rows. ``Truth`` keeps each query's exact top-k (numpy,
float32 dot products of the stored unit vectors) while the batches stream past,
so no copy of the whole matrix stays in the process.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from common import TENANT, context
from corpus import Corpus, Query
from engram.config import Config
from engram.embed import Embedder
from engram.scope import resolve
from engram.store.contract import Insert
from engram.store.open import Backend
from engram.types import Operation, Record, Status
from engram.write.batch import actor, stage
from engram.write.commit import Owner, new_record
from engram.write.decide import Decision
from engram.write.path import WritePath
from engram.write.policy import VerdictKind

__all__ = ["BIG", "SMALL", "Batches", "Scope", "Truth", "scopes"]

BIG, SMALL = "u-all", "u-small"
SMALL_START = 50_000_000  # corpus index of the small user's first memory (disjoint texts)
FIRST_SEEN = datetime(2025, 1, 1, tzinfo=UTC)
STEP = timedelta(seconds=30)  # observed times: 1M records span under a year, all in the past
_ADD = Decision(Operation.ADD, "add", "bulk load", new_status=Status.ACTIVE)


class Truth:
    """Exact top-``k`` of each query over the vectors seen so far (tie-aware recall)."""

    def __init__(self, queries: NDArray[np.float32], k: int) -> None:
        self.queries = queries
        self.k = k
        self.scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        self.rows = np.full((len(queries), k), -1, dtype=np.int64)

    def update(self, vectors: NDArray[np.float32], first_row: int) -> None:
        """Merge the scores of ``vectors`` (rows ``first_row``...) into the top-k."""
        if len(vectors) == 0:
            return
        scores = self.queries @ vectors.T
        rows = np.broadcast_to(np.arange(first_row, first_row + len(vectors)), scores.shape)
        both = np.concatenate([self.scores, scores], axis=1)
        both_rows = np.concatenate([self.rows, rows], axis=1)
        keep = np.argpartition(-both, self.k - 1, axis=1)[:, : self.k]
        self.scores = np.take_along_axis(both, keep, axis=1)
        self.rows = np.take_along_axis(both_rows, keep, axis=1)

    def kth(self, query: int) -> float:
        """The k-th best exact score of ``query`` (the bar a returned item must reach)."""
        return float(self.scores[query].min())

    def recall(self, query: int, found: NDArray[np.float32]) -> float:
        """Tie-aware recall@k: the share of k slots filled by returned vectors whose
        exact score reaches the k-th best (equal scores count as equally right)."""
        if len(found) == 0:
            return 0.0
        scores = found @ self.queries[query]
        return min(int(np.sum(scores >= self.kth(query) - 1e-5)), self.k) / self.k


@dataclass
class Scope:
    """One benchmark user: records to hold, recall queries, their vectors, truth."""

    user: str
    count: int
    start: int  # first corpus index
    queries: list[Query]
    vectors: NDArray[np.float32]
    truth: Truth
    ids: list[str] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        """The query texts."""
        return [q.text for q in self.queries]


def scopes(corpus: Corpus, embedder: Embedder, size: int, queries: int, k: int) -> list[Scope]:
    """The two users: ``u-all`` with ``size`` records, ``u-small`` with 1 % of that.
    Queries are drawn from each user's own memories (``Corpus.queries``)."""
    out = []
    for user, count, start in ((BIG, size, 0), (SMALL, max(size // 100, 100), SMALL_START)):
        drawn = corpus.queries(queries, range(start, start + count), seed=size + len(user))
        vectors = embedder.embed([q.text for q in drawn]).astype(np.float32)
        out.append(Scope(user, count, start, drawn, vectors, Truth(vectors, k)))
    return out


@dataclass
class Batches:
    """Record batches of one scope, made as ``remember_many`` would make them."""

    corpus: Corpus
    config: Config
    writer: WritePath
    now: datetime
    skipped: int = 0  # duplicates of a held content hash or key, or not accepted
    seconds: float = 0.0  # time spent making records (staging, policy, embedding)

    @classmethod
    def of(cls, corpus: Corpus, store: Backend, embedder: Embedder, config: Config) -> Batches:
        """Batches that embed with ``embedder`` and judge with ``config``'s policy."""
        return cls(corpus, config, WritePath(store, embedder, config), datetime.now(UTC))

    def stream(
        self, scope: Scope, batch: int
    ) -> Iterator[tuple[list[Insert], NDArray[np.float32]]]:
        """``scope.count`` new records in batches of about ``batch``, with their vectors;
        their ids are appended to ``scope.ids``."""
        seen: set[str] = set()
        index = scope.start
        while len(scope.ids) < scope.count:
            tick = time.perf_counter()
            want = min(batch, scope.count - len(scope.ids))
            inserts = self._make(scope, index, want, seen)
            index += want
            self.seconds += time.perf_counter() - tick
            if inserts:
                vectors = np.stack([i.vector for i in inserts if i.vector is not None])
                yield inserts, vectors.astype(np.float32, copy=False)

    def _make(self, scope: Scope, index: int, count: int, seen: set[str]) -> list[Insert]:
        """Records of corpus memories ``index...index+count-1`` not yet held by the user."""
        base = len(scope.ids)
        items = [
            self.corpus.memory(index + n).item(FIRST_SEEN + STEP * (base + n)) for n in range(count)
        ]
        target = resolve(context(scope.user))
        prepared = self.writer.prepare_units(stage(self.config, target, items, self.now))
        owner = Owner(TENANT, scope.user, None, "user", actor(target))
        out = []
        for proposal, verdict, digest, vector in zip(
            prepared.proposals, prepared.verdicts, prepared.hashes, prepared.vectors, strict=True
        ):
            marks = [f"hash:{digest}"] + ([f"key:{proposal.key}"] if proposal.key else [])
            if verdict.kind != VerdictKind.ACCEPT or vector is None or seen.intersection(marks):
                self.skipped += 1
                continue
            seen.update(marks)
            proposal = dataclasses.replace(proposal, sensitivity=verdict.sensitivity)
            record = new_record(
                proposal, owner, _ADD, self.now, self.config, digest, prepared.model
            )
            out.append(Insert(record, vector))
            scope.ids.append(record.id)
        return out


def ids_of(inserts: Sequence[Insert]) -> list[str]:
    """The record ids of ``inserts``."""
    return [i.record.id for i in inserts]


def records_of(inserts: Sequence[Insert]) -> list[Record]:
    """The records of ``inserts``."""
    return [i.record for i in inserts]
