"""Working memory: set and get latency on SQLite and Redis, against plain drivers.

Not a test. Each figure is a p50 / p95 over ``--ops`` calls in this process, next
to a baseline measured in the same run:

1. SQLite (the embedded default, WAL, synchronous=NORMAL): ``wm.set`` and
   ``wm.get`` through ``Engram.working``; baseline: the same upsert and point
   read on a raw ``sqlite3`` connection to a plain table (no validation, no
   expiry purge, no item objects);
2. Redis: ``wm.set`` (one Lua script: purge, limit, HSET, PEXPIRE, index) and
   ``wm.get``; baseline: a plain redis-py ``SET key value PX ttl`` and ``GET``;
3. SQLite while the record store writes: ``wm.set`` every 5 ms for
   ``--busy-seconds`` while another thread runs ``remember_many`` chunks of 500
   items into the store; baseline: the same with the working table inside the
   records' file (SQLite admits one writer per file, so there a working write
   waits for each chunk's commit).

Keys cycle over ``--keys`` names in one session, so the scope holds that many
items. The target (seed 002): working-memory writes p95 < 50 ms.

Usage: ``PYTHONPATH=src python benchmarks/working.py [--ops 10000]
[--redis redis://127.0.0.1:6379/15]``; writes ``benchmarks/results/working.json``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Config, Context, Engram
from engram.working import SQLiteWorking, WorkingConfig, WorkingMemory

RESULTS = Path(__file__).resolve().parent / "results" / "working.json"
CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1")
VALUE = {"step": 3, "plan": ["read the diff", "run the tests", "open a pull request"]}
TTL_S = 3600


def _timed(call: Callable[[int], object], ops: int) -> list[float]:
    """Milliseconds of ``call(i)`` for i in 0..ops-1 (after 100 untimed warm-up calls)."""
    for i in range(100):
        call(i)
    times = []
    for i in range(ops):
        start = time.perf_counter()
        call(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _engram_ops(wm: WorkingMemory, ops: int, keys: int) -> dict[str, list[float]]:
    return {
        "set": _timed(lambda i: wm.set(f"k{i % keys}", VALUE, ttl=TTL_S), ops),
        "get": _timed(lambda i: wm.get(f"k{i % keys}"), ops),
    }


def _sqlite_baseline(path: Path, ops: int, keys: int) -> dict[str, list[float]]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT, e INTEGER) WITHOUT ROWID")
    text = str(VALUE)

    def put(i: int) -> None:
        conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (f"k{i % keys}", text, i))

    def read(i: int) -> None:
        conn.execute("SELECT v FROM kv WHERE k = ?", (f"k{i % keys}",)).fetchone()

    try:
        return {"set": _timed(put, ops), "get": _timed(read, ops)}
    finally:
        conn.close()


def _redis_baseline(url: str, prefix: str, ops: int, keys: int) -> dict[str, list[float]]:
    import redis

    client = redis.Redis.from_url(url)
    text = str(VALUE)

    def put(i: int) -> None:
        client.set(f"{prefix}:raw:{i % keys}", text, px=TTL_S * 1000)

    def read(i: int) -> None:
        client.get(f"{prefix}:raw:{i % keys}")

    try:
        return {"set": _timed(put, ops), "get": _timed(read, ops)}
    finally:
        left = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if left:
            client.delete(*left)
        client.close()


def _compare(
    name: str, ours: dict[str, list[float]], base: dict[str, list[float]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ("set", "get"):
        mine, theirs = summarize(ours[op]), summarize(base[op])
        out[op] = {"engram": mine, "baseline": theirs,
                   "p50_ratio": ratio(mine["p50_ms"], theirs["p50_ms"]),
                   "p95_ratio": ratio(mine["p95_ms"], theirs["p95_ms"])}  # fmt: skip
    print_table(f"{name}: ms", ["op", "p50", "p95", "baseline p50", "baseline p95", "p95 ratio"],
                [[op, v["engram"]["p50_ms"], v["engram"]["p95_ms"], v["baseline"]["p50_ms"],
                  v["baseline"]["p95_ms"], v["p95_ratio"]] for op, v in out.items()])  # fmt: skip
    return out


def _under_bulk_writes(dir_: Path, seconds: float, keys: int, same_file: bool) -> dict[str, Any]:
    """``wm.set`` every 5 ms for ``seconds`` while another connection writes records in
    500-item chunks (each chunk one transaction). ``same_file``: the working table in
    the records' own file (the baseline layout) instead of its own file."""
    name = "same" if same_file else "own"
    url = f"sqlite:///{dir_}/busy-{name}.db"
    stop, chunks = threading.Event(), [0]
    owner = Context(tenant_id="acme", user_id="bulk")

    def bulk() -> None:
        with Engram.open(url, embedder="hashing") as writer:
            n = 0
            while not stop.is_set():
                items = [{"content": f"Bulk memory {n + j} on topic {j % 97}"} for j in range(500)]
                writer.remember_many(owner, items)
                n, chunks[0] = n + 500, chunks[0] + 1

    times: list[float] = []
    working = SQLiteWorking(f"{dir_}/busy-{name}.db") if same_file else None
    with Engram.open(url, embedder="hashing", working=working) as mem:
        wm = mem.working(CTX)
        thread = threading.Thread(target=bulk)
        thread.start()
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                start = time.perf_counter()
                wm.set(f"k{len(times) % keys}", VALUE)
                times.append((time.perf_counter() - start) * 1000)
                time.sleep(0.005)
        finally:
            stop.set()
            thread.join()
    result = {"seconds": seconds, "set": summarize(times), "bulk_chunks_committed": chunks[0],
              "max_ms": round(max(times), 3)}  # fmt: skip
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=500)
    parser.add_argument("--busy-seconds", type=float, default=20.0)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    payload: dict[str, Any] = {
        "machine": machine(["benchmarks/working.py", *argv]),
        "ops": args.ops,
        "keys": args.keys,
        "target_set_p95_ms": 50,
    }
    with temp_dir("engram-working-") as dir_:
        with Engram.open(f"sqlite:///{dir_}/wm.db", embedder="hashing") as mem:
            ours = _engram_ops(mem.working(CTX), args.ops, args.keys)
        payload["sqlite"] = _compare("SQLite", ours, _sqlite_baseline(dir_ / "raw.db", args.ops,
                                                                      args.keys))  # fmt: skip
        prefix = f"bench{uuid.uuid4().hex[:8]}"
        config = Config(working=WorkingConfig(redis_prefix=prefix))
        with Engram.open(f"sqlite:///{dir_}/r.db", embedder="hashing", config=config,
                         working=args.redis) as mem:  # fmt: skip
            ours = _engram_ops(mem.working(CTX), args.ops, args.keys)
            mem.erase_subject("acme", "u1")
        payload["redis"] = _compare("Redis", ours, _redis_baseline(args.redis, prefix, args.ops,
                                                                   args.keys))  # fmt: skip
        own, same = (_under_bulk_writes(dir_, args.busy_seconds, args.keys, same_file)
                     for same_file in (False, True))  # fmt: skip
        payload["sqlite_during_bulk_writes"] = {
            "own_file": own, "same_file_baseline": same,
            "p95_ratio": ratio(own["set"]["p95_ms"], same["set"]["p95_ms"]),
        }  # fmt: skip
        print_table("SQLite wm.set during bulk record writes: ms",
                    ["layout", "p50", "p95", "max", "chunks"],
                    [[label, r["set"]["p50_ms"], r["set"]["p95_ms"], r["max_ms"],
                      r["bulk_chunks_committed"]]
                     for label, r in (("own file", own), ("records' file", same))])  # fmt: skip
    write_results(args.out, payload)


if __name__ == "__main__":
    main(sys.argv[1:])
