"""Crash safety at scale: a writer SIGKILLed at random moments, ``--trials`` times per backend.

The harness is the CI test's (``tests/reliability/crash_support.py``): each trial
starts a writer process (``crash_writer.py``) that cycles through single writes,
bulk writes in several chunks, supersedes, consolidation, the sweep, forget and
erasure, and kills it with SIGKILL during (or just after) the operation kind
whose turn it is, at a random delay up to 1.2 times that operation's median
duration. After every kill the store is reopened and checked against every log
so far: acknowledged writes present with their content, acknowledged deletions
gone, no partial write (bulk chunks whole and in order, erasures whole, one active
version per key, every record with its vector), indexes equal to a rebuild's,
audit chain verified. Each store takes ``--trials-per-store`` trials (then a new
one, so a check's full scans stay short), after one clean cycle that seeds it.

Backends: ``sqlite`` (a file) and ``postgresql`` (``ENGRAM_BENCH_PG_URL``, else an
embedded server) with working memory on Redis (``ENGRAM_BENCH_REDIS_URL``,
default ``redis://127.0.0.1:6379/15``). Prints the counts and the distribution of
kill moments and writes ``benchmarks/results/crash.json``.

    PYTHONPATH=src .venv/bin/python benchmarks/crash.py --trials 100
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from backends_infra import with_database
from common import machine, pg_admin_url, print_table, summarize, temp_dir, write_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "reliability"))
from crash_checks import Findings
from crash_support import KINDS, Harness, WriterFailed

RESULTS = Path(__file__).resolve().parent / "results" / "crash.json"
REDIS_URL = os.environ.get("ENGRAM_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
COUNTS = ("acknowledged", "acknowledged_deletions", "lost", "resurrected", "partial",
          "index_mismatches", "audit_failures")  # fmt: skip


def _fresh_database(admin: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(admin, name)


def _drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


class Totals:
    """What every store of one backend added up to."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.failures: list[str] = []
        self.writer_failures: list[str] = []
        self.moments: Counter[str] = Counter()
        self.targets: Counter[str] = Counter()
        self.trial_seconds: list[float] = []
        self.check_seconds: list[float] = []
        self.trials = 0

    def add_store(self, harness: Harness, findings: Findings) -> None:
        self.counts.update({k: v for k, v in findings.counts().items() if k in COUNTS})
        self.failures += findings.failures[:20]
        self.moments.update(kill.moment for kill in harness.kills)
        self.targets.update(kill.target for kill in harness.kills)

    def row(self, backend: str) -> list[object]:
        return [backend, self.trials, *(self.counts[k] for k in COUNTS),
                len(self.writer_failures)]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, **{k: self.counts[k] for k in COUNTS},
                "writer_failures": len(self.writer_failures),
                "kill_moments": dict(self.moments.most_common()),
                "targets": dict(sorted(self.targets.items())),
                "trial_seconds": summarize([s * 1000 for s in self.trial_seconds]),
                "check_seconds": summarize([s * 1000 for s in self.check_seconds]),
                "failures": self.failures[:50],
                "writer_failure_details": self.writer_failures[:10]}  # fmt: skip


def _store_trials(harness: Harness, targets: list[str], first: int, totals: Totals) -> None:
    """One store: a clean cycle, then one kill trial per target, each checked."""
    harness.clean_run(first, cycles=1)
    findings = Findings()
    for n, target in enumerate(targets, start=first + 1):
        tick = time.perf_counter()
        try:
            kill = harness.kill_trial(n, target)
        except WriterFailed as exc:  # a writer that could not start or run is a finding
            totals.writer_failures.append(str(exc)[:2000])
            continue
        middle = time.perf_counter()
        findings = harness.check()
        totals.trial_seconds.append(middle - tick)
        totals.check_seconds.append(time.perf_counter() - middle)
        totals.trials += 1
        bad = findings.counts()
        print(f"  trial {n:4d} target {target:11s} moment {kill.moment:11s} "
              f"acked {bad['acknowledged']:5d} lost {bad['lost']} partial {bad['partial']} "
              f"index {bad['index_mismatches']} audit {bad['audit_failures']}", flush=True)
    totals.add_store(harness, findings)


def run_backend(backend: str, trials: int, per_store: int, seed: int, folder: Path,
                admin: str | None) -> Totals:  # fmt: skip
    """``trials`` kill trials on fresh stores of ``per_store`` trials each."""
    totals, rng = Totals(), random.Random(seed)
    offset = rng.randrange(len(KINDS))
    targets = [KINDS[(n + offset) % len(KINDS)] for n in range(trials)]
    for store_no, start in enumerate(range(0, trials, per_store)):
        logs = folder / f"{backend}-{store_no}"
        logs.mkdir(parents=True)
        chunk = targets[start : start + per_store]
        if backend == "sqlite":
            harness = Harness(f"sqlite:///{logs}/crash.db", logs, seed=seed + store_no)
            _store_trials(harness, chunk, start * 2, totals)
            continue
        assert admin is not None
        prefix = f"crash{uuid.uuid4().hex[:10]}"
        url = _fresh_database(admin, f"crash_{store_no}")
        harness = Harness(url, logs, REDIS_URL, prefix, seed=seed + store_no)
        try:
            _store_trials(harness, chunk, start * 2, totals)
        finally:
            _drop_redis_prefix(prefix)
    return totals


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=100, help="kill trials per backend")
    parser.add_argument("--trials-per-store", type=int, default=25)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    backends = args.backends.split(",")
    results: dict[str, Any] = {}
    rows = []
    with temp_dir("engram-crash-") as folder:
        for backend in backends:
            print(f"{backend}: {args.trials} trials (seed {seed})", flush=True)
            if backend == "postgresql":
                with pg_admin_url("engram-crash-pg-") as admin:
                    totals = run_backend(backend, args.trials, args.trials_per_store, seed,
                                         folder, admin)  # fmt: skip
            else:
                totals = run_backend(backend, args.trials, args.trials_per_store, seed,
                                     folder, None)  # fmt: skip
            results[backend] = totals.to_dict()
            rows.append(totals.row(backend))
    print_table("Crash trials: a writer SIGKILLed at random moments",
                ["backend", "trials", *COUNTS, "writer failures"], rows)  # fmt: skip
    for backend in backends:
        print(f"\n{backend} kill moments (operation in flight): {results[backend]['kill_moments']}")
    write_results(RESULTS, {"machine": machine(["benchmarks/crash.py", *argv]), "seed": seed,
                            "trials_per_store": args.trials_per_store,
                            "backends": results})  # fmt: skip
    bad = sum(results[b][k] for b in backends
              for k in ("lost", "resurrected", "partial", "index_mismatches", "audit_failures",
                        "writer_failures"))  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
