"""Throughput of concurrent processes and threads on one store, with the invariants checked.

The workload of ``tests/reliability/concur_support.py`` (single and bulk writes,
SUPERSEDEs of shared keys, recalls, sweeps, forgets, subject erasures; hashing
embedder) runs for ``--seconds`` with each shape ``PxT`` (P processes of T
threads) on one SQLite file and on one PostgreSQL database (embedded server, or
``ENGRAM_BENCH_PG_URL``; Redis working memory at ``--redis``). Each run is then
judged by ``concur_checks`` (zero problems expected: nothing acknowledged lost,
one active version per key on one line, audit chain verifying, no undocumented
exception). Printed per run: calls per second of each operation kind, their p50
and p95 latency, and the total rate as a ratio of the first shape's (the
baseline, 1x1 by default) in the same run.

    PYTHONPATH=src .venv/bin/python benchmarks/concur.py --seconds 10 --shapes 1x1,2x2,4x4
    PYTHONPATH=src .venv/bin/python benchmarks/concur.py --mix no-erasure --shapes 1x1,4x4

``--mix no-erasure`` leaves out sweeps, forgets and erasures (their physical pass,
a WAL checkpoint and file scan, or a table rewrite, holds the write lock longest)
and writes ``concur-no-erasure.json`` instead of ``concur.json``.

``--surface rest`` sends the same workload through a real ``engram serve``
(``--workers N`` server processes on one socket) over loopback HTTP from P client
processes of T threads (``tests/reliability/restconcur_support.py``: corrections of
a key's last seen version besides SUPERSEDEs; transient writes instead of back-dated
ones, swept by ``POST /v1/sweep`` at two hours past the clock), judged by the same
checks, and writes ``concur-rest-w<N>[-<mix>].json``.

    PYTHONPATH=src .venv/bin/python benchmarks/concur.py --surface rest --workers 2
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import uuid
from pathlib import Path
from typing import Any

from backends_infra import pg_server, with_database
from common import machine, print_table, ratio, summarize, temp_dir, write_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
from concur_checks import judge
from concur_support import KINDS, Plan, open_engram, run
from restconcur_support import REST_MIX, run_rest
from restcrash_server import Server, admin_key, clear_working

RESULTS = Path(__file__).resolve().parent / "results"
MIXES = {
    "all": Plan("").mix,
    "no-erasure": tuple(
        (k, 0 if k in ("sweep", "forget", "erase") else w) for k, w in Plan("").mix
    ),
}
REST_MIXES = {
    "all": REST_MIX,
    "no-erasure": tuple((k, 0 if k in ("sweep", "forget", "erase") else w) for k, w in REST_MIX),
}


def _shape(text: str) -> tuple[int, int]:
    processes, threads = text.lower().split("x")
    return int(processes), int(threads)


def _through_rest(plan: Plan, workers: int, folder: Path) -> tuple[list[Any], float]:
    """The plan's clients against ``engram serve --workers`` on the plan's store."""
    keys = folder / f"keys-{uuid.uuid4().hex[:8]}.json"
    server = Server(plan.url, keys, folder, plan.working, workers=workers)
    key = admin_key(keys, plan.tenant)
    server.start()
    try:
        if workers > 1 and plan.url.startswith("sqlite"):
            server.wait_workers(Path(plan.url.removeprefix("sqlite:///")))
        return run_rest(plan, server.url, key)
    finally:
        server.stop()


def measure(plan: Plan, surface: str = "sdk", workers: int = 1,
            folder: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """One run of ``plan``: rates and latencies per kind, what failed, the verdict."""
    open_engram(plan).close()  # migrate before the processes race to open it
    if surface == "rest":
        assert folder is not None
        logs, seconds = _through_rest(plan, workers, folder)
    else:
        logs, seconds = run(plan)
    verdict = judge(plan, logs)
    per_kind = {}
    for kind in (k for k, _ in plan.mix) if surface == "rest" else KINDS:
        times = [t for log in logs for t in log.times_ms.get(kind, [])]
        per_kind[kind] = {"per_s": round(len(times) / plan.seconds, 1), **summarize(times)}
    return {
        "surface": surface, "server_workers": workers if surface == "rest" else None,
        "processes": plan.processes, "threads": plan.threads, "seconds": round(seconds, 2),
        "calls_per_s": round(sum(verdict.calls.values()) / plan.seconds, 1),
        "kinds": per_kind, "failures": dict(verdict.failures),
        "problems": verdict.problems[:20], "problem_count": len(verdict.problems),
        "unverified_erasures": verdict.unverified, "key_versions": verdict.versions,
        "unverified_checks": dict(verdict.failed_checks),
        "acknowledged": dict(verdict.done),
    }  # fmt: skip


def _drop_working(plan: Plan) -> None:
    """Delete the run's working-memory keys from Redis."""
    if plan.working is None:
        return
    if plan.redis_prefix is None:  # engram serve: the default prefix, the plan's tenant
        clear_working(plan.working, plan.tenant)
        return
    import redis

    client = redis.Redis.from_url(plan.working)
    keys = list(client.scan_iter(match=f"{plan.redis_prefix}:*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def backend_runs(name: str, url_of: Any, shapes: list[tuple[int, int]], args: Any,
                 folder: Path) -> list[dict[str, Any]]:  # fmt: skip
    """Every shape on one backend, each on a fresh store."""
    out = []
    for n, (processes, threads) in enumerate(shapes):
        url = url_of(n)
        rest = args.surface == "rest"
        plan = Plan(url=url, processes=processes, threads=threads, seconds=args.seconds,
                    mix=(REST_MIXES if rest else MIXES)[args.mix])  # fmt: skip
        if url.startswith("postgresql"):
            prefix = None if rest else f"bench{uuid.uuid4().hex[:8]}"
            plan = dataclasses.replace(plan, working=args.redis, redis_prefix=prefix)
        try:
            result = {"backend": name, **measure(plan, args.surface, args.workers, folder)}
        finally:
            _drop_working(plan)
        out.append(result)
        print(f"{name} {processes}x{threads}: {result['calls_per_s']} calls/s, "
              f"{result['problem_count']} problems, failures {result['failures']}",
              flush=True)  # fmt: skip
    base = out[0]["calls_per_s"]
    for result in out:
        result["ratio_to_first_shape"] = ratio(result["calls_per_s"], base)
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--shapes", default="1x1,2x2,4x4")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--mix", choices=sorted(MIXES), default="all",
                        help="all: every kind; no-erasure: no sweep, forget or erase")  # fmt: skip
    parser.add_argument("--surface", choices=("sdk", "rest"), default="sdk",
                        help="sdk: processes on the store; rest: through engram serve")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="engram serve --workers (rest)")
    args = parser.parse_args(argv)
    shapes = [_shape(s) for s in args.shapes.split(",")]
    backends = args.backends.split(",")
    results: list[dict[str, Any]] = []
    with temp_dir("engram-concur") as folder:
        if "sqlite" in backends:
            results += backend_runs("sqlite", lambda n: f"sqlite:///{folder}/concur-{n}.db",
                                    shapes, args, folder)  # fmt: skip
        if "postgresql" in backends:
            results += _postgres_runs(shapes, args, folder)
    _print(results)
    stem = f"concur-rest-w{args.workers}" if args.surface == "rest" else "concur"
    name = f"{stem}.json" if args.mix == "all" else f"{stem}-{args.mix}.json"
    write_results(RESULTS / name, {"machine": machine(sys.argv), "seconds": args.seconds,
                                   "surface": args.surface, "runs": results,
                                   "mix": dict((REST_MIXES if args.surface == "rest" else
                                                MIXES)[args.mix])})  # fmt: skip


