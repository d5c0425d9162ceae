"""Benchmark the REST API against the SDK it wraps (issue 14).

Not a test. Stores are SQLite files of one user (``u-bench``, tenant ``acme``)
holding ``size`` corpus memories (``corpus.py``), written once with
``remember_many`` and the hashing embedder and kept in ``--store-dir`` for the
next run (a 100K store takes minutes to build; the build time is reported when
it happens). The server is ``python -m engram.surfaces.rest serve`` (uvicorn,
one process, handlers on its thread pool) in a child process on a loopback
port; the SDK baseline is an ``Engram`` over the same file in this process.

1. latency (``--latency-size``, default 100K): each query is recalled through
   the SDK and through ``POST /v1/recall`` (one keep-alive ``http.client``
   connection), alternating which goes first, after warm-up calls; reports
   p50/p95 of both, the difference and the ratio. Target: REST p95 within 3 ms
   of SDK p95.
2. throughput (``--throughput-size``, default 10K): for each number of server
   processes (``--workers``, default 1 and 2) and each concurrency, that many
   client threads (each its own keep-alive connection) recall for ``--seconds``
   after a few seconds of untimed warm-up, and the completed recalls per second
   are counted, with the server's CPU time per recall; the baseline is the same
   number of threads calling the SDK in this process. Target: >= 200 recalls/s
   over HTTP on this 2-core machine.

Every phase also reports CPU time per recall (``/proc`` for the server and its
workers, ``time.process_time`` here): on a machine shared with other work, wall
times stretch with the load while CPU time per call stretches much less.

Query embedding is inside both paths (hashing: microseconds). Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/rest.py            # 100K latency, 10K throughput
    PYTHONPATH=src .venv/bin/python benchmarks/rest.py --quick    # 10K / 2K, short

writes ``benchmarks/results/rest.json`` (``rest-quick.json`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from common import (
    REPO,
    TENANT,
    context,
    fill,
    machine,
    print_table,
    ratio,
    summarize,
    write_results,
)
from corpus import Corpus
from engram import Engram
from engram.surfaces.rest.keys import KeyFile

USER = "u-bench"
RESULTS = REPO / "benchmarks" / "results"


def build_store(directory: Path, size: int, corpus: Corpus) -> tuple[Path, float | None]:
    """The store file of ``size`` records (built now, or reused): its path and the
    build time in seconds (None when reused)."""
    path = directory / f"rest-{size}.db"
    done = directory / f"rest-{size}.done"
    if path.exists() and done.exists():
        return path, None
    for stale in directory.glob(f"rest-{size}.db*"):
        stale.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    tick = time.perf_counter()
    mem = Engram.open(f"sqlite:///{path}", embedder="hashing")
    try:
        result = fill(mem, USER, corpus, 0, size, chunk=1000)
    finally:
        mem.close()
    seconds = time.perf_counter() - tick
    done.write_text(json.dumps({"records": size, "operations": dict(result.operations)}))
    print(f"built {path.name}: {size} records in {seconds:.0f} s", flush=True)
    return path, round(seconds, 1)


@contextmanager
def server(
    path: Path,
    workers: int = 1,
    db: str | None = None,
    working: str | None = None,
    recall_concurrency: int | None = None,
    gc_rescan_seconds: float | None = None,
) -> Iterator[tuple[str, str, int]]:
    """``engram serve`` on the SQLite file ``path`` (or on the store URL ``db``, the key
    file still beside ``path``) in a child process, working memory at ``working``
    (None: the default beside SQLite), ``--recall-concurrency`` (None: the server's
    default) and ``--gc-rescan-seconds`` (None: the server's default): its base URL, an
    API key and its process id."""
    keys = path.with_name(path.name + "-bench-keys.json")
    keys.unlink(missing_ok=True)
    _, key = KeyFile(keys).create(TENANT)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [
        sys.executable,
        "-m",
        "engram.surfaces.rest",
        "serve",
        "--port",
        "0",
        "--embedder",
        "hashing",
        "--db",
        db or f"sqlite:///{path}",
        *(["--working", working] if working else []),
        "--keys",
        str(keys),
        "--workers",
        str(workers),
        "--rate-limit",  # one key makes every call: measure the server, not the limit
        "0",
        *([] if recall_concurrency is None else ["--recall-concurrency", str(recall_concurrency)]),
        *([] if gc_rescan_seconds is None else ["--gc-rescan-seconds", str(gc_rescan_seconds)]),
    ]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert child.stdout is not None
    try:
        first = child.stdout.readline()
        if " on http://" not in first:
            raise RuntimeError(f"engram serve did not start: {first}{child.stdout.read()}")
        yield first.split(" on ", 1)[1].split()[0], key, child.pid
    finally:
        child.terminate()
        child.wait(30)
        keys.unlink(missing_ok=True)
        keys.with_name(keys.name + ".lock").unlink(missing_ok=True)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process and its children (``--workers``) have used
    so far, from ``/proc``."""
    family = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) == pid:
                    family.append(int(entry.name))
            except (OSError, ValueError):
                continue
    ticks = 0
    for member in family:
        try:
            fields = _stat(member)
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


