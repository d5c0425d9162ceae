"""Measure the embedders on a small multilingual set: which memory does a query find?

Not a test. 24 memories (``multilingual_set.tsv``), three in each of eight
languages (Japanese, Chinese, Russian, Arabic, Hindi, Greek, Spanish, German),
each with a paraphrased query in its own language (some words shared, never the
same sentence) and one in English (cross-lingual). For every embedder it reports:

- ``vector_r1`` / ``vector_r5``: the memory's rank by cosine alone among all 24;
- ``recall_r1``: the memory first in ``Engram.recall`` (vectors, BM25 with the
  script-aware tokens, rerank), same-language queries;
- ``cross_r1`` / ``cross_r5``: cosine rank for the English queries.

Usage: ``PYTHONPATH=src python benchmarks/multilingual.py``; writes
``benchmarks/results/multilingual.json``. Embedders that are not installed are
skipped.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from engram import Budget, Context, Engram, FrozenClock
from engram.embed import create_embedder
from engram.errors import EmbeddingError

# (language, memory, same-language query, English query), one tab-separated row each
SET = [
    tuple(line.split("\t"))
    for line in (Path(__file__).parent / "multilingual_set.tsv").read_text("utf-8").splitlines()
    if line and not line.startswith("#")
]

NOW = datetime(2024, 3, 1, tzinfo=UTC)
CTX = Context(tenant_id="bench", user_id="polyglot")
OUT = Path(__file__).parent / "results" / "multilingual.json"


def _ranks(memories: np.ndarray, queries: np.ndarray) -> list[int]:
    """Rank (0 = first) of memory i by cosine for query i."""
    scores = queries @ memories.T
    return [int((row > row[i]).sum()) for i, row in enumerate(scores)]


def _recall_first(name: str) -> float:
    """Share of same-language queries whose memory ``Engram.recall`` puts first."""
    with Engram.open("sqlite://:memory:", embedder=name, clock=FrozenClock(NOW)) as mem:
        ids = []
        for _, content, _, _ in SET:
            result = mem.remember(CTX, content, consent_basis="bench", retention="permanent")
            ids.append(result.record.id if result.record else None)
        hits = 0
        for i, (_, _, query, _) in enumerate(SET):
            items = mem.recall(CTX, query, budget=Budget(max_items=5, max_tokens=4000)).items
            hits += bool(items) and items[0].record.id == ids[i]
    return hits / len(SET)


def measure(name: str) -> dict[str, float | str]:
    """Every number of the module docstring for one embedder."""
    embedder = create_embedder(name)
    memories = embedder.embed([row[1] for row in SET])
    same = _ranks(memories, embedder.embed([row[2] for row in SET]))
    cross = _ranks(memories, embedder.embed([row[3] for row in SET]))
    share = lambda ranks, k: round(sum(r < k for r in ranks) / len(ranks), 3)  # noqa: E731
    return {
        "model_id": embedder.model_id,
        "vector_r1": share(same, 1), "vector_r5": share(same, 5),
        "recall_r1": round(_recall_first(name), 3),
        "cross_r1": share(cross, 1), "cross_r5": share(cross, 5),
    }  # fmt: skip


def main() -> None:
    results = {}
    for name in ("hashing", "local", "multilingual"):
        try:
            results[name] = measure(name)
        except EmbeddingError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        print(name, results[name])
    OUT.write_text(json.dumps({"pairs": len(SET), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
