"""Consolidation: how long the sleep cycle takes per episode, against writing them.

Not a test. Each repeat builds a fresh SQLite file store with ``--users`` users of
``--episodes`` episodes each (sessions of 8 episodes, 3 hours apart, generated
sentences, the hashing embedder), then measures in the same process:

1. baseline: ``remember_many`` of those episodes (the write path: policy,
   embedding, decision, commit), milliseconds per episode;
2. ``consolidate`` of the tenant (every user) at a ``now`` that makes every
   episode old: grouping, extractive summaries and facts through the same write
   path, marks, merges; milliseconds per episode, and its ratio to (1);
3. the same ``consolidate`` again (nothing left to do: the scan of marked
   episodes and the merge pass), milliseconds per user;
4. ``recall`` p50 over ``--queries`` questions before and after consolidation
   (the summaries join the candidates), and its ratio.

Medians over ``--repeats`` stores. Usage: ``PYTHONPATH=src python
benchmarks/consolidate.py [--users 20] [--episodes 100] [--repeats 3]``; writes
``benchmarks/results/consolidate.json``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Context, Engram

RESULTS = Path(__file__).resolve().parent / "results" / "consolidate.json"
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=60)
SUBJECTS = ["the billing service", "the nightly backup", "the Kubernetes upgrade",
            "the search index", "the mobile release", "the payments worker"]  # fmt: skip
VERBS = ["We decided to move {s} to a new cluster.", "The deploy of {s} failed with a timeout.",
         "Adding retries fixed {s} and the checks passed.", "I prefer to review {s} on Fridays.",
         "The team discussed the cost of {s} for next month.",
         "Logs of {s} show a memory error after midnight."]  # fmt: skip


def _episodes(rng: random.Random, count: int) -> list[dict[str, Any]]:
    items = []
    for i in range(count):
        session, turn = divmod(i, 8)
        text = rng.choice(VERBS).format(s=rng.choice(SUBJECTS)) + f" (note {i})"
        at = T0 + timedelta(hours=3 * session, minutes=turn)
        items.append({"content": text, "type": "episode", "observed_at": at})
    return items


def _one(path: Path, users: int, episodes: int, queries: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    with Engram.open(f"sqlite:///{path}", embedder="hashing") as mem:
        started = time.perf_counter()
        for u in range(users):
            mem.remember_many(Context(tenant_id="acme", user_id=f"u{u}", agent_id="coder"),
                              _episodes(rng, episodes), now=T0)  # fmt: skip
        write_ms = (time.perf_counter() - started) * 1000
        asks = [
            (Context(tenant_id="acme", user_id=f"u{rng.randrange(users)}", agent_id="coder"),
             f"What happened with {rng.choice(SUBJECTS)}?")
            for _ in range(queries)
        ]  # fmt: skip
        before = [_recall(mem, ctx, q) for ctx, q in asks]
        started = time.perf_counter()
        report = mem.consolidate("acme", now=NOW, progress=False)
        consolidate_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        again = mem.consolidate("acme", now=NOW, progress=False)
        again_ms = (time.perf_counter() - started) * 1000
        after = [_recall(mem, ctx, q) for ctx, q in asks]
    total = users * episodes
    assert report.episodes == total, report
    assert not again.changed, again
    return {
        "write_ms_per_episode": write_ms / total,
        "consolidate_ms_per_episode": consolidate_ms / total,
        "rerun_ms_per_user": again_ms / users,
        "recall_p50_before_ms": summarize(before)["p50_ms"],
        "recall_p50_after_ms": summarize(after)["p50_ms"],
        "summaries": report.summaries,
        "facts_accepted": report.facts_accepted,
        "merges": report.merges,
    }


def _recall(mem: Engram, ctx: Context, query: str) -> float:
    started = time.perf_counter()
    mem.recall(ctx, query, now=NOW)
    return (time.perf_counter() - started) * 1000


def main(argv: list[str]) -> None:
    """Run the benchmark and write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    runs = []
    with temp_dir("engram-consolidate-") as tmp:
        for repeat in range(args.repeats):
            runs.append(_one(tmp / f"r{repeat}.db", args.users, args.episodes, args.queries,
                             seed=repeat))  # fmt: skip
    median = {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}
    median["consolidate_vs_write"] = ratio(median["consolidate_ms_per_episode"],
                                           median["write_ms_per_episode"])  # fmt: skip
    median["recall_after_vs_before"] = ratio(median["recall_p50_after_ms"],
                                             median["recall_p50_before_ms"])  # fmt: skip
    print_table(
        f"consolidation, {args.users} users x {args.episodes} episodes, median of "
        f"{args.repeats} (SQLite file, hashing embedder)",
        ["measure", "value"], [[key, value] for key, value in median.items()],
    )  # fmt: skip
    write_results(RESULTS, {"machine": machine(sys.argv), "settings": vars(args),
                            "median": median, "runs": runs})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
