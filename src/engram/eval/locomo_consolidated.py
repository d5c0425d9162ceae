"""LoCoMo recall before and after consolidation, and after the episodes are swept.

One store, one ingest (``locomo_run.ingest``: every turn an episode), then three
systems asked every question with the full recall pipeline at the same ``now``:

* ``episodes``: the store as ingested (no summaries yet);
* ``consolidated``: after ``Engram.consolidate`` per conversation, with ``now``
  one day past ``min_age_days`` after the last turn, so every session is old
  enough; summaries and episodes coexist, and recall never selects a summary
  with an episode it came from (``recall.coverage``);
* ``summaries``: after the episodes are deleted the way a retention sweep does
  (``contract.Delete`` at the store level: ``forget`` would take the summaries
  with them, since they derive from the episodes), so only summaries answer.

Evidence is mapped through ``source.derived_from``: a summary (or a fact
consolidation extracted) retrieves the turns of the episodes it came from, and
R@k reads the first k *items*
(``RetrievalOutcome.items``). Each system's mean rendered tokens per recall are
reported beside its recall, since a summary item is longer than a turn.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engram.config import Budget, Config
from engram.engram import Engram
from engram.eval.baselines import percentiles
from engram.eval.locomo import LocomoConversation
from engram.eval.locomo_run import TENANT, LocomoRun, context_for, ingest
from engram.eval.metrics import LocomoScores, RetrievalOutcome, score_locomo
from engram.recall.model import RecallStatus
from engram.store.contract import Delete
from engram.store.predicate import Tenant

__all__ = ["STAGES", "ConsolidatedRun", "run_consolidated"]

STAGES = ("episodes", "consolidated", "summaries")
_CHUNK = 500

Turns = dict[str, tuple[str, ...]]  # record id -> the dia_ids it stands for


@dataclass
class ConsolidatedRun:
    """Scores per stage, what consolidation did, and what each recall cost."""

    scores: dict[str, LocomoScores]
    tokens: dict[str, float] = field(default_factory=dict)
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    consolidation: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    turns: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary."""
        return {
            "stages": {name: s.to_dict() for name, s in self.scores.items()},
            "mean_tokens": {k: round(v, 1) for k, v in self.tokens.items()},
            "latency_ms": {k: percentiles(v) for k, v in self.latency_ms.items()},
            "consolidation": dict(self.consolidation),
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "turns": self.turns,
        }


def _when(conv: LocomoConversation, config: Config) -> datetime:
    return conv.turns[-1].time + timedelta(days=config.consolidation.min_age_days + 1)


def _ask(
    mem: Engram, conversations: Sequence[LocomoConversation], turns: Mapping[str, Turns],
    now: Mapping[str, datetime], depth: int,
) -> tuple[dict[tuple[str, int], RetrievalOutcome], list[float], float]:  # fmt: skip
    """Every question through ``recall``; outcomes, latencies, mean tokens."""
    budget = Budget(max_items=depth, max_tokens=1_000_000)
    outcomes: dict[tuple[str, int], RetrievalOutcome] = {}
    times: list[float] = []
    tokens = 0
    for conv in conversations:
        known = turns[conv.sample_id]
        for question in conv.questions:
            started = time.perf_counter()
            result = mem.recall(context_for(conv), question.question, budget=budget,
                                now=now[conv.sample_id])  # fmt: skip
            times.append((time.perf_counter() - started) * 1000)
            tokens += result.tokens
            items = tuple(known[i] for i in result.ids if i in known)
            flat = tuple(dia for item in items for dia in item)
            abstained = result.status == RecallStatus.EMPTY
            outcomes[(conv.sample_id, question.index)] = RetrievalOutcome(flat, abstained, items)
    return outcomes, times, tokens / max(len(times), 1)


def _derived(mem: Engram, conv: LocomoConversation, episodes: Mapping[str, str]) -> Turns:
    """Each record made from the conversation's episodes (its summaries, and the facts
    consolidation extracted) with the turns of those episodes."""
    found: Turns = {}
    offset = 0
    while True:  # every status: list() judges retention by the wall clock, not the run's
        page = mem.list(context_for(conv), status=None, limit=1000, offset=offset)
        for record in page:
            turns = tuple(episodes[i] for i in record.source.derived_from if i in episodes)
            if turns:
                found[record.id] = turns
        if len(page) < 1000:
            return found
        offset += len(page)


def _sweep(mem: Engram, ids: Sequence[str]) -> None:
    """Delete episodes at the store level, as a retention sweep does (summaries stay)."""
    for start in range(0, len(ids), _CHUNK):
        with mem.store.transaction():
            mem.store.apply([Delete(Tenant(TENANT), tuple(ids[start : start + _CHUNK]))])


def _score(run: ConsolidatedRun, stage: str, conversations: Sequence[LocomoConversation],
           asked: tuple[dict[tuple[str, int], RetrievalOutcome], list[float], float],
           ks: Sequence[int]) -> None:  # fmt: skip
    run.scores[stage] = score_locomo(conversations, asked[0], ks)
    run.latency_ms[stage], run.tokens[stage] = asked[1], asked[2]


def run_consolidated(
    conversations: Sequence[LocomoConversation], embedder: str = "hashing",
    ks: Sequence[int] = (5, 10, 25), config: Config | None = None,
) -> ConsolidatedRun:  # fmt: skip
    """Ingest, then score recall before consolidation, after it and after the sweep."""
    cfg = config or Config()
    run, depth = ConsolidatedRun(scores={}), max(ks)
    with Engram.open("sqlite://:memory:", embedder=embedder, config=cfg) as mem:
        started = time.perf_counter()
        ingested = LocomoRun(scores={})
        episodes = {c.sample_id: ingest(mem, c, ingested) for c in conversations}
        run.turns, run.seconds["ingest"] = ingested.turns, time.perf_counter() - started
        now = {c.sample_id: _when(c, cfg) for c in conversations}
        single: dict[str, Turns] = {c: {i: (dia,) for i, dia in ids.items()}
                                    for c, ids in episodes.items()}  # fmt: skip
        _score(run, "episodes", conversations, _ask(mem, conversations, single, now, depth), ks)
        started = time.perf_counter()
        for conv in conversations:
            report = mem.consolidate(TENANT, conv.sample_id, now=now[conv.sample_id])
            for name in ("groups", "summaries", "facts_accepted", "merges"):
                run.consolidation[name] = run.consolidation.get(name, 0) + getattr(report, name)
        run.seconds["consolidate"] = time.perf_counter() - started
        summaries = {c.sample_id: _derived(mem, c, episodes[c.sample_id]) for c in conversations}
        both = {c: {**single[c], **summaries[c]} for c in single}
        _score(run, "consolidated", conversations, _ask(mem, conversations, both, now, depth), ks)
        _sweep(mem, [i for ids in episodes.values() for i in ids])
        _score(run, "summaries", conversations,
               _ask(mem, conversations, summaries, now, depth), ks)  # fmt: skip
    return run
