"""SDK writes on PostgreSQL against SQLite in the same run: latency, rate, statements.

For each backend, in one process and on fresh stores (hashing embedder, so the
model stays out of the figures):

* ``remember``: ``--singles`` calls, each a new memory of one user, one at a time
  (p50 / p95 ms, records/s);
* ``remember_many``: ``--batches`` calls of ``--size`` new memories, each into a
  new user (p50 / p95 ms per call, records/s at the median);
* ``supersede``: ``--batches`` calls of ``--size`` keyed memories, each replacing
  the previous value of its key (one supersede per item), into a new user;
* statements: what one ``remember`` and one call of each batch kind send, as the
  store's tracer sees them and, on PostgreSQL, as the server counts them
  (``pg_stat_statements``: every statement, ``BEGIN``/``SAVEPOINT``/``RELEASE``
  included), per write.

Ratios are PostgreSQL over SQLite (latency) and SQLite over PostgreSQL (rate is
the other way up: a ratio above 1 means PostgreSQL is slower). PostgreSQL is
``ENGRAM_BENCH_PG_URL`` or an embedded server started with
``pg_stat_statements`` loaded (no server-side counts without it).

    PYTHONPATH=src .venv/bin/python benchmarks/pg_writes.py --label after-1

Each run is appended to ``benchmarks/results/pg-writes.json`` under its
``--label`` with the path of the ``engram`` package it imported, so a run of an
older checkout (``PYTHONPATH=<old>/src``) is told apart from this one's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import engram
from backends_infra import pg_server, with_database
from common import machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Context, Engram
from engram.working import WorkingConfig
from engram.working.sqlite import SQLiteWorking

RESULTS = Path(__file__).resolve().parent / "results"
TENANT = "acme"
KINDS = ("remember", "remember_many", "supersede")


def _plain(tag: str, size: int) -> list[dict[str, Any]]:
    return [{"content": f"{tag} procedure {i}: deploy service {i} with the blue-green "
                        f"script, then check dashboard {i % 17}."}
            for i in range(size)]  # fmt: skip


def _keyed(tag: str, size: int, value: str) -> list[dict[str, Any]]:
    return [{"content": f"{tag}: service {i} runs {value} builds.", "type": "preference",
             "key": f"svc.{i}.builds", "value": value} for i in range(size)]  # fmt: skip


class Counter:
    """Statements the store's tracer sees, and (when available) the server's count."""

    def __init__(self, mem: Engram, url: str | None) -> None:
        self.mem = mem
        self.url = url if url and _has_statements(url) else None

    def count(self, call: Callable[[], object]) -> dict[str, int | None]:
        """``call``'s statements: ``tracer`` and ``server`` (None when not counted)."""
        seen: list[str] = []
        self._reset()
        self.mem.store.tracer = lambda sql, params: seen.append(sql)  # type: ignore[attr-defined]
        try:
            call()
        finally:
            self.mem.store.tracer = None  # type: ignore[attr-defined]
        return {"tracer": len(seen), "server": self._server()}

    def _reset(self) -> None:
        if self.url:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("SELECT pg_stat_statements_reset()")

    def _server(self) -> int | None:
        if not self.url:
            return None
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s"
                " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()"
                " AND s.query NOT LIKE '%%pg_stat_statements%%'"
            ).fetchone()
        return int(row[0]) if row else None


