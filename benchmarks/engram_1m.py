"""Engram alone at large scale (default 1M records) with the hashing embedder.

Loading one ``remember`` at a time would take far too long at this size, so the
store is bulk-loaded with ``remember_many`` in chunks (default 1,000 items per
call, one transaction each). Then, on the loaded store, it times single
``remember`` adds, ``recall`` searches and the store-only search path, exactly
as ``benchmarks/peers.py`` does for the peers comparison::

    .venv-peers/bin/python benchmarks/engram_1m.py --size 1000000 \\
        --out benchmarks/results/engram-1m-hashing.json

A load that exceeds ``--budget-min`` stops early and is reported as not
finished, with the number of records actually loaded; the timed operations
then run on what was loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import peers


def bulk_load(
    peer: peers.EngramPeer, corpus: Sequence[peers.Record], chunk: int, budget_s: float
) -> dict[str, Any]:
    """``remember_many`` in chunks until the corpus or the time budget runs out."""
    deadline = time.monotonic() + budget_s
    start = time.perf_counter()
    loaded = 0
    chunk_s: list[float] = []
    for i in range(0, len(corpus), chunk):
        if time.monotonic() > deadline:
            break
        part = corpus[i : i + chunk]
        t0 = time.perf_counter()
        peer.bulk_load(part[0].user_id, [(r.id, r.text) for r in part])
        chunk_s.append(time.perf_counter() - t0)
        loaded += len(part)
        if loaded % 50_000 == 0:
            peers._log(f"engram: bulk-loaded {loaded}/{len(corpus)}")
    wall = time.perf_counter() - start
    summary = peers.latency_summary(chunk_s, wall)
    summary.update(
        records_loaded=loaded,
        records_per_s=round(loaded / wall, 1) if wall else None,
        chunk_size=chunk,
        finished=loaded == len(corpus),
        note=(
            f"bulk load with remember_many in chunks of {chunk} (one transaction per chunk); "
            "1M single remember calls would take too long. p50/p95 are per chunk."
        ),
        loadavg=peers._loadavg(),
    )
    return summary


def measure(peer: peers.EngramPeer, extra: Sequence[peers.Record], queries: Sequence[str],
            k: int) -> dict[str, Any]:  # fmt: skip
    """Time single adds, then recalls and store-only searches, on the loaded store."""
    adds = peers.timed_adds(peer, extra, time.monotonic() + 600)
    peers.settle(peer)
    jobs = peers.search_jobs(queries, [extra[0].user_id])
    peer.search(jobs[0][0], jobs[0][1], k)  # warm-up, not timed
    searches = peers.timed_searches(peer, jobs, k, time.monotonic() + 600)
    peers.settle(peer)
    result = {
        "add": {**adds.summary(), "what": "single remember() calls on the loaded store"},
        "loadavg_after_adds": peers._loadavg(),
        "search": {**searches.summary(), "partial": not searches.finished},
        "loadavg_after_search": peers._loadavg(),
        "store_search": peers.timed_store_searches(peer.store_search, peer, jobs, k),
    }
    result.update(peers.memory_mb())
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="records to bulk-load")
    parser.add_argument("--chunk", type=int, default=1000, help="items per remember_many call")
    parser.add_argument("--adds", type=int, default=200, help="timed single adds afterwards")
    parser.add_argument("--queries", type=int, default=200, help="timed recalls afterwards")
    parser.add_argument("--k", type=int, default=10, help="results per recall")
    parser.add_argument("--budget-min", type=float, default=20.0, help="bulk-load time budget")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    parser.add_argument("--out", default="benchmarks/results/engram-1m-hashing.json")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Bulk-load, measure, check correctness, write JSON."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    peers.configure_offline_env()
    corpus = peers.generate_corpus(args.size + args.adds, 1, args.seed)
    base, extra = corpus[: args.size], corpus[args.size :]
    peer = peers.EngramPeer(peers.load_hashing_embedder())
    try:
        probes = peers.probe_records()
        for probe in probes:
            peer.add_many(probe.user_id, [(probe.id, probe.text)])
        load = bulk_load(peer, base, args.chunk, args.budget_min * 60)
        loaded = base[: load["records_loaded"]]
        result = measure(peer, extra, peers.generate_queries(args.queries), args.k)
        check = peers.check_correctness(peer, [*loaded, *extra], probes, args.seed)
        outcomes = dict(peer.outcomes)
    finally:
        peer.close()
    report = {
        "benchmark": "engram-1m-hashing",
        "command": " ".join(["python", "benchmarks/engram_1m.py", *argv]),
        "embedder": "hashing (engram.embed.HashingEmbedder, 384 dims), shared via peers.py",
        "size": args.size,
        "status": "ok" if load["finished"] else "did_not_finish",
        "bulk_load": load,
        **result,
        "correctness": check,
        "write_outcomes": outcomes,
        "cpus": os.cpu_count(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    peers._log(f"wrote {args.out}")
    return 0 if check["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
