"""``engram serve`` killed with SIGKILL mid-traffic loses nothing it acknowledged.

A real server process (``python -m engram serve``) on the store (a SQLite file;
PostgreSQL with working memory on Redis) takes the crash writer's workload from a
client over loopback HTTP: single writes, ``POST /v1/memories:batch``, supersedes
(by key and by ``/correct``), episodes and ``POST /v1/consolidate``, forget
(``DELETE /v1/memories/{id}``) and erasure (``DELETE /v1/users/{id}``). The client
logs an acknowledgement only once its 2xx answer arrived. Each trial SIGKILLs the
server during (or just after) the operation chosen for it, restarts the server on
the same store and reads every acknowledged record back through it; at the end
``crash_checks`` judges the store: every acknowledged write present with its
content, acknowledged deletions gone, batches whole, one active version per key,
vectors present, indexes equal to a rebuild's, integrity and the audit chain.
Targets come from ``ENGRAM_CRASH_SEED`` (random when unset; the seed is in every
failure message); ``benchmarks/crash.py --surface rest`` runs a hundred or more.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from restcrash_server import clear_working
from restcrash_support import KINDS, RestHarness
from tests.backends import REDIS_URL, redis_client

TRIALS = 2


def _seed() -> int:
    return int(os.environ.get("ENGRAM_CRASH_SEED") or random.randrange(1 << 30))


def test_a_server_killed_mid_traffic_loses_nothing_it_acknowledged(
    shared_url: str, tmp_path: Path
) -> None:
    seed = _seed()
    redis_url = None
    if shared_url.startswith("postgresql"):
        redis_client().close()  # skips (or fails under CI=true) when Redis is missing
        redis_url = REDIS_URL
    harness = RestHarness(shared_url, tmp_path, redis_url, seed=seed)
    targets = random.Random(seed).sample(KINDS, TRIALS)
    try:
        for trial, target in enumerate(targets):
            harness.kill_trial(trial, target)
        findings = harness.check()
    finally:
        harness.close()
        if redis_url is not None:
            clear_working(redis_url, "crash")

    where = f"seed {seed}, targets {targets}, kills {harness.kills}"
    assert findings.failures == [], where
    assert len(harness.kills) == TRIALS, where
    assert findings.acknowledged > 0, where  # the client got far enough to be told
    assert harness.served > 0, where  # and the restarted servers answered for it
