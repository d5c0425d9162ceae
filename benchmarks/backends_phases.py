"""The measuring phases of ``backends.py`` on SDK instances over the loaded stores:
recall through the SDK, the vector probe against exact top-10, SDK writes and
working memory. Not a test; see ``backends.py`` for what each phase reports.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from backends_data import Scope
from common import ask, context, summarize
from corpus import Corpus
from engram import Engram
from engram.config import Budget
from engram.errors import EngramError
from engram.recall.model import RecallResult
from engram.scope import resolve
from engram.store.config import PostgresConfig, SQLiteConfig
from engram.store.contract import VectorProbe
from engram.store.open import Backend
from engram.store.postgres import PostgresStore
from engram.store.postgres import vectors as pg_vectors
from engram.store.postgres.session import on
from engram.store.predicate import Visibility
from engram.store.sqlite import SQLiteStore
from engram.types import WriteResult
from recall import breakdown

__all__ = ["K", "probe_phase", "recall_phase", "working_phase", "write_phase"]

K = 10
STATUSES = ("active",)
WARMUP = 5
WRITE_START = 90_000_000  # corpus indexes of the SDK write sample (texts no scope holds)

# -- 2. recall through the SDK ----------------------------------------------------------


def recall_phase(
    mems: Mapping[str, Engram], users: Sequence[Scope], corpus: Corpus, size: int
) -> dict[str, Any]:
    """Recall p50/p95 per backend and user; each query alternates which backend goes first."""
    budget = Budget(max_items=K)
    out: dict[str, Any] = {}
    for scope in users:
        ctx = context(scope.user)
        cold = {}
        for name, mem in mems.items():
            tick = time.perf_counter()
            mem.recall(ctx, "cold start: the first recall loads the partitions", budget=budget)
            cold[name] = round((time.perf_counter() - tick) * 1000, 1)
        for q in corpus.queries(WARMUP, range(scope.start, scope.start + scope.count), seed=1):
            for mem in mems.values():
                mem.recall(ctx, q.text, budget=budget)
        times: dict[str, list[float]] = {n: [] for n in mems}
        hits: dict[str, list[bool]] = {n: [] for n in mems}
        statuses: dict[str, collections.Counter[str]] = {n: collections.Counter() for n in mems}
        results: dict[str, list[RecallResult]] = {n: [] for n in mems}
        for n, q in enumerate(scope.queries):
            order = list(mems) if n % 2 == 0 else list(mems)[::-1]
            for name in order:
                tick = time.perf_counter()
                result = mems[name].recall(ctx, q.text, budget=budget)
                times[name].append((time.perf_counter() - tick) * 1000)
                statuses[name][result.status.value] += 1
                results[name].append(result)
                if q.source is not None:
                    text = corpus.memory(q.source).text
                    hits[name].append(any(i.record.content == text for i in result.items))
        out[scope.user] = {
            name: {
                "recall": summarize(times[name]),
                "cold_first_ms": cold[name],
                "statuses": dict(statuses[name]),
                "source_memory_returned": round(float(np.mean(hits[name])), 3),
                "stages": breakdown(results[name]),
            }
            for name in mems
        }
    return out


# -- 3. the vector probe against exact ---------------------------------------------------


@dataclasses.dataclass
class Probes:
    """Times a search over one user's queries and scores it against the exact top-10
    (the vectors of the returned ids are read back from ``reference``)."""

    scope: Scope
    reference: Backend
    vis: Visibility
    model: str

    def __call__(
        self, search: Callable[[NDArray[np.float32]], list[str]], count: int
    ) -> dict[str, Any]:
        """Latency and tie-aware recall@10 of ``search`` on the first ``count`` queries
        (the first three also run once untimed before)."""
        for q in self.scope.vectors[: min(3, count)]:
            search(q)
        times, recalls = [], []
        for i in range(count):
            tick = time.perf_counter()
            ids = search(self.scope.vectors[i])
            times.append((time.perf_counter() - tick) * 1000)
            found = self.reference.vectors(self.vis, ids, self.model)
            matrix = np.stack([found[x] for x in ids]) if ids else np.zeros((0, 1), np.float32)
            recalls.append(self.scope.truth.recall(i, matrix))
        kinds: dict[str, list[float]] = collections.defaultdict(list)
        for query, value in zip(self.scope.queries, recalls, strict=False):
            kinds[query.kind].append(value)
        return {
            "latency": summarize(times),
            "recall_at_10_mean": round(float(np.mean(recalls)), 4),
            "recall_at_10_min": round(float(np.min(recalls)), 2),
            "recall_at_10_by_query_kind": {
                k: round(float(np.mean(v)), 4) for k, v in kinds.items()
            },
            "queries": count,
        }


def _vector_ids(
    store: Backend, vis: Visibility, model: str
) -> Callable[[NDArray[np.float32]], list[str]]:
    """Ids answered by ``store``'s vector probe (k=10) for one query vector."""
    return lambda q: [r.id for r, _ in ask(store, vis, VectorProbe(q, model, STATUSES, K))]


