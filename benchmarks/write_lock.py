"""How long a bulk write keeps other writers out, and how much memory it takes.

One ``remember_many`` of ``--size`` items (hashing embedder) runs while a probe
thread, on its own connection to the same file, writes one memory every 20 ms
and records how long each write waited. The default chunked write
(``write.batch_items`` = 500) is compared with the same call in one transaction
(``batch_items`` = size: the behaviour before chunking), in the same process.
Python heap peaks come from ``tracemalloc`` (numpy arrays included).

    PYTHONPATH=src .venv/bin/python benchmarks/write_lock.py --size 100000
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from common import context, machine, print_table, summarize, temp_dir, write_results
from engram import Config, Engram
from engram.config import SQLiteConfig, StoreConfig, WritePolicy

RESULTS = Path(__file__).resolve().parent / "results" / "write_lock.json"


def _probe(url: str, stop: threading.Event, waits: list[float]) -> None:
    """Write one memory every 20 ms on a second connection; record each write's time."""
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=120_000)))
    with Engram.open(url, embedder="hashing", config=config) as probe:
        ctx = context("probe")
        n = 0
        while not stop.is_set():
            start = time.perf_counter()
            probe.remember(ctx, f"Probe write number {n} while the bulk load runs.")
            waits.append((time.perf_counter() - start) * 1000)
            n += 1
            stop.wait(0.02)


def run(size: int, batch_items: int, folder: Path) -> dict[str, Any]:
    """One bulk write of ``size`` items with the given chunk size, probed."""
    url = f"sqlite:///{folder}/bulk-{batch_items}.db"
    config = Config(write=WritePolicy(batch_items=batch_items))
    items = [{"content": f"Service {i} of team {i % 97} listens on port {10000 + i % 50000}."}
             for i in range(size)]  # fmt: skip
    with Engram.open(url, embedder="hashing", config=config) as mem:
        stop, waits = threading.Event(), list[float]()
        probe = threading.Thread(target=_probe, args=(url, stop, waits))
        probe.start()
        time.sleep(0.2)
        tracemalloc.start()
        start = time.perf_counter()
        mem.remember_many(context("bulk"), items)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        stop.set()
        probe.join()
    return {
        "batch_items": batch_items, "seconds": round(seconds, 2),
        "records_per_s": round(size / seconds), "python_peak_mib": round(peak / 2**20, 1),
        "probe_writes": summarize(waits),
        "probe_max_wait_ms": round(max(waits), 1) if waits else None,
    }  # fmt: skip


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    args = parser.parse_args(argv)
    if args.size < 1:
        parser.error("--size must be positive")
    with temp_dir("engram-write-lock") as folder:
        chunked = run(args.size, WritePolicy().batch_items, folder)
        whole = run(args.size, args.size, folder)
    rows = [
        [name, r["batch_items"], r["seconds"], r["records_per_s"], r["python_peak_mib"],
         r["probe_writes"].get("p50_ms"), r["probe_max_wait_ms"], r["probe_writes"]["n"]]
        for name, r in (("chunked (default)", chunked), ("one transaction", whole))
    ]  # fmt: skip
    print_table(f"remember_many of {args.size:,} items while a second writer probes",
                ["run", "batch_items", "s", "rec/s", "peak MiB", "probe p50 ms",
                 "probe max ms", "probe writes"], rows)  # fmt: skip
    ratio = whole["probe_max_wait_ms"] / max(chunked["probe_max_wait_ms"], 1e-9)
    print(f"longest probe wait, one transaction / chunked: {ratio:.1f}x")
    write_results(RESULTS, {"machine": machine(sys.argv), "size": args.size,
                            "chunked": chunked, "one_transaction": whole})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