class Client:
    """One keep-alive HTTP connection that posts recalls."""

    def __init__(self, url: str, key: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def recall(self, query: str) -> dict[str, Any]:
        """``POST /v1/recall`` for the benchmark user; the decoded answer."""
        body = json.dumps({"user_id": USER, "query": query})
        self.conn.request("POST", "/v1/recall", body=body, headers=self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"recall answered {response.status}: {data[:300]!r}")
        answer: dict[str, Any] = json.loads(data)
        return answer


def latency_phase(
    path: Path, queries: Sequence[str], warmup: int, gc_rescan_seconds: float | None = None
) -> dict[str, Any]:
    """SDK and REST recall of the same queries, alternating which runs first. Wall
    times, and CPU time per call: the SDK's (this process during its calls), the
    server's (its process over the run; it idles during the SDK calls) and the
    client's (this process during the REST calls). CPU time is what a loaded
    machine changes least."""
    mem = Engram.open(f"sqlite:///{path}", embedder="hashing")
    ctx = context(USER)
    wall: dict[str, list[float]] = {"sdk": [], "rest": []}
    cpu = {"sdk": 0.0, "client": 0.0, "server": 0.0}
    statuses: dict[str, int] = {}
    try:
        with server(path, gc_rescan_seconds=gc_rescan_seconds) as (url, key, pid):
            client = Client(url, key)
            for query in queries[:warmup]:
                mem.recall(ctx, query)
                client.recall(query)
            served = cpu_seconds(pid)
            for index, query in enumerate(queries):
                for name in ("sdk", "rest") if index % 2 == 0 else ("rest", "sdk"):
                    tick, used = time.perf_counter(), time.process_time()
                    if name == "sdk":
                        mem.recall(ctx, query)
                    else:
                        status = client.recall(query)["status"]
                        statuses[status] = statuses.get(status, 0) + 1
                    wall[name].append((time.perf_counter() - tick) * 1000)
                    cpu["sdk" if name == "sdk" else "client"] += time.process_time() - used
            cpu["server"] = cpu_seconds(pid) - served
    finally:
        mem.close()
    per_call = {name: round(seconds * 1000 / len(queries), 2) for name, seconds in cpu.items()}
    return {
        "sdk": summarize(wall["sdk"]),
        "rest": summarize(wall["rest"]),
        "cpu_ms_per_recall": per_call,
        "rest_statuses": statuses,
    }


def _run_threads(count: int, seconds: float, work: Any) -> int:
    """Start ``count`` threads running ``work(stop, done)``; completed calls in total."""
    stop = threading.Event()
    counts = [0] * count
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        try:
            counts[slot] = work(stop)
        except BaseException as exc:  # reported after the run
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return sum(counts)


def _http_rate(url: str, key: str, queries: Sequence[str], clients: int, seconds: float) -> int:
    """Recalls completed by ``clients`` threads, each on its own connection."""

    def over_http(stop: threading.Event) -> int:
        client, done = Client(url, key), 0
        offset = threading.get_ident() % len(queries)
        while not stop.is_set():
            client.recall(queries[(offset + done) % len(queries)])
            done += 1
        return done

    return _run_threads(clients, seconds, over_http)


def http_rates(
    path: Path,
    queries: Sequence[str],
    levels: Sequence[int],
    seconds: float,
    workers: int,
    gc_rescan_seconds: float | None = None,
) -> list[dict[str, Any]]:
    """Recalls per second over HTTP per number of clients, with ``workers`` processes
    (each warmed by a few seconds of untimed load first), and server CPU per recall."""
    rows = []
    with server(path, workers, gc_rescan_seconds=gc_rescan_seconds) as (url, key, pid):
        _http_rate(url, key, queries, max(levels), min(seconds, 3.0))
        for level in levels:
            tick, served = time.perf_counter(), cpu_seconds(pid)
            done = _http_rate(url, key, queries, level, seconds)
            rate = round(done / (time.perf_counter() - tick), 1)
            cpu = round((cpu_seconds(pid) - served) * 1000 / max(done, 1), 2)
            rows.append(
                {"workers": workers, "clients": level, "rest_per_s": rate, "server_cpu_ms": cpu}
            )
    return rows


def sdk_rates(
    path: Path, queries: Sequence[str], levels: Sequence[int], seconds: float
) -> dict[int, tuple[float, float]]:
    """Recalls per second through the SDK in this process per number of threads, and
    CPU per recall."""
    mem = Engram.open(f"sqlite:///{path}", embedder="hashing")
    ctx = context(USER)
    rates = {}
    try:

        def direct(stop: threading.Event) -> int:
            done, offset = 0, threading.get_ident() % len(queries)
            while not stop.is_set():
                mem.recall(ctx, queries[(offset + done) % len(queries)])
                done += 1
            return done

        _run_threads(max(levels), min(seconds, 3.0), direct)
        for level in levels:
            tick, used = time.perf_counter(), time.process_time()
            done = _run_threads(level, seconds, direct)
            rate = round(done / (time.perf_counter() - tick), 1)
            rates[level] = (rate, round((time.process_time() - used) * 1000 / max(done, 1), 2))
    finally:
        mem.close()
    return rates


def throughput_phase(
    path: Path,
    queries: Sequence[str],
    levels: Sequence[int],
    seconds: float,
    worker_counts: Sequence[int],
    gc_rescan_seconds: float | None = None,
) -> list[dict[str, Any]]:
    """HTTP rates for each worker count against the SDK's rate at the same concurrency."""
    rows = [
        row
        for workers in worker_counts
        for row in http_rates(path, queries, levels, seconds, workers, gc_rescan_seconds)
    ]
    sdk = sdk_rates(path, queries, levels, seconds)
    for row in rows:
        row["sdk_per_s"], row["sdk_cpu_ms"] = sdk[row["clients"]]
        row["rest_vs_sdk"] = ratio(row["rest_per_s"], row["sdk_per_s"])
    return rows


def _http_stack() -> dict[str, bool]:
    """Which optional uvicorn speed-ups are installed (uvicorn uses them when present)."""
    import importlib.util

    return {name: importlib.util.find_spec(name) is not None for name in ("httptools", "uvloop")}


def _latency(
    args: argparse.Namespace,
    paths: dict[int, Path],
    queries: dict[int, list[str]],
    payload: dict[str, Any],
) -> None:
    """The latency phase: run, print, and put in ``payload``."""
    size = args.latency_size
    latency = latency_phase(paths[size], queries[size], 20, args.gc_rescan_seconds)
    latency["records"] = args.latency_size
    latency["p95_difference_ms"] = round(latency["rest"]["p95_ms"] - latency["sdk"]["p95_ms"], 3)
    latency["p95_ratio"] = ratio(latency["rest"]["p95_ms"], latency["sdk"]["p95_ms"])
    payload["latency"] = latency
    print_table(
        f"recall latency at {args.latency_size} records (ms)",
        ["path", "p50", "p95", "mean", "n"],
        [
            [name, s["p50_ms"], s["p95_ms"], s["mean_ms"], s["n"]]
            for name, s in (("sdk", latency["sdk"]), ("rest", latency["rest"]))
        ],
    )
    print(
        f"REST p95 - SDK p95 = {latency['p95_difference_ms']} ms (target <= 3), "
        f"ratio {latency['p95_ratio']}; CPU ms per recall {latency['cpu_ms_per_recall']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run both phases, print tables, write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--latency-size", type=int, default=100_000)
    parser.add_argument("--throughput-size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--store-dir", type=Path, default=Path("/tmp/engram-bench-rest"))
    parser.add_argument("--quick", action="store_true", help="10K / 2K, fewer queries")
    parser.add_argument("--gc-rescan-seconds", type=float, default=None,
                        help="engram serve --gc-rescan-seconds (default: the server's, 600; "
                        "0: Python's own garbage collection)")  # fmt: skip
    parser.add_argument("--skip-latency", action="store_true", help="throughput phase only")
    parser.add_argument("--results", type=Path, help="results file (default: results/rest.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.latency_size, args.throughput_size, args.queries, args.seconds = 10_000, 2_000, 100, 4
    corpus = Corpus()
    payload: dict[str, Any] = {"machine": machine(sys.argv), "builds": {},
                               "gc_rescan_seconds": args.gc_rescan_seconds}  # fmt: skip
    payload["machine"]["http"] = _http_stack()
    queries = {
        size: [q.text for q in corpus.queries(args.queries, range(size))]
        for size in {args.latency_size, args.throughput_size}
    }
    paths = {}
    for size in sorted(queries):
        paths[size], built = build_store(args.store_dir, size, corpus)
        payload["builds"][size] = {"seconds": built, "reused": built is None}
    if not args.skip_latency:
        _latency(args, paths, queries, payload)
    rows = throughput_phase(
        paths[args.throughput_size],
        queries[args.throughput_size],
        args.clients,
        args.seconds,
        args.workers,
        args.gc_rescan_seconds,
    )
    payload["throughput"] = {
        "records": args.throughput_size,
        "seconds": args.seconds,
        "levels": rows,
    }
    print_table(
        f"sustained recalls/s at {args.throughput_size} records ({args.seconds:g} s each)",
        ["workers", "clients", "rest/s", "sdk/s", "rest/sdk", "server cpu ms", "sdk cpu ms"],
        [
            [
                r["workers"],
                r["clients"],
                r["rest_per_s"],
                r["sdk_per_s"],
                r["rest_vs_sdk"],
                r["server_cpu_ms"],
                r["sdk_cpu_ms"],
            ]
            for r in rows
        ],
    )
    name = "rest-quick.json" if args.quick else "rest.json"
    write_results(args.results or RESULTS / name, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