def _postgres_runs(shapes: list[tuple[int, int]], args: Any, folder: Path) -> list[dict[str, Any]]:
    import psycopg

    from engram.store.postgres.__main__ import run_migrations

    with pg_server("256MB") as (admin, _pid, _settings):

        def url_of(n: int) -> str:
            name = f"concur_{n}"
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            url = with_database(admin, name)
            run_migrations(url)
            return url

        return backend_runs("postgresql", url_of, shapes, args, folder)


def _print(results: list[dict[str, Any]]) -> None:
    kinds = list(results[0]["kinds"]) if results else list(KINDS)
    header = ["backend", "PxT", "calls/s", "x first", *(f"{k}/s" for k in kinds),
              "remember p95 ms", "recall p95 ms", "problems", "failures"]  # fmt: skip
    rows = [[r["backend"], f"{r['processes']}x{r['threads']}", r["calls_per_s"],
             r["ratio_to_first_shape"], *(r["kinds"][k]["per_s"] for k in kinds),
             r["kinds"]["remember"].get("p95_ms"), r["kinds"]["recall"].get("p95_ms"),
             r["problem_count"], sum(r["failures"].values())] for r in results]  # fmt: skip
    print_table("concurrent workload on one store (hashing embedder)", header, rows)


if __name__ == "__main__":
    main(sys.argv[1:])
