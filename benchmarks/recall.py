"""Benchmark ``Engram.recall`` (issue: recall).

Not a test. For each store size (records of one user, one scope, written with
``remember_many`` from the benchmark corpus) and each embedder, several hundred
distinct queries (overlap, paraphrase and miss queries, see ``corpus.py``) are
recalled once each, after a few warm-up calls, and this reports:

- ``recall`` p50/p95 (wall time of the call) and the first, cold call;
- the median and p95 of each pipeline stage (``result.trace.stage_ms()``) and of
  each candidate channel (``result.trace.channels``);
- a baseline in the same process: bare semantic retrieval of the same number of
  items (a vector probe of ``max_items``, its records decoded: the least a memory
  service does), and the ratio of recall to it;
- the serial read path (channels one after another, a one-thread float32 scan,
  the read path before the int8 work) on a
  second instance over the same file, each query run through both instances in
  alternating order, so neither profits from caches the other warmed.

Query embedding. With the hashing embedder it is excluded by *pre-embedding*:
every query is embedded before the timed loop and the store's embedder serves
those vectors from a dictionary (a lookup of about a microsecond inside the
``candidates`` stage), so stage timings need no correction; the hashing embed
time per query is measured apart and reported (``query_embed``). With the local
model (MiniLM, ``--local-sizes``) the query is embedded inside the call, as in
production; its share is reported (``query_embed`` and ``embed_share``). Only the
store build reuses vectors: ``--vector-cache DIR`` keeps the corpus vectors of
the local model between runs (building 100K of them takes about 20 minutes here).

Usage: ``PYTHONPATH=src python benchmarks/recall.py [--quick]``; writes
``benchmarks/results/recall.json``. Target: p95 <= 10 ms at 100K, query
embedding excluded.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import dataclasses
import io
import os
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from common import (
    PrecomputedEmbedder,
    TimedEmbedder,
    ask,
    context,
    fill,
    machine,
    print_table,
    ratio,
    summarize,
    temp_dir,
    write_results,
)
from corpus import Corpus, Query
from engram import Engram
from engram.config import Budget, Config
from engram.embed import Embedder, HashingEmbedder, LocalEmbedder
from engram.recall.model import RecallResult
from engram.scope import resolve
from engram.store.contract import VectorProbe
from engram.store.predicate import Visibility

RESULTS = Path(__file__).parent / "results" / "recall.json"
TARGET_P95_MS = 10.0
STATUSES = ("active", "superseded", "expired")
WARMUP = 5
EMBED_CHUNK = 2000


def _median(values: Sequence[float]) -> float:
    return round(float(np.median(values)), 3) if values else 0.0


def _p95(values: Sequence[float]) -> float:
    return round(float(np.percentile(values, 95)), 3) if values else 0.0


# -- vectors for the build -----------------------------------------------------------


def corpus_vectors(
    embedder: Embedder, corpus: Corpus, count: int, cache: Path | None
) -> NDArray[np.float32]:
    """Vectors of the first ``count`` corpus memories, from ``cache`` when present."""
    file = None
    if cache is not None:
        file = cache / f"{embedder.model_id}-seed{corpus.seed}-{count}.npy"
        if file.exists():
            cached: NDArray[np.float32] = np.load(file)
            return cached
    texts = [m.text for m in corpus.memories(0, count)]
    chunks = [embedder.embed(texts[i : i + EMBED_CHUNK]) for i in range(0, count, EMBED_CHUNK)]
    vectors = np.concatenate(chunks).astype(np.float32)
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        np.save(file, vectors)
    return vectors


def build(
    folder: Path,
    name: str,
    inner: Embedder,
    corpus: Corpus,
    count: int,
    chunk: int,
    cache: Path | None,
) -> tuple[Engram, PrecomputedEmbedder]:
    """A store of ``count`` corpus memories for user u0; vectors computed up front."""
    pre = PrecomputedEmbedder(inner)
    texts = [m.text for m in corpus.memories(0, count)]
    pre.add(texts, corpus_vectors(inner, corpus, count, cache))
    mem = Engram.open(f"sqlite:///{folder / name}.db", embedder=pre)  # same URL in run_one
    tick = time.perf_counter()
    fill(mem, "u0", corpus, 0, count, chunk)
    print(f"  built {count:,} records in {time.perf_counter() - tick:.1f} s", flush=True)
    pre.misses = 0
    return mem, pre


# -- measuring -----------------------------------------------------------------------


def query_embed_ms(embedder: Embedder, queries: Sequence[Query]) -> list[float]:
    """Milliseconds to embed each query alone."""
    times = []
    for q in queries:
        tick = time.perf_counter()
        embedder.embed([q.text])
        times.append((time.perf_counter() - tick) * 1000)
    return times


def timed_recalls(
    mem: Engram, queries: Sequence[Query], profile: bool
) -> tuple[list[float], list[RecallResult]]:
    """Recall each query once (wall milliseconds and results)."""
    ctx = context("u0")
    profiler = cProfile.Profile() if profile else None
    times, results = [], []
    if profiler:
        profiler.enable()
    for q in queries:
        tick = time.perf_counter()
        result = mem.recall(ctx, q.text)
        times.append((time.perf_counter() - tick) * 1000)
        results.append(result)
    if profiler:
        profiler.disable()
        _print_profile(profiler)
    return times, results


def _print_profile(profiler: cProfile.Profile) -> None:
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(22)
        print(f"\n--- profile of the timed recalls, by {key} ---\n{out.getvalue()}")


def bare_retrieval_ms(mem: Engram, vectors: NDArray[np.float32], k: int) -> list[float]:
    """Baseline: semantic top ``k`` and its records, nothing else (same process, store)."""
    vis = Visibility.of(resolve(context("u0")))
    model = mem.embedder.model_id
    times = []
    for vector in vectors:
        tick = time.perf_counter()
        ask(mem.store, vis, VectorProbe(vector, model, STATUSES, k))  # the records, decoded
        times.append((time.perf_counter() - tick) * 1000)
    return times


def breakdown(results: Sequence[RecallResult]) -> dict[str, dict[str, float]]:
    """Median and p95 milliseconds of each stage and each candidate channel."""
    stages: dict[str, list[float]] = collections.defaultdict(list)
    channels: dict[str, list[float]] = collections.defaultdict(list)
    for r in results:
        for name, ms in r.trace.stage_ms().items():
            stages[name].append(ms)
        for name, report in r.trace.channels.items():
            channels[f"channel:{name}"].append(report.ms)
    both = {**stages, **channels}
    return {name: {"p50_ms": _median(v), "p95_ms": _p95(v)} for name, v in both.items()}


def outcome(
    results: Sequence[RecallResult], queries: Sequence[Query], corpus: Corpus
) -> dict[str, Any]:
    """What the recalls returned: statuses, items, and how often the memory a query was
    made from is among them (a rough relevance figure, not an evaluation)."""
    hit = [
        any(i.record.content == corpus.memory(q.source).text for i in r.items)
        for q, r in zip(queries, results, strict=True)
        if q.source is not None
    ]
    return {
        "statuses": dict(collections.Counter(r.status.value for r in results)),
        "mean_items": round(float(np.mean([len(r.items) for r in results])), 2),
        "source_memory_returned": round(float(np.mean(hit)), 3) if hit else None,
        "query_kinds": dict(collections.Counter(q.kind for q in queries)),
    }


def measure(
    url: str,
    mem: Engram,
    pre: PrecomputedEmbedder,
    corpus: Corpus,
    size: int,
    args: argparse.Namespace,
    exclude_embed: bool,
) -> dict[str, Any]:
    """Everything reported for one (embedder, size)."""
    queries = corpus.queries(args.queries, range(size), seed=size)
    texts = [q.text for q in queries]
    pre.inner.embed(["warm up: the first call may load the model"])
    embed_ms = query_embed_ms(pre.inner, queries[:100])
    vectors = pre.inner.embed(texts)
    if exclude_embed:
        pre.add(texts, vectors)
    cold_tick = time.perf_counter()
    mem.recall(context("u0"), "cold start: first recall loads the vector partition")
    cold_ms = (time.perf_counter() - cold_tick) * 1000
    for q in corpus.queries(WARMUP, range(size), seed=size + 1):
        mem.recall(context("u0"), q.text)
    serial = open_serial(url, pre if exclude_embed else pre.inner)
    try:
        for q in corpus.queries(WARMUP, range(size), seed=size + 1):
            serial.recall(context("u0"), q.text)
        (times, results), (serial_times, serial_results) = paired_recalls(mem, serial, queries)
    finally:
        serial.close()
    if args.profile and exclude_embed:
        timed_recalls(mem, queries, profile=True)
    base = bare_retrieval_ms(mem, vectors, Budget().max_items)
    report = _report(times, base, cold_ms, embed_ms, exclude_embed)
    serial_recall = summarize(serial_times)
    report.update(
        stages=breakdown(results),
        outcome=outcome(results, queries, corpus),
        texts_embedded_after_build=pre.misses,
        serial_channels={
            "recall": serial_recall,
            "p50_ratio_to_default": ratio(serial_recall["p50_ms"], report["recall"]["p50_ms"]),
            "p95_ratio_to_default": ratio(serial_recall["p95_ms"], report["recall"]["p95_ms"]),
            "stages": breakdown(serial_results),
        },
    )
    return report


def open_serial(url: str, embedder: Embedder) -> Engram:
    """A second instance on the same file with the serial read path: channels one
    after another and the exact float32 scan on one thread (``overlapped_probes``
    empty, ``vector_estimate_rows=0``, ``vector_scan_threads=1``); lexical search is
    the default in-memory BM25 (the FTS5 engine this baseline once used is gone)."""
    base = Config()
    serial = dataclasses.replace(base.store.sqlite, overlapped_probes=frozenset(),
                                 vector_scan_threads=1, vector_estimate_rows=0)  # fmt: skip
    config = dataclasses.replace(base, store=dataclasses.replace(base.store, sqlite=serial))
    return Engram.open(url, embedder=embedder, config=config)


Timed = tuple[list[float], list[RecallResult]]


def paired_recalls(a: Engram, b: Engram, queries: Sequence[Query]) -> tuple[Timed, Timed]:
    """Each query through both instances, alternating which goes first (A B, B A, ...)
    so neither profits from caches the other warmed for the same query."""
    ctx = context("u0")
    out: dict[int, Timed] = {0: ([], []), 1: ([], [])}
    for n, q in enumerate(queries):
        for which in (0, 1) if n % 2 == 0 else (1, 0):
            mem = (a, b)[which]
            tick = time.perf_counter()
            result = mem.recall(ctx, q.text)
            out[which][0].append((time.perf_counter() - tick) * 1000)
            out[which][1].append(result)
    return out[0], out[1]


def _report(
    times: list[float], base: list[float], cold_ms: float, embed_ms: list[float], excluded: bool
) -> dict[str, Any]:
    recall, bare = summarize(times), summarize(base)
    embed = summarize(embed_ms)
    return {
        "query_embedding": "excluded (pre-embedded)" if excluded else "included",
        "recall": recall,
        "cold_first_recall_ms": round(cold_ms, 2),
        "baseline_bare_vector_topk_fetch": bare,
        "p50_ratio": ratio(recall["p50_ms"], bare["p50_ms"]),
        "p95_ratio": ratio(recall["p95_ms"], bare["p95_ms"]),
        "query_embed": embed,
        "embed_share_of_p50": None if excluded else ratio(embed["p50_ms"], recall["p50_ms"]),
        "meets_p95_target": excluded and recall["p95_ms"] <= TARGET_P95_MS,
    }


def run_one(
    folder: Path, kind: str, size: int, corpus: Corpus, args: argparse.Namespace
) -> dict[str, Any]:
    """Build the store of one (embedder, size), measure it, close it."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n== {kind}, {size:,} records (load {load})", flush=True)
    inner: Embedder = HashingEmbedder() if kind == "hashing" else TimedEmbedder(LocalEmbedder())
    mem, pre = build(folder, f"{kind}-{size}", inner, corpus, size, args.chunk, args.vector_cache)
    try:
        url = f"sqlite:///{folder / f'{kind}-{size}'}.db"
        report = measure(url, mem, pre, corpus, size, args, exclude_embed=kind == "hashing")
    finally:
        mem.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{folder / f'{kind}-{size}'}.db{suffix}").unlink(missing_ok=True)
    report["records"] = size
    report["embedder"] = kind
    return report


