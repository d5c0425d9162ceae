"""Benchmark the core store and the write path (issue: core store and write path).

Not a test. Every figure is a median (p50) or 95th percentile over calls made in
this process, next to a baseline measured in the same process:

1. bulk ``remember_many`` of ``--bulk`` records into one user's scope, in chunks
   of ``--chunk`` (hashing embedder), in records/s; baselines: raw ``sqlite3``
   ``executemany`` of as many equivalent rows into a plain table (the floor),
   and into Engram's own schema (indexes, counter triggers, vectors; no Python);
2. bulk ``remember_many`` of ``--local-bulk`` records with the local model, in
   records/s, and the share of that time spent embedding;
3. single ``remember`` p50/p95 on a store of ``--single-store`` records (hashing,
   and local on the local bulk store);
4. the candidate queries ``by_key``, ``lexical``, ``vector`` and ``recent`` at
   ``--bulk`` records in one scope, and on a store of ``--users`` users with
   ``--per-user`` records each (built within ``--budget-min`` minutes; the size
   actually built is reported). Baselines: ``vector``: an unscoped numpy scan
   of every vector of the store, then a post-filter to the caller; ``lexical``:
   none (its FTS5 baseline was removed with the FTS5 engine);
   ``by_key``/``recent``: the same SQL statement replayed on a raw connection
   (no ``Record`` objects);
5. the vector recall property: a user holding 0.1 % of the vectors gets k
   results for k=10 (and they are the exact scoped top 10).

Queries use the recall plan's statuses and limits (``RecallConfig``). Stores are
temporary SQLite files, deleted afterwards. Targets: bulk >= 1,000 records/s
(hashing); candidate queries p95 <= 10 ms at 100K.

Usage: ``PYTHONPATH=src python benchmarks/core.py [--quick]``; writes
``benchmarks/results/core.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import hashlib
import io
import json
import os
import pstats
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from common import (
    TENANT,
    Fill,
    TimedEmbedder,
    ask,
    blas_threads,
    context,
    fill,
    machine,
    print_table,
    ratio,
    summarize,
    temp_dir,
    time_calls,
    write_results,
)
from corpus import Corpus, Query
from engram import Context, Engram
from engram.config import RecallConfig
from engram.embed import Embedder, HashingEmbedder, LocalEmbedder
from engram.scope import resolve
from engram.store.contract import KeyProbe, LexicalProbe, RecentProbe, VectorProbe
from engram.store.predicate import Visibility
from engram.store.rows import COLUMNS
from engram.store.sqlite import SQLiteStore

RESULTS = Path(__file__).parent / "results" / "core.json"
STATUSES = ("active", "superseded", "expired")  # what a recall plan asks for
RC = RecallConfig()
LIMITS = {
    "by_key": RC.key_limit,
    "lexical": RC.lexical_limit,
    "vector": RC.vector_limit,
    "recent": RC.working_limit,
}
TARGET_BULK_PER_S = 1000.0
TARGET_P95_MS = 10.0
PROFILE: set[str] = set()


@contextmanager
def profiled(stage: str) -> Iterator[None]:
    """cProfile the block when ``--profile`` names ``stage``; print the top functions."""
    if stage not in PROFILE:
        yield
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(18)
        print(f"\n--- profile: {stage} (sorted by own time) ---\n{out.getvalue()}")


def open_store(path: Path, embedder: Embedder) -> Engram:
    """An Engram on a fresh SQLite file."""
    return Engram.open(f"sqlite:///{path}", embedder=embedder)


# -- 1. bulk writes and their raw floors --------------------------------------------------


def bench_bulk(mem: Engram, corpus: Corpus, count: int, chunk: int) -> dict[str, Any]:
    """Fill ``mem`` for user u0 and report records/s and where the time went."""
    timed = mem.embedder
    assert isinstance(timed, TimedEmbedder)
    with profiled("bulk"):
        result = fill(mem, "u0", corpus, 0, count, chunk)
    return _fill_report(result, timed)


def _fill_report(result: Fill, timed: TimedEmbedder) -> dict[str, Any]:
    per_chunk = [
        len_ / s for len_, s in zip(_chunk_sizes(result), result.chunk_seconds, strict=True)
    ]
    tenth = max(1, len(per_chunk) // 10)
    return {
        "records": result.requested,
        "seconds": round(result.seconds, 2),
        "records_per_s": round(result.rate, 1),
        "embed_seconds": round(timed.seconds, 2),
        "embed_share": round(timed.seconds / result.seconds, 3) if result.seconds else None,
        "first_tenth_records_per_s": round(statistics.median(per_chunk[:tenth]), 1),
        "last_tenth_records_per_s": round(statistics.median(per_chunk[-tenth:]), 1),
        "operations": dict(result.operations),
    }


def _chunk_sizes(result: Fill) -> list[int]:
    chunks = len(result.chunk_seconds)
    size = -(-result.requested // chunks) if chunks else 0
    sizes = [size] * chunks
    if chunks:
        sizes[-1] = result.requested - size * (chunks - 1)
    return sizes


def _plain_rows(corpus: Corpus, count: int, dim: int) -> list[tuple[Any, ...]]:
    """Rows shaped like ``records`` (every column) plus a vector blob, built up front."""
    blob = np.zeros(dim, dtype=np.float32).tobytes()
    rows = []
    for m in corpus.memories(0, count):
        digest = hashlib.sha256(m.text.encode()).hexdigest()
        at = 1_735_689_600_000_000 + m.index * 420_000_000
        rows.append(
            (
                f"{m.index:026d}",
                TENANT,
                "u0",
                "",
                "user",
                "semantic",
                m.type,
                m.key,
                None if m.value is None else f'"{m.value}"',
                m.text,
                digest,
                "explicit_user",
                1.0,
                "user",
                None,
                "[]",
                at,
                None,
                None,
                at,
                at,
                "active",
                1,
                None,
                None,
                None,
                "low",
                None,
                None,
                "long_term",
                None,
                0.5,
                0,
                None,
                0,
                "hashing",
                "",
                blob,
            )
        )
    return rows


def _timed_executemany(
    conn: sqlite3.Connection, statements: Sequence[str], rows: Sequence[tuple[Any, ...]], chunk: int
) -> float:
    """Insert ``rows`` with each statement, one transaction per chunk; seconds."""
    start = time.perf_counter()
    for offset in range(0, len(rows), chunk):
        block = rows[offset : offset + chunk]
        conn.execute("BEGIN IMMEDIATE")
        for sql in statements:
            conn.executemany(sql, block)
        conn.execute("COMMIT")
    return time.perf_counter() - start


def _raw_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def bench_raw_floors(folder: Path, corpus: Corpus, count: int, chunk: int) -> dict[str, Any]:
    """Raw executemany of equivalent rows: into a plain table, and into Engram's schema."""
    rows = _plain_rows(corpus, count, 384)
    cols = (*COLUMNS, "vector")
    plain = _raw_connection(folder / "plain.db")
    plain.execute(f"CREATE TABLE plain ({', '.join(cols)})")
    marks = ", ".join("?" * len(cols))
    plain_s = _timed_executemany(plain, [f"INSERT INTO plain VALUES ({marks})"], rows, chunk)
    plain.close()
    SQLiteStore(str(folder / "schema.db")).close()  # creates Engram's schema
    schema = _raw_connection(folder / "schema.db")
    rec = f"INSERT INTO records ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    vec = (
        "INSERT INTO vectors (record_id, tenant_id, user_id, model, vector)"
        " SELECT ?1, ?2, ?3, 'hashing', ?38"
    )
    vec_rows = [(*r[:37], r[37]) for r in rows]
    schema_s = _timed_executemany(schema, [rec], rows_without_vector(rows), chunk)
    schema_s += _timed_executemany(schema, [vec], vec_rows, chunk)
    schema.close()
    return {
        "plain_table": {
            "records": count,
            "seconds": round(plain_s, 3),
            "records_per_s": round(count / plain_s, 1),
        },
        "engram_schema": {
            "records": count,
            "seconds": round(schema_s, 3),
            "records_per_s": round(count / schema_s, 1),
        },
    }


