"""Sharing latency: ``share`` of 100 memories to another agent, on SQLite and PostgreSQL.

Seed 002 asks cross-agent sharing to take under 500 ms. Each round gives a new
user's agent ``coder`` ``--size`` procedures with ``remember_many`` (the
baseline: the write path for the same contents), then times, in the same
store and process:

* ``share``: the ids to agent ``reviewer`` under a grant (read, filter, redact,
  policy, embed, one transaction through the write path, audit);
* ``share again``: the same call once more (every item ``already_shared``);
* ``revoke``: withdrawing the grant, which deletes the round's copies.

Medians and 95th percentiles over ``--rounds`` rounds, and each as a ratio of
the ``remember_many`` median. The hashing embedder keeps the model out of the
figures (``--embedder local`` puts it in). PostgreSQL is ``ENGRAM_BENCH_PG_URL``
or an embedded server.

    PYTHONPATH=src .venv/bin/python benchmarks/share.py --rounds 15
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backends_infra import pg_server, with_database
from common import machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Context, Engram
from engram.working import WorkingConfig
from engram.working.sqlite import SQLiteWorking

RESULTS = Path(__file__).resolve().parent / "results" / "share.json"
TENANT = "acme"
STEPS = ("remember_many", "share", "share again", "revoke")


def _items(round_no: int, size: int) -> list[dict[str, Any]]:
    return [{"content": f"Round {round_no} procedure {i}: deploy service {i} with the "
                        f"blue-green script, then check dashboard {i % 17}.",
             "type": "procedure"} for i in range(size)]  # fmt: skip


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return (time.perf_counter() - start) * 1000, result


def _round(mem: Engram, round_no: int, size: int) -> dict[str, float]:
    """One round's four timings (milliseconds); checks each call did its work."""
    coder = Context(tenant_id=TENANT, user_id=f"u{round_no}", agent_id="coder")
    mem.grant_share(TENANT, "coder", "reviewer", ["procedure"])
    took: dict[str, float] = {}
    items = _items(round_no, size)
    took["remember_many"], written = _timed(lambda: mem.remember_many(coder, items))
    ids = [w.record.id for w in written if w.record is not None]
    took["share"], report = _timed(lambda: mem.share(coder, ids, "reviewer"))
    assert len(report.shared) == size, [i.reason for i in report.items if not i.copy_id][:3]
    took["share again"], again = _timed(lambda: mem.share(coder, ids, "reviewer"))
    assert not again.shared
    took["revoke"], revoked = _timed(lambda: mem.revoke_share(TENANT, "coder", "reviewer"))
    assert len(revoked.deleted) == size
    return took


def run(url: str, rounds: int, size: int, embedder: str) -> dict[str, Any]:
    """Every round on the store at ``url``; summaries per step and ratios."""
    times: dict[str, list[float]] = {step: [] for step in STEPS}
    # sharing never touches working memory: a server store gets an in-memory one
    scratch = SQLiteWorking(":memory:", WorkingConfig()) if url.startswith("postgresql") else None
    with Engram.open(url, embedder=embedder, working=scratch) as mem:
        _round(mem, -1, size)  # warm-up: caches, prepared plans, the vector model claim
        for round_no in range(rounds):
            for step, ms in _round(mem, round_no, size).items():
                times[step].append(ms)
    summary = {step: summarize(values) for step, values in times.items()}
    base = summary["remember_many"]["p50_ms"]
    ratios = {step: ratio(summary[step]["p50_ms"], base) for step in STEPS}
    return {"steps": summary, "ratio_to_remember_many_p50": ratios}


@contextmanager
def _postgres() -> Iterator[str]:
    import psycopg

    with pg_server("256MB") as (admin, _, _settings):
        name = f"engram_share_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        try:
            yield with_database(admin, name)
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.size < 1:
        parser.error("--rounds and --size must be positive")
    results: dict[str, Any] = {}
    wanted = set(args.backends.split(","))
    if "sqlite" in wanted:
        with temp_dir("engram-share") as folder:
            results["sqlite"] = run(f"sqlite:///{folder}/share.db", args.rounds, args.size,
                                    args.embedder)  # fmt: skip
    if "postgresql" in wanted:
        with _postgres() as url:
            results["postgresql"] = run(url, args.rounds, args.size, args.embedder)
    rows = [[backend, step, r["steps"][step]["p50_ms"], r["steps"][step]["p95_ms"],
             r["ratio_to_remember_many_p50"][step]]
            for backend, r in results.items() for step in STEPS]  # fmt: skip
    print_table(f"share of {args.size} memories ({args.embedder} embedder, {args.rounds} rounds)",
                ["backend", "step", "p50 ms", "p95 ms", "x remember_many p50"], rows)  # fmt: skip
    for backend, r in results.items():
        p95 = r["steps"]["share"]["p95_ms"]
        verdict = "within" if p95 < 500 else "OVER"
        print(f"{backend}: share p95 {p95} ms, {verdict} the 500 ms target of seed 002")
    write_results(RESULTS, {"machine": machine(sys.argv), "size": args.size,
                            "rounds": args.rounds, "embedder": args.embedder,
                            "results": results})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