def _has_statements(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
        return True
    except psycopg.Error:
        return False


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def run(url: str, singles: int, batches: int, size: int, stats_url: str | None) -> dict[str, Any]:
    """Every measurement on the store at ``url``."""
    scratch = SQLiteWorking(":memory:", WorkingConfig()) if url.startswith("postgresql") else None
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with Engram.open(url, embedder="hashing", working=scratch) as mem:
        warm = Context(tenant_id=TENANT, user_id="warm")
        mem.remember_many(warm, _plain("warm", size))  # caches, plans, the model claim
        one = Context(tenant_id=TENANT, user_id="single")
        for i in range(singles):
            times["remember"].append(_timed(lambda i=i: mem.remember(
                one, f"Single note {i}: the on-call rota changes on day {i % 28}.")))  # fmt: skip
        for n in range(batches):
            plain, keyed = _plain(f"b{n}", size), _keyed(f"second {n}", size, "hourly")
            ctx = Context(tenant_id=TENANT, user_id=f"batch{n}")
            times["remember_many"].append(_timed(lambda c=ctx, i=plain: mem.remember_many(c, i)))
            ctx = Context(tenant_id=TENANT, user_id=f"keyed{n}")
            mem.remember_many(ctx, _keyed("first", size, "nightly"))
            times["supersede"].append(_timed(lambda c=ctx, i=keyed: mem.remember_many(c, i)))
        statements = _statements(Counter(mem, stats_url), mem, size)
    summary = {kind: summarize(values) for kind, values in times.items()}
    rates = {"remember": _rate(1, summary["remember"]),
             "remember_many": _rate(size, summary["remember_many"]),
             "supersede": _rate(size, summary["supersede"])}  # fmt: skip
    return {"latency_ms": summary, "records_per_s_at_p50": rates, "statements": statements}


def _rate(records: int, summary: dict[str, float]) -> float:
    return round(records / summary["p50_ms"] * 1000, 1) if summary.get("p50_ms") else 0.0


def _statements(counter: Counter, mem: Engram, size: int) -> dict[str, Any]:
    ctx = Context(tenant_id=TENANT, user_id="counted")
    out: dict[str, Any] = {
        "remember": counter.count(lambda: mem.remember(ctx, "Counted: the pager rotates weekly.")),
        "remember_many": counter.count(lambda: mem.remember_many(ctx, _plain("counted", size))),
    }
    mem.remember_many(ctx, _keyed("first", size, "nightly"))
    out["supersede"] = counter.count(lambda: mem.remember_many(ctx, _keyed("s", size, "hourly")))
    for kind in ("remember_many", "supersede"):
        out[kind]["per_write"] = {k: None if v is None else round(v / size, 2)
                                  for k, v in list(out[kind].items())}  # fmt: skip
    return out


@contextmanager
def _postgres() -> Iterator[tuple[str, str | None]]:
    import psycopg

    with pg_server("256MB", preload="pg_stat_statements") as (admin, _, _settings):
        name = f"engram_writes_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = with_database(admin, name)
        try:
            yield url, url
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _rows(results: dict[str, Any]) -> list[list[object]]:
    rows: list[list[object]] = []
    base = results.get("sqlite")
    for backend, r in results.items():
        for kind in KINDS:
            lat = r["latency_ms"][kind]
            count = r["statements"][kind]
            per = count.get("per_write", count)
            vs = ratio(lat["p50_ms"], base["latency_ms"][kind]["p50_ms"]) if base else None
            rate = r["records_per_s_at_p50"][kind]
            rows.append([backend, kind, lat["p50_ms"], lat["p95_ms"], rate, vs,
                         per["tracer"], per["server"]])  # fmt: skip
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--out", default="pg-writes.json", help="file under benchmarks/results")
    parser.add_argument("--label", default="run", help="this run's name in the results file")
    args = parser.parse_args(argv)
    if min(args.singles, args.batches, args.size) < 1:
        parser.error("--singles, --batches and --size must be positive")
    wanted = set(args.backends.split(","))
    results: dict[str, Any] = {}
    if "sqlite" in wanted:
        with temp_dir("engram-writes") as folder:
            results["sqlite"] = run(f"sqlite:///{folder}/w.db", args.singles, args.batches,
                                    args.size, None)  # fmt: skip
    if "postgresql" in wanted:
        with _postgres() as (url, stats):
            results["postgresql"] = run(url, args.singles, args.batches, args.size, stats)
    print_table(f"writes: {args.singles} remember, {args.batches} x {args.size} per batch kind",
                ["backend", "kind", "p50 ms", "p95 ms", "records/s", "x SQLite p50",
                 "statements/write (tracer)", "(server)"], _rows(results))  # fmt: skip
    run_facts = {"label": args.label, "engram": str(Path(engram.__file__).parent),
                 "machine": machine(sys.argv), "singles": args.singles,
                 "batches": args.batches, "size": args.size, "results": results}  # fmt: skip
    path = RESULTS / args.out
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs = [run for run in runs if run["label"] != args.label] + [run_facts]
    write_results(path, {"machine": run_facts["machine"], "runs": runs})


if __name__ == "__main__":
    main(sys.argv[1:])
