"""A writer process killed with SIGKILL at random moments loses nothing it acknowledged.

Each trial starts ``crash_writer.py`` on the store (a SQLite file; PostgreSQL with
working memory on Redis), lets it run its cycle of single writes, bulk writes,
supersedes, consolidation, the sweep, forget and erasure, and kills it during
(or just after) the operation chosen for the trial. After each kill the store is
reopened and checked (``crash_checks``): every acknowledged write is there with
its content, every acknowledged deletion is gone, no write is half there, the
indexes agree with a rebuild and the audit chain verifies. CI runs three trials
per backend, on targets drawn from ``ENGRAM_CRASH_SEED`` (random when unset; the
seed is in every failure message); ``benchmarks/crash.py`` runs a hundred or more.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from crash_support import KINDS, Harness, run_trials
from tests.backends import REDIS_URL, RedisPrefixes

TRIALS = 3


def _seed() -> int:
    return int(os.environ.get("ENGRAM_CRASH_SEED") or random.randrange(1 << 30))


def _working(url: str, prefixes: RedisPrefixes) -> tuple[str | None, str | None]:
    """Redis working memory (URL and key prefix) for a server store, none for SQLite."""
    if not url.startswith("postgresql"):
        return None, None
    options = prefixes.options(url, {})
    return REDIS_URL, str(options["config"].working.redis_prefix)


def test_a_writer_killed_at_random_moments_loses_nothing_it_acknowledged(
    shared_url: str, redis_prefixes: RedisPrefixes, tmp_path: Path
) -> None:
    seed = _seed()
    redis_url, prefix = _working(shared_url, redis_prefixes)
    harness = Harness(shared_url, tmp_path, redis_url, prefix, seed=seed)
    targets = random.Random(seed).sample(KINDS, TRIALS)

    findings = run_trials(harness, targets)

    where = f"seed {seed}, targets {targets}, kills {harness.kills}"
    assert findings.failures == [], where
    assert len(harness.kills) == TRIALS, where
    assert all(kill.target in KINDS for kill in harness.kills)
    assert findings.acknowledged > 0, where  # the writers got far enough to be told
