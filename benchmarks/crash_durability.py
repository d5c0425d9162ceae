"""What each SQLite ``synchronous`` level costs a write (WAL journal).

For each level (OFF, NORMAL, FULL, EXTRA) a fresh store file takes ``--singles``
single ``remember`` calls and ``--batches`` ``remember_many`` calls of
``--batch`` items (hashing embedder; one chunk each, so one transaction and one
commit per call). Levels are interleaved round by round in one process so that
machine load falls on each alike; medians, p95 and the ratio of each median to
NORMAL's (the previous default) in the same run are printed and written to
``benchmarks/results/crash_durability.json``.

What a level promises (WAL): OFF never syncs (an OS crash or power loss can
corrupt the file); NORMAL syncs the WAL at checkpoints only, so a committed
write survives a process crash but the last ones may be lost on power loss;
FULL syncs the WAL at every commit (an acknowledged write survives power loss);
EXTRA also syncs the directory after the journal changes (for the rollback
journal; under WAL it behaves as FULL). ``docs/reliability/crash.md``.

``--postgres`` times the same calls on PostgreSQL (``ENGRAM_BENCH_PG_URL``, else an
embedded server) with ``synchronous_commit`` ``on`` (the server default, which
Engram leaves alone: COMMIT returns after the WAL is flushed to disk) and ``off``
(set per connection through the URL's ``options``: COMMIT returns before the
flush, so a server crash may lose the last few hundred milliseconds of
acknowledged writes, never consistency). The server's ``fsync`` and
``wal_sync_method`` are recorded with them.

    PYTHONPATH=src .venv/bin/python benchmarks/crash_durability.py --postgres
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from backends_infra import with_database
from common import (
    context,
    machine,
    pg_admin_url,
    print_table,
    ratio,
    summarize,
    temp_dir,
    write_results,
)
from engram import Config, Engram
from engram.config import SQLiteConfig, StoreConfig
from engram.working.config import WorkingConfig
from engram.working.sqlite import SQLiteWorking

RESULTS = Path(__file__).resolve().parent / "results" / "crash_durability.json"
LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
PG_LEVELS = ("on", "off")


def _open(folder: Path, level: str) -> Engram:
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(synchronous=level)))
    return Engram.open(f"sqlite:///{folder}/{level.lower()}.db", embedder="hashing",
                       config=config)  # fmt: skip


def _single(mem: Engram, level: str, n: int) -> float:
    """One ``remember`` (milliseconds)."""
    tick = time.perf_counter()
    mem.remember(context("single"), f"Level {level} single note {n} names port {8000 + n}.")
    return (time.perf_counter() - tick) * 1000


def _batch(mem: Engram, level: str, n: int, size: int) -> float:
    """One ``remember_many`` of ``size`` items (milliseconds)."""
    items = [{"content": f"Level {level} batch {n} item {i} names host h{n}-{i}."}
             for i in range(size)]  # fmt: skip
    tick = time.perf_counter()
    mem.remember_many(context("bulk"), items)
    return (time.perf_counter() - tick) * 1000


def run(singles: int, batches: int, size: int, folder: Path) -> dict[str, dict[str, Any]]:
    """Time every SQLite level, interleaved; summaries keyed by level."""
    return timed({level: _open(folder, level) for level in LEVELS}, singles, batches, size)


def timed(stores: dict[str, Engram], singles: int, batches: int,
          size: int) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Time single and bulk writes on each store, interleaved; closes the stores."""
    levels = tuple(stores)
    single = {level: list[float]() for level in levels}
    bulk = {level: list[float]() for level in levels}
    try:
        for level, mem in stores.items():  # warm up: schema, caches, first pages
            for n in range(5):
                _single(mem, level, -1 - n)
            _batch(mem, level, -1, size)
        for n in range(singles):
            for level, mem in stores.items():
                single[level].append(_single(mem, level, n))
        for n in range(batches):
            for level, mem in stores.items():
                bulk[level].append(_batch(mem, level, n, size))
    finally:
        for mem in stores.values():
            mem.close()
    return {level: {"remember": summarize(single[level]),
                    f"remember_many_{size}": summarize(bulk[level])}
            for level in levels}  # fmt: skip


