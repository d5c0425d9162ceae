"""Stage 3: candidates from every channel the plan names, fused by reciprocal rank.

Channels (all under the scope predicate, inside the storage query):

* ``key``: keyed records of structured types (exact, deterministic lookup);
* ``working``: the live working memory (``engram.working``) and the stored task
  state of the caller's task and session, live items first;
* ``lexical``: BM25 over in-memory postings;
* ``vector``: exact cosine over the caller's vector partitions;
* ``context``: the episodes observed just before and after the best episodic
  candidates (a conversation turn is often only meaningful next to its
  neighbours: the answer follows the question).

A channel that fails is reported in the trace and the others still answer (the
pipeline turns that into status ``partial``). Each candidate keeps the channels
that found it, its rank and raw score in each, and its fused RRF score. The
channels are asked of the store in one ``Store.candidates`` call, so a store
can overlap them (the SQLite store scans vectors on a worker thread meanwhile)
and decode a record two channels found once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from numpy.typing import NDArray

from engram.config import RecallConfig
from engram.errors import EngramError
from engram.kernels import pairwise_dots
from engram.recall.model import Candidate, Plan
from engram.recall.trace import ChannelReport, Trace
from engram.store.contract import (
    Hits,
    KeyProbe,
    LexicalProbe,
    NeighbourProbe,
    Probe,
    RecentProbe,
    Store,
    VectorProbe,
)
from engram.store.predicate import Visibility
from engram.types import Record

__all__ = ["Sources", "gather"]


@dataclass(frozen=True, slots=True)
class Sources:
    """What the channels read from: the store, the caller's visibility, the query vector."""

    store: Store
    vis: Visibility
    query_vector: NDArray[np.float32] | None
    model: str
    vector_error: str | None = None
    working: Callable[[int], Sequence[Record]] | None = None  # live working items (by limit)


def _probe(name: str, plan: Plan, src: Sources, config: RecallConfig) -> Probe | str | None:
    """The probe of one channel; a string names why it cannot run (no query vector),
    None means it has nothing to look for (no working types)."""
    limit = plan.limits[name]
    if name == "key":
        types = tuple(t for t in plan.types if t not in config.working_types)
        return KeyProbe(plan.statuses, limit, types=types)
    if name == "working":
        types = tuple(t for t in plan.types if t in config.working_types)
        return RecentProbe(plan.statuses, limit, types) if types else None
    if name == "lexical":
        return LexicalProbe(plan.query, plan.statuses, limit)
    if name == "vector":
        if src.query_vector is None:
            return src.vector_error or "no query vector"
        return VectorProbe(src.query_vector, src.model, plan.statuses, limit)
    raise AssertionError(f"unknown channel {name!r}")


def _run_channels(plan: Plan, src: Sources, config: RecallConfig, trace: Trace) -> dict[str, Hits]:
    """Every channel of the plan, answered by one ``Store.candidates`` call (the store
    may overlap them: ``SQLiteConfig.overlapped_probes``). The channels of that call
    report its wall time each; a failed channel names its error (e.g. IndexMismatch)
    and the others still answer."""
    reports = {name: ChannelReport(name) for name in plan.limits}
    trace.channels.update(reports)
    hits: dict[str, Hits] = {name: [] for name in plan.limits}
    asked: list[tuple[str, Probe]] = []
    for name in plan.limits:
        probe = _probe(name, plan, src, config)
        if isinstance(probe, str):
            reports[name].error = probe
        elif probe is not None:
            asked.append((name, probe))
    start = time.perf_counter()
    answers = src.store.candidates(src.vis, [probe for _, probe in asked]) if asked else []
    elapsed = (time.perf_counter() - start) * 1000
    for (name, _), answer in zip(asked, answers, strict=True):
        reports[name].ms = elapsed
        if isinstance(answer, EngramError):
            reports[name].error = type(answer).__name__
        else:
            hits[name] = answer
            reports[name].count = len(answer)
    if "working" in hits and src.working is not None:
        _add_live_working(hits, plan, src, config, reports["working"])
    return hits


def _add_live_working(
    hits: dict[str, Hits], plan: Plan, src: Sources, config: RecallConfig, report: ChannelReport
) -> None:
    """Put the caller's live working items (``engram.working``) ahead of stored task
    state in the working channel; an unreachable working store fails only this channel."""
    types = {t for t in plan.types if t in config.working_types}
    if not types or src.working is None:
        return
    limit = plan.limits["working"]
    start = time.perf_counter()
    try:
        live = [(r, 1.0) for r in src.working(limit) if r.type in types]
    except EngramError as exc:
        report.error = type(exc).__name__
        return
    finally:
        report.ms += (time.perf_counter() - start) * 1000
    hits["working"] = [*live, *hits["working"]][:limit]
    report.count = len(hits["working"])


def gather(plan: Plan, src: Sources, config: RecallConfig, trace: Trace) -> list[Candidate]:
    """Run the plan's channels and fuse their rankings (reciprocal-rank fusion)."""
    allowed = set(plan.types)
    found: dict[str, Candidate] = {}
    for name, hits in _run_channels(plan, src, config, trace).items():
        for rank, (record, score) in enumerate(hits):
            if record.type not in allowed:
                continue
            cand = found.get(record.id)
            if cand is None:
                cand = found[record.id] = Candidate(record)
            cand.channels[name] = score
            cand.ranks[name] = rank
            cand.fused += 1.0 / (config.rrf_k + rank + 1)
    if plan.limits:
        _expand_context(found, plan, src, config, trace)
    ranked = sorted(found.values(), key=lambda c: -c.fused)
    _attach_vectors(ranked, src)
    return ranked


def _expand_context(
    found: dict[str, Candidate], plan: Plan, src: Sources, config: RecallConfig, trace: Trace
) -> None:
    """Add the temporal neighbours of the strongest episodic candidates."""
    report = ChannelReport("context")
    trace.channels["context"] = report
    start = time.perf_counter()
    types = [t for t in plan.types if t in config.context_types]
    seeds = [c for c in sorted(found.values(), key=lambda c: -c.fused) if c.record.type in types]
    anchors = tuple(seed.record for seed in seeds[: plan.context_seeds])
    probe = NeighbourProbe(anchors, tuple(types), plan.statuses,
                           timedelta(seconds=config.context_max_gap_seconds),
                           config.context_window)  # fmt: skip
    answer = src.store.candidates(src.vis, [probe])[0]
    if isinstance(answer, EngramError):
        report.error = type(answer).__name__
    else:
        for record, _ in answer:
            if record.id not in found:
                found[record.id] = Candidate(record, channels={"context": 1.0})
                report.count += 1
    report.ms = (time.perf_counter() - start) * 1000


def _attach_vectors(candidates: list[Candidate], src: Sources) -> None:
    """Give each candidate its stored vector and its cosine to the query."""
    if src.query_vector is None or not candidates:
        return
    try:
        vectors = src.store.vectors(src.vis, [c.id for c in candidates], src.model)
    except EngramError:
        return
    held = [cand for cand in candidates if cand.id in vectors]
    if not held:
        return
    matrix = np.stack([vectors[cand.id] for cand in held])
    cosines = pairwise_dots(src.query_vector.reshape(1, -1), matrix)[0].tolist()
    for cand, cosine in zip(held, cosines, strict=True):
        cand.vector = vectors[cand.id]
        cand.components["semantic_raw"] = cosine