def rows_without_vector(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The ``records`` columns of plain rows (the vector blob dropped)."""
    return [r[:-1] for r in rows]


# -- 2. and 3. local model bulk, single remembers -------------------------------------------


def bench_singles(mem: Engram, corpus: Corpus, start: int, count: int) -> dict[str, Any]:
    """``count`` single ``remember`` calls of new corpus memories for user u0."""
    ctx = context("u0")
    items = [m.item() for m in corpus.memories(start, count)]
    calls = [lambda item=item: mem.remember(ctx, **item) for item in items]
    with profiled("single"):
        times = time_calls(calls, warmup=0)
    return summarize(times)


def bench_local(
    folder: Path, corpus: Corpus, count: int, chunk: int, singles: int
) -> dict[str, Any]:
    """Bulk write with the local model (embed share), then single remembers on it."""
    timed = TimedEmbedder(LocalEmbedder())
    timed.inner.embed(["warm up the model"])  # model load is not a write cost
    mem = open_store(folder / "local.db", timed)
    try:
        result = fill(mem, "u0", corpus, 0, count, chunk)
        bulk = _fill_report(result, timed)
        bulk["backend"] = str(getattr(timed.inner, "active_backend", None))
        single = bench_singles(mem, corpus, count, singles)
    finally:
        mem.close()
    return {"bulk": bulk, "single_remember": single}


def bench_single_hashing(
    folder: Path, corpus: Corpus, size: int, singles: int, chunk: int
) -> dict[str, Any]:
    """Single remembers (hashing) on a store of ``size`` records."""
    mem = open_store(folder / "single.db", TimedEmbedder(HashingEmbedder()))
    try:
        fill(mem, "u0", corpus, 0, size, chunk)
        return {"store_records": size, **bench_singles(mem, corpus, size, singles)}
    finally:
        mem.close()


# -- 4. candidate queries ---------------------------------------------------------------


def user_keys(path: Path, user: str, count: int, seed: int) -> list[str]:
    """``count`` keys the user's records hold (sampled deterministically)."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT DISTINCT key FROM records WHERE tenant_id = ? AND user_id = ? AND key IS NOT NULL",
        (TENANT, user),
    ).fetchall()
    conn.close()
    keys = sorted(r[0] for r in rows)
    return random.Random(seed).sample(keys, min(count, len(keys)))


