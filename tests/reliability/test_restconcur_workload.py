"""Several client processes and threads through one ``engram serve``: every invariant holds.

Two client processes of three threads each send writes (some transient), bulk
writes, SUPERSEDEs and corrections of shared keys, recalls, sweeps, forgets and
erasures of a shared user to a real ``engram serve`` over loopback HTTP, on a SQLite file and on
PostgreSQL with working memory on Redis; on a SQLite file also through
``--workers 2`` (two server processes on one socket, each with its own Engram on
the file; each must have used CPU serving during the run).
``concur_checks.judge`` then checks the store as for the SDK workload: no
undocumented answer reached a caller (no 5xx but a 503 problem with
``Retry-After``; 409 only for a stale correction), no recall saw another user's
record, every acknowledged write is present unless an erasure acknowledged after
it removed it, each contended key has one active version on one line of
versions, and the audit chain verifies. A busy store through REST is
``test_a_store_busy_past_its_bound_answers_503_with_retry_after``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from concur_checks import Verdict, judge
from concur_support import Plan, open_engram
from restconcur_support import REST_MIX, run_rest
from restcrash_server import Server, admin_key, clear_working
from tests.backends import REDIS_URL, redis_client

SECONDS = 2.5
TENANT = "concur-rest"


@pytest.fixture
def plan(shared_url: str) -> Iterator[Plan]:
    """The REST mix on the test's store; Redis working memory for a server store."""
    plan = Plan(url=shared_url, processes=2, threads=3, seconds=SECONDS, tenant=TENANT,
                mix=REST_MIX)  # fmt: skip
    if shared_url.startswith("postgresql"):
        redis_client().close()  # skip (or fail under CI=true) without Redis
        plan = dataclasses.replace(plan, working=REDIS_URL)
    open_engram(plan).close()  # migrated before the server and the judge open it
    yield plan
    if plan.working is not None:
        clear_working(plan.working, TENANT)


def _run(plan: Plan, folder: Path, workers: int = 1) -> Verdict:
    key = admin_key(folder / "keys.json", plan.tenant)
    server = Server(plan.url, folder / "keys.json", folder, plan.working, workers=workers)
    server.start()
    try:
        if workers > 1:  # each worker up before the clients start, and each one serving
            store = Path(plan.url.removeprefix("sqlite:///"))
            before = server.wait_workers(store)
        logs, _ = run_rest(plan, server.url, key)
        if workers > 1:
            after = server.workers_cpu(store)
            idle = [pid for pid in before if after.get(pid, 0) - before[pid] < 0.05]
            assert not idle, f"workers {idle} served nothing: {before} -> {after}"
    finally:
        server.stop()
    verdict = judge(plan, logs)
    if "Traceback" in server.output():  # an error the server logged, answered or not
        verdict.problems.append(f"the server logged: {server.output()[-3000:]}")
    return verdict


def _holds(verdict: Verdict) -> None:
    assert verdict.problems == [], verdict.problems[:10]
    busy = {k: n for k, n in verdict.failures.items() if not k.startswith("correct:")}
    assert not busy, verdict.failures  # generous bounds: nothing refused but stale corrections
    for kind in ("remember", "remember_many", "supersede", "recall", "sweep", "forget", "erase"):
        assert verdict.done[kind], f"no {kind} acknowledged: {verdict.calls}"
    assert verdict.versions >= verdict.done["supersede"] >= 3


def test_concurrent_clients_through_one_server_keep_every_invariant(
    plan: Plan, tmp_path: Path
) -> None:
    _holds(_run(plan, tmp_path))


def test_two_server_workers_on_one_sqlite_file_keep_every_invariant(
    sqlite_file_url: str, tmp_path: Path
) -> None:
    plan = Plan(url=sqlite_file_url, processes=2, threads=3, seconds=SECONDS, tenant=TENANT,
                mix=REST_MIX)  # fmt: skip
    open_engram(plan).close()
    _holds(_run(plan, tmp_path, workers=2))
