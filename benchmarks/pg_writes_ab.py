"""Paired before/after of PostgreSQL writes: two checkouts take turns, round by round.

On a shared, loaded machine two runs of one benchmark a minute apart differ by
2-3x, which hides a 1.3x change. Here two worker processes, one importing
``engram`` from ``--old-src`` and one from this checkout's ``src``, each on its
own fresh database of one PostgreSQL server, run the same round alternately
(the order flips every round), so each pair of rounds meets the same load. A
round, into new users: ``remember_many`` of ``--size`` procedures, ``share``
of them to another agent, ``revoke`` of the grant, and the median of 20 single
``remember`` calls. Reported: medians and 95th percentiles per side, and the
median of the per-round ratios old/new (above 1: the checkout is faster).

    mkdir /tmp/engram-old && git archive <commit> src | tar -x -C /tmp/engram-old
    PYTHONPATH=src .venv/bin/python benchmarks/pg_writes_ab.py --old-src /tmp/engram-old/src

``--out`` names the results file (default ``results/pg-writes-ab.json``);
``--sqlite`` runs the same rounds on a SQLite file per side instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "pg-writes-ab.json"
HERE = Path(__file__).resolve()
TENANT = "acme"


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = call()
    return (time.perf_counter() - start) * 1000, out


def _round(mem: Any, n: int, size: int) -> dict[str, float]:
    from engram import Context

    coder = Context(tenant_id=TENANT, user_id=f"u{n}", agent_id="coder")
    items = [{"content": f"Round {n} procedure {i}: deploy service {i} with the blue-green "
                         f"script, then check dashboard {i % 17}.", "type": "procedure"}
             for i in range(size)]  # fmt: skip
    out: dict[str, float] = {}
    out["remember_many"], written = _timed(lambda: mem.remember_many(coder, items))
    ids = [w.record.id for w in written if w.record is not None]
    out["share"], report = _timed(lambda: mem.share(coder, ids, "reviewer"))
    assert len(report.shared) == size
    out["revoke"], _ = _timed(lambda: mem.revoke_share(TENANT, "coder", "reviewer"))
    mem.grant_share(TENANT, "coder", "reviewer", ["procedure"])
    single = Context(tenant_id=TENANT, user_id=f"s{n}")
    times = [_timed(lambda i=i: mem.remember(single, f"Single {n}.{i}: rota day {i}."))[0]
             for i in range(20)]  # fmt: skip
    out["remember"] = statistics.median(times)
    return out


def worker(admin: str, size: int) -> None:
    """Serve rounds on a fresh database (``admin`` ``sqlite``: a fresh SQLite file):
    ``round N`` lines in, one JSON line out."""
    if admin == "sqlite":
        from common import temp_dir
        from engram import Engram

        with temp_dir("engram-ab") as folder:
            _serve(Engram.open(f"sqlite:///{folder}/ab.db", embedder="hashing"), size)
        return
    import psycopg

    from backends_infra import with_database
    from engram import Engram
    from engram.working import WorkingConfig
    from engram.working.sqlite import SQLiteWorking

    name = f"engram_ab_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    scratch = SQLiteWorking(":memory:", WorkingConfig())
    _serve(Engram.open(with_database(admin, name), embedder="hashing", working=scratch), size)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _serve(mem: Any, size: int) -> None:
    mem.grant_share(TENANT, "coder", "reviewer", ["procedure"])
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["round"]:
            break
        print(json.dumps(_round(mem, int(words[1]), size)), flush=True)
    mem.close()


def _summary(old: list[dict[str, float]], new: list[dict[str, float]]) -> dict[str, Any]:
    out = {}
    for kind in old[0]:
        a, b = [r[kind] for r in old], [r[kind] for r in new]
        p95 = max(0, round(len(a) * 0.95) - 1)
        ratios = [x / y for x, y in zip(a, b, strict=True)]
        out[kind] = {
            "old_p50_ms": round(statistics.median(a), 1),
            "new_p50_ms": round(statistics.median(b), 1),
            "old_p95_ms": round(sorted(a)[p95], 1), "new_p95_ms": round(sorted(b)[p95], 1),
            "paired_speedup_median": round(statistics.median(ratios), 2),
        }  # fmt: skip
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-src", help="the src folder of the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite", action="store_true", help="on a SQLite file per side instead")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.size)
        return
    if not args.old_src:
        parser.error("--old-src is required")
    from backends_infra import pg_server
    from common import machine, print_table, write_results
    from paired import take_turns

    new_src = str(HERE.parents[1] / "src")
    with nullcontext(("sqlite", "", {})) if args.sqlite else pg_server("256MB") as (admin, _, _):
        worker_args = ["--worker", admin, "--size", str(args.size)]
        sources = {"old": args.old_src, "new": new_src}
        rounds = take_turns(HERE, sources, worker_args, args.rounds, warmup=1)
    summary = _summary(rounds["old"], rounds["new"])
    print_table(f"paired rounds ({args.rounds}), old = {args.old_src}",
                ["step", "old p50", "new p50", "old p95", "new p95", "old/new (median)"],
                [[k, v["old_p50_ms"], v["new_p50_ms"], v["old_p95_ms"], v["new_p95_ms"],
                  v["paired_speedup_median"]] for k, v in summary.items()])  # fmt: skip
    write_results(args.out, {"machine": machine(sys.argv), "old_src": args.old_src,
                            "backend": "sqlite" if args.sqlite else "postgresql",
                            "rounds": args.rounds, "size": args.size, "summary": summary,
                            "raw": rounds})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