def _exact_ids(
    store: PostgresStore, vis: Visibility, model: str
) -> Callable[[NDArray[np.float32]], list[str]]:
    """Ids answered by PostgreSQL's exact query (every visible distance, no index)."""

    def call(q: NDArray[np.float32]) -> list[str]:
        with store.connection("exact baseline") as conn:
            return [str(r[0]) for r in on(conn, pg_vectors.exact(vis, q, model, STATUSES, K))]

    return call


def probe_phase(
    mems: Mapping[str, Engram],
    users: Sequence[Scope],
    sqlite_path: str,
    pg_url: str,
    exact_queries: int,
    ef_sweep: Sequence[int] = (),
) -> dict[str, Any]:
    """The SDK stores' vector probe, and each backend's exact search, per user; with
    ``ef_sweep``, PostgreSQL's probe again at each ``hnsw_ef_search`` value."""
    model = mems["sqlite"].embedder.model_id
    exact_sqlite = SQLiteStore(sqlite_path, SQLiteConfig(vector_estimate_rows=0))
    exact_pg = PostgresStore.open(pg_url, PostgresConfig(statement_timeout_ms=0))
    out: dict[str, Any] = {}
    try:
        for scope in users:
            vis = Visibility.of(resolve(context(scope.user)))
            run = Probes(scope, mems["sqlite"].store, vis, model)
            n = len(scope.queries)
            out[scope.user] = {
                "visible_vectors": len(scope.ids),
                "sqlite": run(_vector_ids(mems["sqlite"].store, vis, model), n),
                "sqlite_exact_scan": run(_vector_ids(exact_sqlite, vis, model), n),
                "postgres": run(_vector_ids(mems["postgres"].store, vis, model), n),
                "postgres_exact_query": run(
                    _exact_ids(exact_pg, vis, model), min(n, exact_queries)
                ),
                "postgres_plan": _plan(exact_pg, vis, scope, model),
            }
            for ef in ef_sweep:
                tuned = PostgresStore.open(pg_url, PostgresConfig(hnsw_ef_search=ef))
                try:
                    out[scope.user][f"postgres_ef_search_{ef}"] = run(
                        _vector_ids(tuned, vis, model), n
                    )
                finally:
                    tuned.close()
    finally:
        exact_sqlite.close()
        exact_pg.close()
    return out


def _plan(store: PostgresStore, vis: Visibility, scope: Scope, model: str) -> str:
    """Whether the approximate query's plan walks the HNSW index."""
    text, params = pg_vectors.approximate(vis, scope.vectors[0], model, STATUSES, K)
    with store.connection("explain") as conn:
        lines = [str(r[0]) for r in on(conn, ("EXPLAIN " + text, params))]
    return "hnsw" if any("records_embedding" in line for line in lines) else "no index"


# -- 4. SDK writes, 5. working memory ----------------------------------------------------