def candidate_calls(mem: Engram, probe: Probe) -> dict[str, list[Callable[[], object]]]:
    """One call per query (or key) for each candidate query of the store."""
    store, vis, model = mem.store, probe.vis, mem.embedder.model_id
    recent = RecentProbe(STATUSES, LIMITS["recent"])
    return {
        "by_key": [partial(ask, store, vis, KeyProbe(STATUSES, LIMITS["by_key"], keys=(k,)))
                   for k in probe.keys],
        "lexical": [partial(ask, store, vis, LexicalProbe(q.text, STATUSES, LIMITS["lexical"]))
                    for q in probe.queries],
        "vector": [partial(ask, store, vis, VectorProbe(v, model, STATUSES, LIMITS["vector"]))
                   for v in probe.vectors],
        "recent": [partial(ask, store, vis, recent)] * len(probe.queries),
    }  # fmt: skip


def time_candidates(mem: Engram, probes: Sequence[Probe]) -> dict[str, list[float]]:
    """Time every candidate query of every probe; the first vector call per user is
    timed apart as ``vector_cold`` (it loads the user's partition into memory)."""
    times: dict[str, list[float]] = {"vector_cold": []}
    for probe in probes:
        calls = candidate_calls(mem, probe)
        times["vector_cold"] += time_calls(calls["vector"][:1], warmup=0)
    for name in ("by_key", "lexical", "vector", "recent"):
        with profiled(name):
            for probe in probes:
                times.setdefault(name, []).extend(time_calls(candidate_calls(mem, probe)[name]))
    with blas_threads(1):  # the same vector calls with BLAS capped to one thread
        times["vector_blas1"] = [
            t for probe in probes for t in time_calls(candidate_calls(mem, probe)["vector"])
        ]
    return times


