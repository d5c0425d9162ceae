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

``--surface rest`` runs the same trials through the REST API instead
(``tests/reliability/restcrash_support.py``): a client sends the workload to a
real ``engram serve`` over loopback HTTP (its sweep, ``POST /v1/sweep``, runs two
hours ahead of the clock: ``restcrash_client``), the **server** is SIGKILLed
mid-traffic, restarted on the same store, every record the trial acknowledged is
read back through it, and the same checks run. It writes
``benchmarks/results/crash-rest.json``.

Backends: ``sqlite`` (a file) and ``postgresql`` (``ENGRAM_BENCH_PG_URL``, else an
embedded server) with working memory on Redis (``ENGRAM_BENCH_REDIS_URL``,
default ``redis://127.0.0.1:6379/15``). Prints the counts and the distribution of
kill moments and writes ``benchmarks/results/crash.json``.

    PYTHONPATH=src .venv/bin/python benchmarks/crash.py --trials 100
    PYTHONPATH=src .venv/bin/python benchmarks/crash.py --surface rest --trials 100
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
from restcrash_server import ServerFailed, clear_working
from restcrash_support import KINDS as REST_KINDS
from restcrash_support import RestHarness

RESULTS = Path(__file__).resolve().parent / "results" / "crash.json"
REST_RESULTS = RESULTS.with_name("crash-rest.json")
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
        self.server_start_seconds: list[float] = []
        self.served = 0  # REST: acknowledged records read back through a restarted server
        self.trials = 0

    def add_store(self, harness: Harness, findings: Findings) -> None:
        self.counts.update({k: v for k, v in findings.counts().items() if k in COUNTS})
        self.failures += findings.failures[:20]
        self.moments.update(kill.moment for kill in harness.kills)
        self.targets.update(kill.target for kill in harness.kills)
        if isinstance(harness, RestHarness) and harness.server is not None:
            self.served += harness.served
            self.server_start_seconds += harness.server.start_seconds

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
                **({"served_read_backs": self.served, "server_start_seconds": summarize(
                    [s * 1000 for s in self.server_start_seconds])}
                   if self.server_start_seconds else {}),
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
        except (WriterFailed, ServerFailed) as exc:  # a writer that could not run is a finding
            totals.writer_failures.append(str(exc)[:2000])
            continue
        middle = time.perf_counter()
        findings = harness.check()
        totals.trial_seconds.append(middle - tick)
        totals.check_seconds.append(time.perf_counter() - middle)
        totals.trials += 1
        bad = findings.counts()
        print(
            f"  trial {n:4d} target {target:11s} moment {kill.moment:11s} "
            f"acked {bad['acknowledged']:5d} lost {bad['lost']} partial {bad['partial']} "
            f"index {bad['index_mismatches']} audit {bad['audit_failures']}",
            flush=True,
        )
    totals.add_store(harness, findings)


def _harness(surface: str, url: str, logs: Path, redis_url: str | None, prefix: str | None,
             seed: int) -> Harness:  # fmt: skip
    """The SDK writer's harness, or the REST one (its server uses the default prefix)."""
    if surface == "rest":
        return RestHarness(url, logs, redis_url, seed=seed)
    return Harness(url, logs, redis_url, prefix, seed=seed)


def _kinds(surface: str) -> tuple[str, ...]:
    return REST_KINDS if surface == "rest" else KINDS


def run_backend(backend: str, trials: int, per_store: int, seed: int, folder: Path,
                admin: str | None, surface: str = "sdk") -> Totals:  # fmt: skip
    """``trials`` kill trials on fresh stores of ``per_store`` trials each."""
    totals, rng, kinds = Totals(), random.Random(seed), _kinds(surface)
    offset = rng.randrange(len(kinds))
    targets = [kinds[(n + offset) % len(kinds)] for n in range(trials)]
    for store_no, start in enumerate(range(0, trials, per_store)):
        logs = folder / f"{backend}-{store_no}"
        logs.mkdir(parents=True)
        chunk = targets[start : start + per_store]
        if backend == "sqlite":
            harness = _harness(surface, f"sqlite:///{logs}/crash.db", logs, None, None,
                               seed + store_no)  # fmt: skip
        else:
            assert admin is not None
            url = _fresh_database(admin, f"crash_{store_no}")
            harness = _harness(surface, url, logs, REDIS_URL, f"crash{uuid.uuid4().hex[:10]}",
                               seed + store_no)  # fmt: skip
        try:
            _store_trials(harness, chunk, start * 2, totals)
        finally:
            if isinstance(harness, RestHarness):
                harness.close()
                if harness.redis_url is not None:
                    clear_working(harness.redis_url, "crash")
            elif harness.redis_prefix is not None:
                _drop_redis_prefix(harness.redis_prefix)
    return totals


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=100, help="kill trials per backend")
    parser.add_argument("--trials-per-store", type=int, default=25)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--surface", choices=("sdk", "rest"), default="sdk",
                        help="sdk: a writer process is killed; rest: engram serve is")  # fmt: skip
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
                                         folder, admin, args.surface)  # fmt: skip
            else:
                totals = run_backend(backend, args.trials, args.trials_per_store, seed,
                                     folder, None, args.surface)  # fmt: skip
            results[backend] = totals.to_dict()
            rows.append(totals.row(backend))
    victim = "engram serve" if args.surface == "rest" else "a writer"
    print_table(f"Crash trials: {victim} SIGKILLed at random moments",
                ["backend", "trials", *COUNTS, "writer failures"], rows)  # fmt: skip
    for backend in backends:
        print(f"\n{backend} kill moments (operation in flight): {results[backend]['kill_moments']}")
    write_results(REST_RESULTS if args.surface == "rest" else RESULTS,
                  {"machine": machine(["benchmarks/crash.py", *argv]), "seed": seed,
                   "surface": args.surface, "trials_per_store": args.trials_per_store,
                   "backends": results})  # fmt: skip
    bad = sum(results[b][k] for b in backends
              for k in ("lost", "resurrected", "partial", "index_mismatches", "audit_failures",
                        "writer_failures"))  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