def write_phase(
    mems: Mapping[str, Engram], corpus: Corpus, count: int, chunk: int
) -> dict[str, Any]:
    """``remember`` one at a time and ``remember_many`` in chunks, same items on both
    backends, alternating which goes first. A backend whose write raises is reported
    with the error and left out of the rest of the phase."""
    sample = Sample(mems)
    for n, item in enumerate(corpus.items(WRITE_START, count)):
        for name in sample.order(n):
            sample.run(name, "remember", functools.partial(_remember, item=item))
    end = WRITE_START + 2 * count
    for n, start in enumerate(range(WRITE_START + count, end, chunk)):
        items = corpus.items(start, min(chunk, end - start))
        for name in sample.order(n):
            sample.run(name, "remember_many", functools.partial(_remember_many, items=items))
    return sample.report(count, chunk)


def _remember(mem: Engram, item: Mapping[str, Any]) -> list[WriteResult]:
    """One ``remember`` call of a corpus item (its content and fields)."""
    fields = dict(item)
    return [mem.remember(context("u-one"), fields.pop("content"), **fields)]


def _remember_many(mem: Engram, items: Sequence[Mapping[str, Any]]) -> list[WriteResult]:
    """One ``remember_many`` call of corpus items."""
    return mem.remember_many(context("u-many"), items)


@dataclasses.dataclass
class Sample:
    """Timed SDK writes per backend, their outcomes, and the first error of each."""

    mems: Mapping[str, Engram]
    seconds: dict[str, dict[str, list[float]]] = dataclasses.field(default_factory=dict)
    ops: dict[str, collections.Counter[str]] = dataclasses.field(default_factory=dict)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)

    def order(self, n: int) -> list[str]:
        """The backends still writing, in turn order for call ``n``."""
        names = [name for name in self.mems if name not in self.failed]
        return names if n % 2 == 0 else names[::-1]

    def run(self, name: str, mode: str, call: Callable[[Engram], Sequence[WriteResult]]) -> None:
        """Time ``call`` on backend ``name``; an error stops that backend's writes."""
        tick = time.perf_counter()
        try:
            results = call(self.mems[name])
        except EngramError as exc:
            self.failed[name] = f"{type(exc).__name__}: {exc}"
            return
        elapsed = time.perf_counter() - tick
        self.seconds.setdefault(name, {}).setdefault(mode, []).append(elapsed)
        self.ops.setdefault(name, collections.Counter()).update(r.operation.value for r in results)

    def report(self, count: int, chunk: int) -> dict[str, Any]:
        """Per backend: single-call latency and both modes' records per second."""
        out: dict[str, Any] = {}
        for name in self.mems:
            times = self.seconds.get(name, {})
            one, many = times.get("remember", []), times.get("remember_many", [])
            out[name] = {
                "remember": {
                    **summarize([s * 1000 for s in one]),
                    "records_per_s": round(len(one) / sum(one), 1) if one else None,
                },
                "remember_many": {
                    "chunk": chunk,
                    "calls": len(many),
                    "records_per_s": round(count / sum(many), 1)
                    if len(many) * chunk >= count
                    else None,
                },
                "operations": dict(self.ops.get(name, {})),
                "error": self.failed.get(name),
            }
        return out


def working_phase(mems: Mapping[str, Engram], ops: int, redis_url: str) -> dict[str, Any]:
    """Working-memory set/get: SQLite beside the SQLite store, Redis with PostgreSQL."""
    import redis

    from working import CTX, _engram_ops

    out: dict[str, Any] = {}
    for label, name in (("sqlite", "sqlite"), ("redis", "postgres")):
        times = _engram_ops(mems[name].working(CTX), ops, keys=500)
        out[label] = {op: summarize(values) for op, values in times.items()}
    prefix = mems["postgres"].config.working.redis_prefix
    client = redis.Redis.from_url(redis_url)
    left = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if left:
        client.delete(*left)
    client.close()
    return out
