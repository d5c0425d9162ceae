"""Several processes and threads on one store at once: nothing acknowledged is lost.

Three processes of three threads each (``concur_support``) write, bulk-write,
SUPERSEDE shared keys, recall, sweep, forget and erase on one SQLite file and on
one PostgreSQL database (Redis working memory) for a couple of seconds; then
``concur_checks.judge`` checks the invariants on the store: no undocumented
exception reached a caller (no "database is locked"), no recall saw another
user's record, every acknowledged write is present unless an erasure
acknowledged after it removed it, each contended key has one active version on
one line of versions, and the audit chain verifies. ``benchmarks/concur.py``
runs the same workload larger and reports throughput.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from contextlib import closing

import pytest
from concur_checks import Verdict, judge
from concur_support import VICTIM, Ack, Plan, open_engram, run

from backends import REDIS_URL, RedisPrefixes, redis_client

SECONDS = 2.0


def _plan(shared_url: str, redis_prefixes: RedisPrefixes) -> Plan:
    plan = Plan(url=shared_url, processes=3, threads=3, seconds=SECONDS)
    if shared_url.startswith("postgresql"):
        redis_client().close()  # skip (or fail under CI=true) without Redis
        options = redis_prefixes.options(shared_url, {})
        prefix = options["config"].working.redis_prefix
        plan = dataclasses.replace(plan, working=REDIS_URL, redis_prefix=prefix)
    open_engram(plan).close()  # migrate before the processes race to open it
    return plan


def _run(plan: Plan) -> Verdict:
    logs, _ = run(plan)
    return judge(plan, logs)


def test_concurrent_processes_and_threads_keep_every_invariant(
    shared_url: str, redis_prefixes: RedisPrefixes
) -> None:
    plan = _plan(shared_url, redis_prefixes)
    verdict = _run(plan)
    assert verdict.problems == [], verdict.problems[:10]
    assert not verdict.failures, verdict.failures  # generous bounds: nothing refused
    for kind in ("remember", "remember_many", "supersede", "recall", "erase"):
        assert verdict.done[kind] or verdict.calls[kind], f"no {kind} ran: {verdict.calls}"
    assert verdict.done["supersede"] >= 3
    assert verdict.versions >= verdict.done["supersede"]


@pytest.mark.parametrize("fault", ["lost write", "forked chain", "recalled after forget"])
def test_the_checks_catch_a_planted_fault(
    sqlite_file_url: str, redis_prefixes: RedisPrefixes, fault: str
) -> None:
    """The judge is not vacuous: delete an acknowledged record behind Engram's back
    (the raw SQLite file), log a SUPERSEDE the chain does not hold, or a recall
    returning a forgotten record, and it reports the breach. The checks are
    backend-neutral; the SQLite file shows they can fail."""
    plan = dataclasses.replace(_plan(sqlite_file_url, redis_prefixes), processes=1, threads=2,
                               seconds=0.5)  # fmt: skip
    logs, _ = run(plan)
    forgotten = {i for log in logs for a in log.acks if a.kind == "forget" for i in a.ids}
    if fault == "lost write":
        victim = next(i for log in logs for a in log.acks for i in a.ids
                      if a.kind == "remember" and a.user != VICTIM and not a.ephemeral
                      and i not in forgotten)  # fmt: skip
        with closing(sqlite3.connect(plan.url.removeprefix("sqlite:///"))) as conn, conn:
            conn.execute("DELETE FROM records WHERE id = ?", (victim,))
        wanted = f"{victim} of"
    elif fault == "forked chain":
        real = next(a for log in logs for a in log.acks if a.kind == "supersede")
        logs[0].acks.append(dataclasses.replace(real, ids=("01FORGEDVERSION",)))
        wanted = "not in the chain"
    else:
        kept = next(a for log in logs for a in log.acks if a.kind == "remember")
        end = max(a.end for log in logs for a in log.acks)
        logs[0].acks += [Ack("forget", kept.user, kept.ids, end + 1, end + 2),
                         Ack("recall", kept.user, kept.ids, end + 3, end + 4)]  # fmt: skip
        wanted = "returned it"
    verdict = judge(plan, logs)
    assert any(wanted in p for p in verdict.problems), verdict.problems