# -- baselines for candidate queries ----------------------------------------------------


def captured(mem: Engram, call: Callable[[], object]) -> list[tuple[str, dict[str, Any]]]:
    """The statements a store call emits (through the store's tracer hook)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    mem.store.tracer = lambda sql, params: seen.append((sql, dict(params)))
    try:
        call()
    finally:
        mem.store.tracer = None
    return seen


def replayed(
    mem: Engram, conn: sqlite3.Connection, calls: Sequence[Callable[[], object]]
) -> list[Callable[[], object]]:
    """The single statement of each store call, replayed raw (no Record objects)."""
    out: list[Callable[[], object]] = []
    for call in calls:
        (sql, params), *_ = captured(mem, call)
        out.append(partial(_fetch, conn, sql, params))
    return out


def _fetch(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> list[Any]:
    """Run one statement and fetch every row."""
    return conn.execute(sql, params).fetchall()


def top_rows(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """Positions of the k highest scores, best first."""
    if k >= scores.size:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


@dataclass
class AllVectors:
    """Every vector of the store in one matrix with its owner and a status mask: the
    unscoped baseline (score everything, filter afterwards). Every benchmark record
    is in its owner's ``user`` scope with no agent, so the owner column is the whole
    visibility rule here."""

    matrix: NDArray[np.float32]
    ids: list[str]
    users: NDArray[np.int32]
    codes: dict[str, int]
    alive: NDArray[np.bool_]

    @classmethod
    def load(cls, conn: sqlite3.Connection, dim: int) -> AllVectors:
        """Read every vector with its record's owner and status, in batches."""
        total = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        matrix = np.empty((total, dim), dtype=np.float32)
        ids: list[str] = []
        users = np.empty(total, dtype=np.int32)
        alive = np.empty(total, dtype=bool)
        codes: dict[str, int] = {}
        cursor = conn.execute(
            "SELECT v.record_id, r.user_id, r.status IN (SELECT value FROM json_each(?)),"
            " v.vector FROM vectors v JOIN records r ON r.id = v.record_id ORDER BY v.seq",
            (json.dumps(STATUSES),),
        )
        while batch := cursor.fetchmany(20_000):
            at, end = len(ids), len(ids) + len(batch)
            matrix[at:end] = np.frombuffer(b"".join(r[3] for r in batch), np.float32).reshape(
                len(batch), dim
            )
            users[at:end] = [codes.setdefault(r[1], len(codes)) for r in batch]
            alive[at:end] = [bool(r[2]) for r in batch]
            ids.extend(r[0] for r in batch)
        return cls(matrix, ids, users, codes, alive)

    def scan(self, user: str, query: NDArray[np.float32], k: int) -> list[str]:
        """Unscoped: score every row, then keep the user's live rows and take the top k."""
        scores = self.matrix @ query
        rows = np.flatnonzero((self.users == self.codes.get(user, -1)) & self.alive)
        return [self.ids[i] for i in rows[top_rows(scores[rows], k)]]

    def global_top_survivors(self, user: str, query: NDArray[np.float32], k: int) -> int:
        """How many of an unscoped top k belong to the user (top-k, then post-filter)."""
        best = top_rows(self.matrix @ query, k)
        mine = (self.users[best] == self.codes.get(user, -1)) & self.alive[best]
        return int(mine.sum())


@dataclass
class Probe:
    """What the candidate queries of one user run on."""

    user: str
    vis: Visibility
    queries: list[Query]
    vectors: NDArray[np.float32]
    keys: list[str]


def make_probe(
    mem: Engram, path: Path, corpus: Corpus, user: str, sources: range, count: int, seed: int
) -> Probe:
    """Queries about the user's memories, pre-embedded (embedding is not part of a
    candidate query), and keys the user holds."""
    queries = corpus.queries(count, sources, seed=seed)
    vectors = mem.embedder.embed([q.text for q in queries])
    keys = user_keys(path, user, count, seed)
    return Probe(user, Visibility.of(resolve(context(user))), queries, vectors, keys)


