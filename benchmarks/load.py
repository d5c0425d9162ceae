"""A bounded, self-stopping load test of REST remember and recall, and a memory soak.

Not a test. The server is ``python -m engram.surfaces.rest serve`` (``--workers``
uvicorn processes, default 1, the hashing embedder, the rate limit off: one key
makes every call) in a child process on a loopback port, over a *copy* of a
cached store of ``--size`` records of one user (``load_stores.py``), so every run
starts from the same data: with ``--backend sqlite`` (default) a copy of the
SQLite file of ``benchmarks/rest.py``; with ``--backend postgres`` a copy (``CREATE
DATABASE ... TEMPLATE``) of a template database with the same records, on an
embedded PostgreSQL server (its data directory kept for the next run with
``--keep``) or ``ENGRAM_BENCH_PG_URL``, and working memory on Redis (``--redis``,
a database number of its own, flushed first). The traffic (``load_traffic.py``)
is 80 % ``POST /v1/recall`` of corpus queries and 20 % ``POST /v1/memories``:

1. unloaded: requests one at a time on one connection: p50/p95/p99 per kind;
2. capacity: ``--clients`` threads flat out for ``--seconds``: requests a second;
3. loaded: a Poisson load at ``--load-share`` of that capacity for ``--seconds``,
   latency counted from when each request was due: p50/p99, and the ratio of
   recall p99 under load to unloaded recall p95 (target <= 3);
4. soak (``--soak-minutes``, default 10; 0 skips it): the same load, writes cycling
   through 500 contents (CONFIRMs after the first pass, so the data stops growing),
   after ``--soak-warmup-minutes`` (2) of it unsampled; the server's RSS and thread
   count (summed over its worker processes) sampled every ``--sample-seconds``, and
   on PostgreSQL the server's PSS (summed over its backends); reports the
   least-squares slope (MB a minute) and the growth it fits over the soak.

Every phase has a deadline and the server is stopped at the end, whatever happens.
Any 5xx or lost connection is counted (target: none); a request on a keep-alive
connection the server had closed while idle is retried once and counted apart. Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/load.py                    # 100K, 10 min soak
    PYTHONPATH=src .venv/bin/python benchmarks/load.py --quick            # 2K, seconds, no soak
    PYTHONPATH=src .venv/bin/python benchmarks/load.py --backend postgres --keep --workers 2

writes ``benchmarks/results/load.json`` (``load-postgres.json`` on PostgreSQL, a
``-w<N>`` suffix for workers, ``-quick`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from common import REPO, machine, print_table, ratio, temp_dir, write_results
from corpus import Corpus
from load_stores import Family, Served, postgres_store, sqlite_store
from load_traffic import Connection, Mix, closed_loop, open_loop, sequential, summary
from rest import USER, server

RESULTS = REPO / "benchmarks" / "results"


class RssSampler:
    """Samples the server's RSS and threads (its worker processes included) every
    ``every`` seconds on a thread until stopped, and PostgreSQL's PSS when given its
    postmaster. Each server thread of a SQLite store reads on a connection of its own,
    with its own page cache: RSS that follows threads is not a leak."""

    def __init__(self, pid: int, every: float, postmaster: int | None = None) -> None:
        self.server, self.every = Family(pid), every
        self.postgres = Family(postmaster) if postmaster else None
        self.samples: list[tuple[float, float]] = []
        self.pg_samples: list[tuple[float, float]] = []
        self.threads: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._start = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic() - self._start
            self.samples.append((now, self.server.rss_mb()))
            self.threads.append(self.server.threads())
            if self.postgres is not None:
                self.pg_samples.append((now, self.postgres.pss_mb()))
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.every + 5)


def slope(samples: Sequence[tuple[float, float]], skip_s: float) -> dict[str, Any]:
    """Least-squares RSS slope (MB a minute) of the samples after ``skip_s``, and the
    growth that slope fits over their span."""
    kept = [(t, mb) for t, mb in samples if t >= skip_s]
    if len(kept) < 3:
        return {"samples": len(samples), "slope_mb_per_min": None}
    t = np.array([k[0] for k in kept]) / 60
    mb = np.array([k[1] for k in kept])
    fitted = float(np.polyfit(t, mb, 1)[0])
    span = float(t[-1] - t[0])
    mean = float(mb.mean())
    return {
        "samples": len(samples), "fitted_samples": len(kept),
        "first_mb": round(samples[0][1], 1), "last_mb": round(samples[-1][1], 1),
        "min_mb": round(float(mb.min()), 1), "max_mb": round(float(mb.max()), 1),
        "slope_mb_per_min": round(fitted, 3), "fitted_growth_mb": round(fitted * span, 1),
        "fitted_growth_share": round(fitted * span / mean, 4),
        "series": [[round(a, 1), round(b, 1)] for a, b in samples],
    }  # fmt: skip


def _row(name: str, part: dict[str, Any]) -> list[object]:
    return [name, part["n"], part["p50_ms"], part["p95_ms"], part["p99_ms"], part["per_s"],
            part["statuses"]]  # fmt: skip


def _phases(args: argparse.Namespace, url: str, key: str, pid: int, queries: Sequence[str],
            postmaster: int | None) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {}
    sequential(url, key, Mix(USER, queries, seed=1), 30)  # warm-up: caches, first imports
    out["unloaded"] = summary(sequential(url, key, Mix(USER, queries, seed=2), args.unloaded))
    tick = time.monotonic()
    capacity = closed_loop(url, key, Mix(USER, queries, seed=3), args.clients, args.seconds)
    out["capacity"] = summary(capacity, time.monotonic() - tick)
    rate = args.load_share * len(capacity) / args.seconds
    samples, abandoned = open_loop(url, key, Mix(USER, queries, seed=4), rate, args.seconds)
    out["loaded"] = {**summary(samples, args.seconds), "offered_per_s": round(rate, 1),
                     "abandoned": abandoned}  # fmt: skip
    unloaded_p95 = out["unloaded"]["recall"]["p95_ms"]
    out["recall_p99_loaded_vs_unloaded_p95"] = ratio(out["loaded"]["recall"]["p99_ms"],
                                                     unloaded_p95)  # fmt: skip
    if args.soak_minutes > 0:
        seconds = args.soak_minutes * 60
        soak_mix = Mix(USER, queries, fresh=False, seed=6)
        warm = args.soak_warmup_minutes * 60  # the same load, unsampled: caches fill first
        out["soak_warmup"] = summary(open_loop(url, key, soak_mix, rate, warm)[0], warm)
        with RssSampler(pid, args.sample_seconds, postmaster) as sampler:
            soaked, dropped = open_loop(url, key, soak_mix, rate, seconds)
        rss = slope(sampler.samples, skip_s=0.0)
        rss["threads"] = [min(sampler.threads), max(sampler.threads)]
        rss["thread_series"] = sampler.threads
        out["soak"] = {**summary(soaked, seconds), "seconds": seconds, "abandoned": dropped,
                       "offered_per_s": round(rate, 1), "rss": rss}  # fmt: skip
        if sampler.pg_samples:
            out["soak"]["postgres_pss"] = slope(sampler.pg_samples, skip_s=0.0)
    out["rss_end_mb"] = round(Family(pid).rss_mb(), 1)
    out["stale_connection_retries"] = Connection.stale_retries
    return out


def _report(result: dict[str, Any], args: argparse.Namespace) -> None:
    rows = [_row(f"{phase} {kind}", result[phase][kind])
            for phase in ("unloaded", "capacity", "loaded", "soak") if phase in result
            for kind in ("recall", "remember") if kind in result[phase]]  # fmt: skip
    print_table(
        f"REST on {args.backend} at {args.size} records, {args.workers} worker(s) "
        f"({args.clients} clients for capacity)",
        ["phase", "n", "p50 ms", "p95 ms", "p99 ms", "per s", "statuses"],
        rows,
    )
    print(f"loaded at {result['loaded']['offered_per_s']}/s ({args.load_share:g} of capacity): "
          f"recall p99 / unloaded recall p95 = {result['recall_p99_loaded_vs_unloaded_p95']} "
          "(target <= 3)")  # fmt: skip
    errors = sum(result[p]["server_errors"] for p in ("unloaded", "capacity", "loaded", "soak")
                 if p in result)  # fmt: skip
    print(f"5xx or lost connections: {errors} (target 0)")
    if "soak" in result:
        rss = result["soak"]["rss"]
        print(f"soak {result['soak']['seconds']:.0f} s: RSS {rss.get('first_mb')} -> "
              f"{rss.get('last_mb')} MB, slope {rss['slope_mb_per_min']} MB/min, fitted growth "
              f"{rss.get('fitted_growth_mb')} MB ({rss.get('fitted_growth_share')}); server "
              f"threads {rss.get('threads')}")  # fmt: skip
        pss = result["soak"].get("postgres_pss")
        if pss:
            print(f"PostgreSQL PSS {pss.get('first_mb')} -> {pss.get('last_mb')} MB, slope "
                  f"{pss['slope_mb_per_min']} MB/min")  # fmt: skip


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--workers", type=int, default=1, help="engram serve --workers")
    parser.add_argument(
        "--recall-concurrency",
        type=int,
        default=None,
        help="engram serve --recall-concurrency (default: the server's)",
    )
    parser.add_argument("--gc-rescan-seconds", type=float, default=None,
                        help="engram serve --gc-rescan-seconds (default: the server's; 0: "
                        "Python's own garbage collection)")  # fmt: skip
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13",
                        help="PostgreSQL runs: working memory (flushed first)")  # fmt: skip
    parser.add_argument("--keep", action="store_true",
                        help="PostgreSQL: keep the embedded server's data (the template "
                        "database) under --store-dir for the next run")  # fmt: skip
    parser.add_argument("--size", type=int, default=100_000, help="records in the store")
    parser.add_argument("--clients", type=int, default=4, help="threads of the capacity phase")
    parser.add_argument("--seconds", type=float, default=30.0, help="capacity and load phases")
    parser.add_argument("--unloaded", type=int, default=300, help="requests of the baseline")
    parser.add_argument("--load-share", type=float, default=0.5, help="of capacity, offered")
    parser.add_argument("--soak-minutes", type=float, default=10.0, help="0: no soak")
    parser.add_argument("--sample-seconds", type=float, default=5.0, help="RSS sampling")
    parser.add_argument("--soak-warmup-minutes", type=float, default=2.0,
                        help="the soak's load before sampling starts")  # fmt: skip
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/engram-bench-rest"))
    parser.add_argument("--results", type=Path, default=None, help="results file")
    parser.add_argument("--quick", action="store_true", help="2K records, 3 s phases, no soak")
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.seconds, args.unloaded, args.soak_minutes = 2_000, 3.0, 60, 0.0
        args.soak_warmup_minutes = 0.0
        args.queries = 100
    if args.results is None:
        name = "load" + ("-postgres" if args.backend == "postgres" else "")
        name += f"-w{args.workers}" if args.workers > 1 else ""
        args.results = RESULTS / (name + ("-quick" if args.quick else "") + ".json")
    return args


@contextmanager
def _store(args: argparse.Namespace, corpus: Corpus, scratch: Path) -> Iterator[Served]:
    if args.backend == "sqlite":
        with sqlite_store(args.store_dir, args.size, corpus, scratch) as served:
            yield served
    else:
        with postgres_store(args.store_dir, args.size, corpus, scratch, args.redis,
                            args.keep) as served:  # fmt: skip
            yield served


def main(argv: Sequence[str] | None = None) -> int:
    """Run the phases against a fresh copy of the store; print and write the results."""
    args = _arguments(argv)
    corpus = Corpus()
    queries = [q.text for q in corpus.queries(args.queries, range(args.size))]
    payload: dict[str, Any] = {"machine": machine(sys.argv), "records": args.size,
                               "settings": {k: v for k, v in vars(args).items()
                                            if k not in ("store_dir", "results")}}  # fmt: skip
    with temp_dir("engram-load-") as scratch, _store(args, corpus, scratch) as served:
        payload["build_seconds"] = served.build_seconds
        payload["postgres_server"] = served.pg_settings
        with server(
            served.path, args.workers, served.db, served.working, args.recall_concurrency,
            args.gc_rescan_seconds,
        ) as (url, key, pid):  # fmt: skip
            time.sleep(1.0 if args.workers > 1 else 0.0)  # every worker has its app
            payload["rss_start_mb"] = round(Family(pid).rss_mb(), 1)
            payload.update(_phases(args, url, key, pid, queries, served.postmaster))
    _report(payload, args)
    write_results(args.results, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
