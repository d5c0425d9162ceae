"""Run retrieval systems over LoCoMo and score them in one process, on the same data.

Each conversation becomes one user scope (tenant ``locomo``, user = sample id);
each turn becomes one ``episode`` memory written through the normal write path
(content = speaker, text and image caption; observed at the session time;
``source.ref`` = the dia_id). Each question is then asked of four systems:

* ``bm25``, ``dense``, ``hybrid``: the baselines of ``engram.eval.baselines``;
* ``engram``: the full recall pipeline (eligibility, dedup, rerank, floor,
  conflicts, budget), which may abstain (status ``empty``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from engram.config import Budget, Config
from engram.engram import Engram
from engram.eval.baselines import Ranker, baseline_rankers, percentiles
from engram.eval.locomo import LocomoConversation, LocomoQuestion, turn_text
from engram.eval.metrics import LocomoScores, RetrievalOutcome, score_locomo
from engram.recall.model import RecallStatus
from engram.scope import Context

__all__ = ["SYSTEMS", "LocomoRun", "ingest", "run_locomo"]

SYSTEMS = ("bm25", "dense", "hybrid", "engram")
TENANT = "locomo"


@dataclass
class LocomoRun:
    """Scores per system plus what it cost and what the write path refused."""

    scores: dict[str, LocomoScores]
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    ingest_seconds: float = 0.0
    turns: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    merged: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary."""
        lat = {name: percentiles(values) for name, values in self.latency_ms.items()}
        return {
            "systems": {name: s.to_dict() for name, s in self.scores.items()},
            "latency_ms": lat,
            "ingest_seconds": round(self.ingest_seconds, 2),
            "turns": self.turns,
            "rejected_turns": dict(self.rejected),
            "merged_turns": self.merged,
        }


def context_for(conv: LocomoConversation) -> Context:
    """The scope one conversation's memories live in."""
    return Context(tenant_id=TENANT, user_id=conv.sample_id)


def ingest(mem: Engram, conv: LocomoConversation, run: LocomoRun) -> dict[str, str]:
    """Write every turn as an episode; returns record id -> dia_id."""
    items = [
        {"content": turn_text(t), "type": "episode", "confidence": 1.0,
         "observed_at": t.time + timedelta(seconds=t.index),
         "source": {"kind": "conversation", "ref": t.dia_id},
         "consent_basis": "dataset_licence"}
        for t in conv.turns
    ]  # fmt: skip
    results = mem.remember_many(context_for(conv), items, now=conv.turns[-1].time)
    mapping: dict[str, str] = {}
    for turn, result in zip(conv.turns, results, strict=True):
        run.turns += 1
        if result.record is None:
            run.rejected[result.reason] = run.rejected.get(result.reason, 0) + 1
        elif result.operation.value == "CONFIRM":
            run.merged += 1
        else:
            mapping[result.record.id] = turn.dia_id
    return mapping


Retriever = Callable[[LocomoConversation, LocomoQuestion], tuple[list[str], bool]]


def _systems(mem: Engram, depth: int, now_of: Mapping[str, Any]) -> dict[str, Retriever]:
    budget = Budget(max_items=depth, max_tokens=1_000_000)  # default quotas and retention

    def baseline(rank: Ranker) -> Retriever:
        return lambda conv, q: (rank(context_for(conv), q.question), False)

    def full(conv: LocomoConversation, q: LocomoQuestion) -> tuple[list[str], bool]:
        result = mem.recall(context_for(conv), q.question, budget=budget,
                            now=now_of[conv.sample_id])  # fmt: skip
        return result.ids, result.status == RecallStatus.EMPTY

    rankers = baseline_rankers(mem, depth)
    return {**{name: baseline(rank) for name, rank in rankers.items()}, "engram": full}


def run_locomo(
    conversations: Sequence[LocomoConversation],
    embedder: str = "local",
    systems: Sequence[str] = SYSTEMS,
    ks: Sequence[int] = (5, 10, 25),
    config: Config | None = None,
) -> LocomoRun:
    """Ingest every conversation into a fresh in-memory store and score each system."""
    run = LocomoRun(scores={})
    depth = max(ks)
    with Engram.open("sqlite://:memory:", embedder=embedder, config=config) as mem:
        started = time.perf_counter()
        id_maps = {conv.sample_id: ingest(mem, conv, run) for conv in conversations}
        run.ingest_seconds = time.perf_counter() - started
        now_of = {c.sample_id: c.turns[-1].time + timedelta(days=1) for c in conversations}
        retrievers = _systems(mem, depth, now_of)
        for name in systems:
            outcomes, times = _ask_all(conversations, retrievers[name], id_maps)
            run.scores[name] = score_locomo(conversations, outcomes, ks)
            run.latency_ms[name] = times
    return run


def _ask_all(
    conversations: Sequence[LocomoConversation],
    retriever: Retriever,
    id_maps: Mapping[str, Mapping[str, str]],
) -> tuple[dict[tuple[str, int], RetrievalOutcome], list[float]]:
    outcomes: dict[tuple[str, int], RetrievalOutcome] = {}
    times: list[float] = []
    for conv in conversations:
        id_map = id_maps[conv.sample_id]
        for question in conv.questions:
            t0 = time.perf_counter()
            ids, abstained = retriever(conv, question)
            times.append((time.perf_counter() - t0) * 1000)
            dia = tuple(id_map[i] for i in ids if i in id_map)
            outcomes[(conv.sample_id, question.index)] = RetrievalOutcome(dia, abstained)
    return outcomes, times