def run_postgres(singles: int, batches: int, size: int) -> dict[str, Any]:
    """Time ``synchronous_commit`` on and off, each in a database of its own."""
    import psycopg

    with pg_admin_url("engram-durability-pg-") as admin:
        with psycopg.connect(admin, autocommit=True) as conn:
            settings = {name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
                        for name in ("server_version", "fsync", "synchronous_commit",
                                     "wal_sync_method", "full_page_writes")}  # fmt: skip
            for level in PG_LEVELS:
                conn.execute(f"DROP DATABASE IF EXISTS durability_{level} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE durability_{level}")
        stores = {}
        for level in PG_LEVELS:
            url = with_database(admin, f"durability_{level}")
            url += ("&" if "?" in url else "?") + f"options=-c%20synchronous_commit%3D{level}"
            scratch = SQLiteWorking(":memory:", WorkingConfig())  # not what is timed
            stores[level] = Engram.open(url, embedder="hashing", working=scratch)
        shown = {level: _session_setting(mem) for level, mem in stores.items()}
        levels = timed(stores, singles, batches, size)
    return {"server": settings, "session_synchronous_commit": shown, "levels": levels}


def _session_setting(mem: Engram) -> str:
    """``synchronous_commit`` as an Engram connection sees it."""
    store: Any = mem.store
    with store.connection("durability benchmark") as conn:
        return str(conn.execute("SHOW synchronous_commit").fetchone()[0])


def _table(title: str, levels: dict[str, dict[str, Any]], base: str, many: str) -> None:
    """Add ratios of medians vs ``base`` and print the table."""
    rows = []
    for level, stats in levels.items():
        for op in ("remember", many):
            stats[op][f"ratio_vs_{base.lower()}"] = ratio(stats[op]["p50_ms"],
                                                          levels[base][op]["p50_ms"])  # fmt: skip
        key = f"ratio_vs_{base.lower()}"
        rows.append([level, stats["remember"]["p50_ms"], stats["remember"]["p95_ms"],
                     stats["remember"][key], stats[many]["p50_ms"], stats[many]["p95_ms"],
                     stats[many][key]])  # fmt: skip
    print_table(title, ["level", "remember p50", "p95", f"x {base}", f"{many} p50", "p95",
                        f"x {base}"], rows)  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--postgres", action="store_true",
                        help="also time synchronous_commit on and off on PostgreSQL")  # fmt: skip
    parser.add_argument("--folder", type=Path, default=None,
                        help="where the store files go (default: a temporary directory; "
                             "the disk under it is what is measured)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.folder is not None:
        args.folder.mkdir(parents=True, exist_ok=True)
        levels = run(args.singles, args.batches, args.batch, args.folder)
    else:
        with temp_dir("engram-durability-") as folder:
            levels = run(args.singles, args.batches, args.batch, folder)
    many = f"remember_many_{args.batch}"
    _table("SQLite synchronous (WAL): write latency (ms), ratio of medians vs NORMAL",
           levels, "NORMAL", many)  # fmt: skip
    payload: dict[str, Any] = {
        "machine": machine(["benchmarks/crash_durability.py", *argv]),
        "singles": args.singles, "batches": args.batches, "batch": args.batch,
        "default": SQLiteConfig().synchronous, "sqlite": levels,
    }  # fmt: skip
    if args.postgres:
        payload["postgres"] = run_postgres(args.singles, args.batches, args.batch)
        print(f"\nPostgreSQL server settings: {payload['postgres']['server']}")
        _table("PostgreSQL synchronous_commit: write latency (ms), ratio of medians vs on",
               payload["postgres"]["levels"], "on", many)  # fmt: skip
    write_results(RESULTS, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