# -- driver -------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    """Comma-separated store sizes ("" for none)."""
    sizes = [int(x) for x in text.split(",") if x.strip()]
    if any(n <= 0 for n in sizes):
        raise argparse.ArgumentTypeError(f"store sizes must be positive, got {text!r}")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags; ``--quick`` shrinks the sizes unless they are given."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small stores, few queries")
    parser.add_argument("--sizes", type=_sizes, help="store sizes, hashing (10000,100000)")
    parser.add_argument("--local-sizes", type=_sizes, help="store sizes, local model")
    parser.add_argument("--queries", type=int, help="distinct queries per store (400)")
    parser.add_argument("--chunk", type=int, default=1000, help="records per remember_many")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    parser.add_argument("--vector-cache", type=Path, help="directory caching corpus vectors")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the timed recalls of each hashing store"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file")
    args = parser.parse_args(argv)
    defaults = (
        {"sizes": [2000], "local_sizes": [2000], "queries": 60}
        if args.quick
        else {"sizes": [10_000, 100_000], "local_sizes": [10_000, 100_000], "queries": 400}
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def print_summary(runs: Sequence[dict[str, Any]]) -> None:
    """Latency table and stage table."""
    rows = []
    for r in runs:
        rec, base = r["recall"], r["baseline_bare_vector_topk_fetch"]
        rows.append(
            [
                r["embedder"],
                r["records"],
                r["query_embedding"],
                rec["p50_ms"],
                rec["p95_ms"],
                r["cold_first_recall_ms"],
                base["p50_ms"],
                base["p95_ms"],
                r["p50_ratio"],
                r["p95_ratio"],
                r["query_embed"]["p50_ms"],
            ]
        )
    print_table(
        "Engram.recall (ms)",
        [
            "embedder",
            "records",
            "query embedding",
            "p50",
            "p95",
            "cold",
            "bare p50",
            "bare p95",
            "x p50",
            "x p95",
            "embed p50",
        ],
        rows,
    )
    capped = [
        [
            r["embedder"],
            r["records"],
            r["serial_channels"]["recall"]["p50_ms"],
            r["serial_channels"]["recall"]["p95_ms"],
            r["serial_channels"]["p50_ratio_to_default"],
            r["serial_channels"]["p95_ratio_to_default"],
        ]
        for r in runs
    ]
    print_table(
        "Engram.recall with the serial read path (same process, file and queries)",
        ["embedder", "records", "p50", "p95", "x p50", "x p95"],
        capped,
    )
    names = list(dict.fromkeys(n for r in runs for n in r["stages"]))
    stage_rows = [
        [
            n,
            *(
                x["stages"].get(n, {}).get("p50_ms")
                for r in runs
                for x in (r, r["serial_channels"])
            ),
        ]
        for n in names
    ]
    header = [
        "stage (median ms)",
        *(f"{r['embedder']} {r['records']:,}{tag}" for r in runs for tag in ("", " serial")),
    ]
    print_table("Per stage", header, stage_rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Run every (embedder, size) and write the results file."""
    args = parse_args(argv)
    info = machine(sys.argv)
    corpus = Corpus(seed=args.seed)
    started = time.perf_counter()
    runs = []
    with temp_dir("engram-recall-") as folder:
        plan = [("hashing", n) for n in args.sizes] + [("local", n) for n in args.local_sizes]
        for kind, size in plan:
            runs.append(run_one(folder, kind, size, corpus, args))
    print_summary(runs)
    results = {
        "machine": info,
        "sizes": {
            "hashing": args.sizes,
            "local": args.local_sizes,
            "queries": args.queries,
            "chunk": args.chunk,
            "seed": args.seed,
        },
        "target_p95_ms_at_100k_embedding_excluded": TARGET_P95_MS,
        "runs": runs,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    write_results(args.out, results)


if __name__ == "__main__":
    main()