def time_baselines(
    mem: Engram, path: Path, probes: Sequence[Probe], allv: AllVectors
) -> dict[str, list[float]]:
    """The same work without what each candidate query adds (see the module docstring)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    times: dict[str, list[float]] = {name: [] for name in LIMITS}
    try:
        for probe in probes:
            calls = candidate_calls(mem, probe)
            times["by_key"] += time_calls(replayed(mem, conn, calls["by_key"]))
            times["recent"] += time_calls(replayed(mem, conn, calls["recent"]))
            scans = [
                lambda v=v, u=probe.user: allv.scan(u, v, LIMITS["vector"]) for v in probe.vectors
            ]
            times["vector"] += time_calls(scans)
    finally:
        conn.close()
    return times


BASELINE_KIND = {
    "by_key": "same SQL replayed on a raw connection",
    "lexical": "none (the FTS5 baseline went with the FTS5 engine, schema 0011)",
    "vector": "unscoped numpy scan of all vectors, then post-filter",
    "recent": "same SQL replayed on a raw connection",
}


def candidate_report(times: dict[str, list[float]], base: dict[str, list[float]]) -> dict[str, Any]:
    """Summaries of each candidate query next to its baseline, with ratios."""
    report: dict[str, Any] = {"vector_cold": summarize(times["vector_cold"])}
    capped, default = summarize(times["vector_blas1"]), summarize(times["vector"])
    report["vector_blas1"] = {
        "engram": capped,
        "what": "the vector calls again inside threadpoolctl.threadpool_limits(1, 'blas')",
        "p50_ratio_to_default": ratio(capped.get("p50_ms", 0), default.get("p50_ms", 0)),
        "p95_ratio_to_default": ratio(capped.get("p95_ms", 0), default.get("p95_ms", 0)),
    }
    for name in LIMITS:
        engram, baseline = summarize(times[name]), summarize(base[name])
        report[name] = {
            "limit": LIMITS[name],
            "engram": engram,
            "baseline": baseline,
            "baseline_kind": BASELINE_KIND[name],
            "p50_ratio": ratio(engram.get("p50_ms", 0), baseline.get("p50_ms", 0)),
            "p95_ratio": ratio(engram.get("p95_ms", 0), baseline.get("p95_ms", 0)),
            "meets_p95_target": engram.get("p95_ms", 1e9) <= TARGET_P95_MS,
        }
    return report


def recall_property(
    mem: Engram, probes: Sequence[Probe], allv: AllVectors, k: int = 10
) -> dict[str, Any]:
    """Does each user get k results for k, equal to the exact scoped top k?"""
    full = exact = calls = 0
    survivors: list[int] = []
    model = mem.embedder.model_id
    for probe in probes:
        for vector in probe.vectors:
            found = ask(mem.store, probe.vis, VectorProbe(vector, model, STATUSES, k))
            hits = [r.id for r, _ in found]
            truth = allv.scan(probe.user, vector, k)
            calls += 1
            full += len(hits) == min(k, len(truth))
            exact += set(hits) == set(truth)
            survivors.append(allv.global_top_survivors(probe.user, vector, k))
    user_share = float(np.mean([np.mean(allv.users == allv.codes[p.user]) for p in probes]))
    return {
        "k": k,
        "calls": calls,
        "user_share_of_vectors": round(user_share, 6),
        "calls_with_k_results": full,
        "calls_equal_to_exact_scoped_top_k": exact,
        "unscoped_top_k_then_filter_mean_results": round(float(np.mean(survivors)), 3),
        "holds": full == calls,
    }


def bench_candidates(
    mem: Engram,
    path: Path,
    corpus: Corpus,
    users: Sequence[str],
    sources: Callable[[str], range],
    queries: int,
) -> dict[str, Any]:
    """Candidate queries for ``users`` (``queries`` in all), baselines, recall property."""
    per_user = max(1, queries // len(users))
    probes = [
        make_probe(mem, path, corpus, u, sources(u), per_user, seed=n) for n, u in enumerate(users)
    ]
    times = time_candidates(mem, probes)
    tick = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    allv = AllVectors.load(conn, mem.embedder.dimension)
    conn.close()
    load_s = time.perf_counter() - tick
    report = candidate_report(times, time_baselines(mem, path, probes, allv))
    report["baseline_matrix"] = {"rows": len(allv.ids), "load_seconds": round(load_s, 2)}
    report["recall_property"] = recall_property(mem, probes, allv)
    report["query_kinds"] = dict(collections.Counter(q.kind for p in probes for q in p.queries))
    return report


# -- 5. many users ----------------------------------------------------------------------


def build_many(
    mem: Engram, corpus: Corpus, users: int, per_user: int, chunk: int, budget_s: float
) -> dict[str, Any]:
    """``per_user`` records for each of ``users`` users, stopping when the budget is spent."""
    timed = mem.embedder
    assert isinstance(timed, TimedEmbedder)
    result, start, built = Fill(), time.perf_counter(), 0
    for n in range(users):
        if time.perf_counter() - start > budget_s:
            break
        fill(mem, f"u{n}", corpus, n * per_user, per_user, chunk, result)
        built += 1
    report = _fill_report(result, timed)
    report.update(
        users_requested=users,
        users_built=built,
        per_user=per_user,
        wall_seconds=round(time.perf_counter() - start, 1),
        budget_seconds=budget_s,
        budget_exhausted=built < users,
    )
    return report


# -- driver -------------------------------------------------------------------------------

FULL = {
    "bulk": 100_000,
    "local_bulk": 10_000,
    "single_store": 10_000,
    "singles": 300,
    "queries": 300,
    "users": 1000,
    "per_user": 1000,
    "sample_users": 50,
    "budget_min": 25.0,
}
QUICK = {
    "bulk": 5000,
    "local_bulk": 500,
    "single_store": 2000,
    "singles": 50,
    "queries": 60,
    "users": 20,
    "per_user": 1000,
    "sample_users": 5,
    "budget_min": 2.0,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Sizes default to the full run (``FULL``), or to ``QUICK`` with ``--quick``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, about two minutes")
    parser.add_argument("--bulk", type=int, help="records for the bulk write and 100K queries")
    parser.add_argument("--chunk", type=int, default=1000, help="records per remember_many")
    parser.add_argument("--local-bulk", type=int, help="records written with the local model")
    parser.add_argument("--single-store", type=int, help="store size for single remembers")
    parser.add_argument("--singles", type=int, help="single remember calls to time")
    parser.add_argument("--queries", type=int, help="candidate queries per store (all users)")
    parser.add_argument("--users", type=int, help="users in the many-user store")
    parser.add_argument("--per-user", type=int, help="records per user in that store")
    parser.add_argument("--sample-users", type=int, help="users queried in that store")
    parser.add_argument("--budget-min", type=float, help="minutes allowed to build that store")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["raw", "single", "local", "many"],
        help="leave a section out",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        choices=["bulk", "single", "by_key", "lexical", "vector", "recent"],
        help="print a cProfile summary of that stage",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def section(title: str) -> float:
    """Announce a section; its start time."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n== {title} (load {load})", flush=True)
    return time.perf_counter()


