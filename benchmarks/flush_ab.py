"""Paired before/after of one usage flush: two checkouts take turns, round by round.

A recall queues the access counts of what it selected; a background thread
writes about a second of them in one transaction that holds the tenant's writer
lock, so a ``remember`` that arrives meanwhile waits for it. This times that
transaction as the flush makes it: ``store.apply`` of ``--recalls`` touches (one
per recall, ``--picks`` records each, drawn from the user's records with a fixed
seed, a second apart; the same draws on both sides), after ``--records`` corpus
memories were written with ``remember_many`` (hashing embedder). Two worker
processes, one importing ``engram`` from ``--old-src`` and one from this
checkout's ``src``, each on its own fresh database of one embedded PostgreSQL
server (or its own SQLite file with ``--sqlite``), run the same round in turn,
the order flipping every round, so each pair meets the same load. Reported: p50
and p95 per side and the median of the per-round ratios old/new (above 1: the
checkout is faster), and the statements each side sent per flush.

    mkdir /tmp/engram-old && git archive <commit> src | tar -x -C /tmp/engram-old
    PYTHONPATH=src .venv/bin/python benchmarks/flush_ab.py --old-src /tmp/engram-old/src

``--out`` names the results file (default ``results/flush-ab.json``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "flush-ab.json"
HERE = Path(__file__).resolve()
USER = "u-flush"
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _round(mem: Any, ids: list[str], n: int, recalls: int, picks: int) -> dict[str, float]:
    """One flush's transaction: the touches of ``recalls`` recalls, timed."""
    from common import context
    from engram.scope import resolve
    from engram.store.contract import Touch
    from engram.store.predicate import Visibility

    vis = Visibility.of(resolve(context(USER)))
    rng = random.Random(n)
    start = T0 + timedelta(minutes=n)
    touches = [Touch(vis, tuple(rng.sample(ids, picks)), start + timedelta(seconds=i))
               for i in range(recalls)]  # fmt: skip
    sent: list[str] = []
    mem.store.tracer = lambda text, params: sent.append(text)
    tick = time.perf_counter()
    mem.store.apply(touches)
    elapsed = (time.perf_counter() - tick) * 1000
    mem.store.tracer = None
    return {"flush_ms": elapsed, "statements": float(len(sent))}


def worker(admin: str, records: int, recalls: int, picks: int) -> None:
    """Serve rounds on a fresh store (``admin`` ``sqlite``: a fresh SQLite file):
    ``round N`` lines in, one JSON line out."""
    from engram import Engram

    if admin == "sqlite":
        from common import temp_dir

        with temp_dir("engram-flush-ab") as folder:
            mem = Engram.open(f"sqlite:///{folder}/ab.db", embedder="hashing")
            _serve(mem, records, recalls, picks)
        return
    import psycopg

    from backends_infra import with_database
    from engram.working import WorkingConfig
    from engram.working.sqlite import SQLiteWorking

    name = f"engram_flush_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    scratch = SQLiteWorking(":memory:", WorkingConfig())
    mem = Engram.open(with_database(admin, name), embedder="hashing", working=scratch)
    _serve(mem, records, recalls, picks)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _serve(mem: Any, records: int, recalls: int, picks: int) -> None:
    from common import context, fill
    from corpus import Corpus

    fill(mem, USER, Corpus(), 0, records, chunk=500)
    ids = [r.id for r in mem.list(context(USER), limit=records)]
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["round"]:
            break
        print(json.dumps(_round(mem, ids, int(words[1]), recalls, picks)), flush=True)
    mem.close()


def _summary(old: list[dict[str, float]], new: list[dict[str, float]]) -> dict[str, Any]:
    a, b = [r["flush_ms"] for r in old], [r["flush_ms"] for r in new]
    p95 = max(0, round(len(a) * 0.95) - 1)
    paired = statistics.median(x / y for x, y in zip(a, b, strict=True))
    return {
        "old_p50_ms": round(statistics.median(a), 2), "new_p50_ms": round(statistics.median(b), 2),
        "old_p95_ms": round(sorted(a)[p95], 2), "new_p95_ms": round(sorted(b)[p95], 2),
        "paired_speedup_median": round(paired, 2),
        "old_statements": statistics.median(r["statements"] for r in old),
        "new_statements": statistics.median(r["statements"] for r in new),
    }  # fmt: skip


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-src", help="the src folder of the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--recalls", type=int, default=40, help="touches per flush")
    parser.add_argument("--picks", type=int, default=6, help="records each touch names")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite", action="store_true", help="on a SQLite file per side instead")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.records, args.recalls, args.picks)
        return
    if not args.old_src:
        parser.error("--old-src is required")
    from backends_infra import pg_server
    from common import machine, print_table, write_results
    from paired import take_turns

    new_src = str(HERE.parents[1] / "src")
    with nullcontext(("sqlite", "", {})) if args.sqlite else pg_server("256MB") as (admin, _, _):
        worker_args = ["--worker", admin, "--records", str(args.records),
                       "--recalls", str(args.recalls), "--picks", str(args.picks)]  # fmt: skip
        sources = {"old": args.old_src, "new": new_src}
        rounds = take_turns(HERE, sources, worker_args, args.rounds, warmup=2)
    summary = _summary(rounds["old"], rounds["new"])
    backend = "sqlite" if args.sqlite else "postgresql"
    print_table(f"one flush of {args.recalls} recalls x {args.picks} picks, {args.records} "
                f"records, {backend}, {args.rounds} paired rounds",
                ["old p50", "new p50", "old p95", "new p95", "old/new (median)", "statements"],
                [[summary["old_p50_ms"], summary["new_p50_ms"], summary["old_p95_ms"],
                  summary["new_p95_ms"], summary["paired_speedup_median"],
                  f"{summary['old_statements']:g} -> {summary['new_statements']:g}"]])  # fmt: skip
    write_results(args.out, {"machine": machine(sys.argv), "old_src": args.old_src,
                            "backend": backend, "rounds": args.rounds, "records": args.records,
                            "recalls": args.recalls, "picks": args.picks, "summary": summary,
                            "raw": rounds})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
