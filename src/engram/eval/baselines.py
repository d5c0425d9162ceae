"""The baseline retrievers every benchmark runs beside Engram, and what they share.

A benchmark asks each question of the full recall pipeline and of three simple
systems over the same store and embedder, in the same process, so that a
difference between them is the pipeline's and nothing else:

* ``bm25``: the store's lexical candidate query alone;
* ``dense``: the store's vector candidate query alone (exact cosine);
* ``hybrid``: reciprocal-rank fusion of the two (``rrf_k`` of the recall
  configuration), no rerank.

Each ranker takes the scope to search and the question text and returns
record ids, best first. LoCoMo and BEAM both use these, so their baseline rows
mean the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engram.engram import Engram
from engram.errors import EngramError
from engram.scope import Context, resolve
from engram.store.contract import LexicalProbe, Probe, Store, VectorProbe
from engram.store.predicate import Visibility

__all__ = ["BASELINES", "Ranker", "baseline_rankers", "percentiles", "ranked_ids", "rrf"]

BASELINES = ("bm25", "dense", "hybrid")
_ACTIVE = ("active",)

Ranker = Callable[[Context, str], list[str]]
"""(scope to search, question) -> record ids, best first."""


def rrf(lists: Sequence[Sequence[str]], k: int, depth: int) -> list[str]:
    """Fuse ranked lists by reciprocal rank (1 / (k + rank)); the first ``depth`` ids."""
    fused: dict[str, float] = {}
    for ranked in lists:
        for rank, item in enumerate(ranked):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank + 1)
    return sorted(fused, key=lambda i: -fused[i])[:depth]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Return the p50 and p95 of latency samples (nearest rank), ``{}`` for none."""
    ordered = sorted(values)
    if not ordered:
        return {}

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": round(pick(0.5), 3), "p95": round(pick(0.95), 3)}


def ranked_ids(store: Store, ctx: Context, probe: Probe) -> list[str]:
    """The ids one candidate probe returns for ``ctx``, best first (its error raised)."""
    answer = store.candidates(Visibility.of(resolve(ctx)), [probe])[0]
    if isinstance(answer, EngramError):
        raise answer
    return [record.id for record, _ in answer]


def baseline_rankers(mem: Engram, depth: int) -> dict[str, Ranker]:
    """Return the ``bm25``, ``dense`` and ``hybrid`` rankers over ``mem``'s store."""
    store, embedder, rrf_k = mem.store, mem.embedder, mem.config.recall.rrf_k

    def bm25(ctx: Context, question: str) -> list[str]:
        return ranked_ids(store, ctx, LexicalProbe(question, _ACTIVE, depth))

    def dense(ctx: Context, question: str) -> list[str]:
        vec = embedder.embed([question])[0]
        return ranked_ids(store, ctx, VectorProbe(vec, embedder.model_id, _ACTIVE, depth))

    def hybrid(ctx: Context, question: str) -> list[str]:
        return rrf([bm25(ctx, question), dense(ctx, question)], rrf_k, depth)

    return {"bm25": bm25, "dense": dense, "hybrid": hybrid}