def run_single_scope(folder: Path, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    """Bulk write into one scope, then the candidate queries on that store."""
    path = folder / "bulk.db"
    mem = open_store(path, TimedEmbedder(HashingEmbedder()))
    try:
        started = section(f"bulk remember_many of {args.bulk:,} (hashing)")
        bulk = bench_bulk(mem, corpus, args.bulk, args.chunk)
        bulk["meets_target"] = bulk["records_per_s"] >= TARGET_BULK_PER_S
        section(f"candidate queries at {args.bulk:,} records, one scope")
        queries = bench_candidates(
            mem, path, corpus, ["u0"], lambda u: range(args.bulk), args.queries
        )
        queries["store"] = {"records": args.bulk, "users": 1}
        section("vector query when visibility excludes 1 % of the partition")
        partial = bench_partial_visibility(mem, corpus, args.bulk, args.queries)
        return {
            "bulk": bulk,
            "candidates": queries,
            "vector_partial_visibility": partial,
            "wall_seconds": round(time.perf_counter() - started, 1),
        }
    finally:
        mem.close()


def bench_partial_visibility(mem: Engram, corpus: Corpus, start: int, count: int) -> dict[str, Any]:
    """Add 1 % more records written by an agent, then time ``store.vector`` for a
    reader of the same partition who sees every row (that agent) and for one who
    sees 99 % of it (no agent: agent-specific records are hidden from it)."""
    agent = Context(tenant_id=TENANT, user_id="u0", agent_id="coder")
    extra = max(1, start // 100)
    mem.remember_many(agent, [m.item() for m in corpus.memories(start, extra)])
    queries = corpus.queries(count, range(start + extra), seed=3)
    vectors = mem.embedder.embed([q.text for q in queries])
    model = mem.embedder.model_id
    report: dict[str, Any] = {}
    for label, ctx in (("sees_all_rows", agent), ("sees_99_percent", context("u0"))):
        vis = Visibility.of(resolve(ctx))
        calls = [partial(ask, mem.store, vis, VectorProbe(v, model, STATUSES, LIMITS["vector"]))
                 for v in vectors]  # fmt: skip
        report[label] = summarize(time_calls(calls))
    full, hidden = report["sees_all_rows"], report["sees_99_percent"]
    report["p50_ratio"] = ratio(hidden["p50_ms"], full["p50_ms"])
    report["p95_ratio"] = ratio(hidden["p95_ms"], full["p95_ms"])
    report["records"] = start + extra
    return report


def run_many(folder: Path, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    """Build the many-user store within the budget, then query a sample of its users."""
    path = folder / "many.db"
    mem = open_store(path, TimedEmbedder(HashingEmbedder()))
    try:
        started = section(f"build {args.users:,} users x {args.per_user:,} records")
        build = build_many(mem, corpus, args.users, args.per_user, args.chunk, args.budget_min * 60)
        built = build["users_built"]
        step = max(1, built // args.sample_users)
        users = [f"u{n}" for n in range(0, built, step)][: args.sample_users]
        section(f"candidate queries at {build['records']:,} records, {built:,} users")

        def sources(user: str) -> range:
            n = int(user[1:])
            return range(n * args.per_user, (n + 1) * args.per_user)

        queries = bench_candidates(mem, path, corpus, users, sources, args.queries)
        queries["store"] = {
            "records": build["records"],
            "users": built,
            "users_queried": len(users),
        }
        return {
            "build": build,
            "candidates": queries,
            "wall_seconds": round(time.perf_counter() - started, 1),
        }
    finally:
        mem.close()


def run_sections(folder: Path, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    """Every section not skipped, in order; each returns its part of the results."""
    out: dict[str, Any] = {"single_scope": run_single_scope(folder, corpus, args)}
    if "raw" not in args.skip:
        section(f"raw executemany floors of {args.bulk:,} rows")
        out["raw_floors"] = bench_raw_floors(folder, corpus, args.bulk, args.chunk)
    if "single" not in args.skip:
        section(f"single remember (hashing) on {args.single_store:,}")
        out["single_remember_hashing"] = bench_single_hashing(
            folder, corpus, args.single_store, args.singles, args.chunk
        )
    if "local" not in args.skip:
        section(f"local model: bulk {args.local_bulk:,}, then single remembers")
        out["local"] = bench_local(folder, corpus, args.local_bulk, args.chunk, args.singles)
    if "many" not in args.skip:
        out["many_users"] = run_many(folder, corpus, args)
    return out


def print_summary(results: dict[str, Any]) -> None:
    """The tables of the run."""
    single = results["single_scope"]
    rows = [
        [
            "remember_many hashing",
            single["bulk"]["records"],
            single["bulk"]["records_per_s"],
            single["bulk"]["embed_share"],
        ]
    ]
    for name, floor in results.get("raw_floors", {}).items():
        rows.append([f"raw executemany, {name}", floor["records"], floor["records_per_s"], None])
    if "local" in results:
        bulk = results["local"]["bulk"]
        rows.append(
            ["remember_many local", bulk["records"], bulk["records_per_s"], bulk["embed_share"]]
        )
    if "many_users" in results:
        build = results["many_users"]["build"]
        rows.append(
            [
                f"remember_many hashing, {build['users_built']} users",
                build["records"],
                build["records_per_s"],
                build["embed_share"],
            ]
        )
    print_table("Bulk writes", ["what", "records", "records/s", "embed share"], rows)
    _print_singles(results)
    for key in ("single_scope", "many_users"):
        if key in results:
            _print_candidates(results[key]["candidates"])
    vis_report = results["single_scope"]["vector_partial_visibility"]
    rows = [
        [label.replace("_", " "), vis_report[label]["p50_ms"], vis_report[label]["p95_ms"]]
        for label in ("sees_all_rows", "sees_99_percent")
    ]
    rows.append(["ratio", vis_report["p50_ratio"], vis_report["p95_ratio"]])
    print_table(
        f"store.vector, {vis_report['records']:,} records, one partition",
        ["reader", "p50 ms", "p95 ms"],
        rows,
    )


def _print_singles(results: dict[str, Any]) -> None:
    rows = []
    if "single_remember_hashing" in results:
        s = results["single_remember_hashing"]
        rows.append(["hashing", s["store_records"], s["p50_ms"], s["p95_ms"]])
    if "local" in results:
        s = results["local"]["single_remember"]
        rows.append(["local", results["local"]["bulk"]["records"], s["p50_ms"], s["p95_ms"]])
    if rows:
        print_table("Single remember", ["embedder", "store", "p50 ms", "p95 ms"], rows)


def _print_candidates(report: dict[str, Any]) -> None:
    store = report["store"]
    rows = []
    for name in LIMITS:
        r = report[name]
        rows.append(
            [
                name,
                r["engram"]["p50_ms"],
                r["engram"]["p95_ms"],
                r["baseline"].get("p50_ms"),
                r["baseline"].get("p95_ms"),
                r["p50_ratio"],
                r["p95_ratio"],
                r["baseline_kind"],
            ]
        )
    capped = report["vector_blas1"]["engram"]
    rows.append(
        [
            "vector (BLAS 1 thread)",
            capped["p50_ms"],
            capped["p95_ms"],
            None,
            None,
            None,
            None,
            "same calls under threadpool_limits(1, 'blas')",
        ]
    )
    cold = report["vector_cold"]
    rows.append(
        [
            "vector (cold load)",
            cold["p50_ms"],
            cold["p95_ms"],
            None,
            None,
            None,
            None,
            "first call per user loads the partition",
        ]
    )
    title = f"Candidate queries, {store['records']:,} records, {store['users']:,} user(s)"
    print_table(
        title, ["query", "p50", "p95", "base p50", "base p95", "x p50", "x p95", "baseline"], rows
    )
    prop = report["recall_property"]
    print(
        f"vector recall property (k={prop['k']}): {prop['calls_with_k_results']}/"
        f"{prop['calls']} calls got k results, {prop['calls_equal_to_exact_scoped_top_k']} "
        f"equal the exact scoped top k; user share of vectors {prop['user_share_of_vectors']};"
        f" unscoped top-k then filter keeps {prop['unscoped_top_k_then_filter_mean_results']}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and write the results file."""
    args = parse_args(argv)
    PROFILE.update(args.profile)
    info = machine(sys.argv)
    started = time.perf_counter()
    with temp_dir("engram-core-") as folder:
        results: dict[str, Any] = {"machine": info}
        results.update(run_sections(folder, Corpus(seed=args.seed), args))
    results["sizes"] = {k: v for k, v in vars(args).items() if k not in ("out", "profile")}
    results["targets"] = {
        "bulk_records_per_s": TARGET_BULK_PER_S,
        "candidate_p95_ms_at_100k": TARGET_P95_MS,
    }
    results["wall_seconds"] = round(time.perf_counter() - started, 1)
    print_summary(results)
    write_results(args.out, results)


if __name__ == "__main__":
    main()
