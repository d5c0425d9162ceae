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
bulk of the vector and lexical channels may run on a worker thread beside the
others (``overlapped_channels``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engram.config import RecallConfig
from engram.errors import EngramError
from engram.kernels import pairwise_dots
from engram.recall.model import Candidate, Plan
from engram.recall.trace import ChannelReport, Trace
from engram.store.base import Store
from engram.store.predicate import Visibility
from engram.types import Record

__all__ = ["Sources", "gather"]

Hits = list[tuple[Record, float]]
Known = dict[str, Record]  # the records this request has read, by id


@dataclass(frozen=True, slots=True)
class Sources:
    """What the channels read from: the store, the caller's visibility, the query vector."""

    store: Store
    vis: Visibility
    query_vector: NDArray[np.float32] | None
    model: str
    vector_error: str | None = None
    working: Callable[[int], Sequence[Record]] | None = None  # live working items (by limit)


class _NoQueryVector(EngramError):
    """The query could not be embedded; ``args[0]`` names the error that prevented it."""


def _query_vector(src: Sources) -> NDArray[np.float32]:
    if src.query_vector is None:
        raise _NoQueryVector(src.vector_error or "no query vector")
    return src.query_vector


def _key(plan: Plan, src: Sources, config: RecallConfig, known: Known, bulk: object) -> Hits:
    types = [t for t in plan.types if t not in config.working_types]
    records = src.store.keyed(src.vis, types, plan.statuses, plan.limits["key"])
    return [(r, 1.0) for r in records]


def _working(plan: Plan, src: Sources, config: RecallConfig, known: Known, bulk: object) -> Hits:
    types = [t for t in plan.types if t in config.working_types]
    if not types:
        return []
    limit = plan.limits["working"]
    live = [r for r in src.working(limit) if r.type in types] if src.working else []
    records = src.store.recent(src.vis, plan.statuses, limit, types)
    return [(r, 1.0) for r in [*live, *records][:limit]]


def _lexical_scan(plan: Plan, src: Sources) -> object:
    return src.store.lexical_scan(src.vis, plan.query, plan.statuses, plan.limits["lexical"])


def _lexical(plan: Plan, src: Sources, config: RecallConfig, known: Known, bulk: object) -> Hits:
    return src.store.lexical_hits(src.vis, plan.query, plan.statuses, plan.limits["lexical"],
                                  scan=bulk, known=known)  # fmt: skip


def _vector_scan(plan: Plan, src: Sources) -> object:
    return src.store.vector_scan(src.vis, _query_vector(src), src.model)


def _vector(plan: Plan, src: Sources, config: RecallConfig, known: Known, bulk: object) -> Hits:
    return src.store.vector_hits(src.vis, _query_vector(src), src.model, plan.statuses,
                                 plan.limits["vector"], scan=bulk, known=known)  # fmt: skip


_CHANNELS: dict[str, Callable[[Plan, Sources, RecallConfig, Known, object], Hits]] = {
    "key": _key,
    "working": _working,
    "lexical": _lexical,
    "vector": _vector,
}
# Channels that can overlap the others: a worker thread runs only their bulk phase
# (the vector scan is SIMD work that releases the GIL; SQLite releases it while it
# steps), and the calling thread finishes them: ranks, checks status, decodes
# records (Python, which would hold the GIL against this thread).
_BULK: dict[str, Callable[[Plan, Sources], object]] = {
    "lexical": _lexical_scan,
    "vector": _vector_scan,
}


def _failed(report: ChannelReport, exc: EngramError) -> None:
    """Name the cause in the trace, e.g. IndexMismatch."""
    report.error = str(exc) if isinstance(exc, _NoQueryVector) else type(exc).__name__


class _Bulk:
    """A channel's bulk phase, run on the worker, or the error it raised."""

    def __init__(self, name: str, plan: Plan, src: Sources, report: ChannelReport) -> None:
        start = time.perf_counter()
        self.result: object | None = None
        self.error: EngramError | None = None
        try:
            self.result = _BULK[name](plan, src)
        except EngramError as exc:
            self.error = exc
        report.ms += (time.perf_counter() - start) * 1000


def _search(
    name: str, plan: Plan, src: Sources, config: RecallConfig, report: ChannelReport,
    known: Known, bulk: _Bulk | None = None,
) -> Hits:  # fmt: skip
    """One channel's hits (or its bulk phase finished), recorded in ``known`` so an
    id two channels found is decoded once; failures go to the report."""
    start = time.perf_counter()
    hits: Hits = []
    try:
        if bulk is not None and bulk.error is not None:
            raise bulk.error
        hits = _CHANNELS[name](plan, src, config, known, None if bulk is None else bulk.result)
        known.update((record.id, record) for record, _ in hits)
    except EngramError as exc:
        _failed(report, exc)
    report.ms += (time.perf_counter() - start) * 1000
    report.count = len(hits)
    return hits


def _run_channels(plan: Plan, src: Sources, config: RecallConfig, trace: Trace) -> dict[str, Hits]:
    """Every channel of the plan. The bulk phases of ``overlapped_channels`` run one
    after another on a worker thread while the other channels run here, and are
    finished here (``_BULK``); a file store gives each thread its own read
    connection. One worker, not one per channel: on two cores a third busy thread
    only slows the other two. Not inside an open transaction: the worker would not
    see the transaction's own writes (and on a single-connection store it would
    wait for the lock the caller holds)."""
    reports = {name: ChannelReport(name) for name in plan.limits}
    trace.channels.update(reports)
    overlapped: list[str] = []
    if not src.store.in_transaction and len(plan.limits) > 1:
        overlapped = [n for n in plan.limits if n in config.overlapped_channels and n in _BULK]
        overlapped = overlapped if len(overlapped) < len(plan.limits) else overlapped[1:]

    def bulk_phases() -> dict[str, _Bulk]:
        return {name: _Bulk(name, plan, src, reports[name]) for name in overlapped}

    pending = _worker().submit(bulk_phases) if overlapped else None
    known: Known = {}
    hits = {name: _search(name, plan, src, config, reports[name], known)
            for name in plan.limits if name not in overlapped}  # fmt: skip
    if pending is not None:
        for name, bulk in pending.result().items():
            hits[name] = _search(name, plan, src, config, reports[name], known, bulk)
    return {name: hits[name] for name in plan.limits}


_WORKERS: list[ThreadPoolExecutor] = []
_WORKERS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child inherits the pool but not its threads, and the lock in whatever
    state the forking thread saw: it gets a fresh lock and builds its own pool."""
    global _WORKERS_LOCK
    _WORKERS_LOCK = threading.Lock()
    _WORKERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _worker() -> ThreadPoolExecutor:
    """The process-wide pool that runs overlapped channels beside the others."""
    with _WORKERS_LOCK:
        if not _WORKERS:
            cores = os.cpu_count() or 1
            _WORKERS.append(ThreadPoolExecutor(max(2, cores), thread_name_prefix="engram-vector"))
        return _WORKERS[0]


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
    gap = int(config.context_max_gap_seconds * 1_000_000)
    try:
        anchors = [seed.record for seed in seeds[: plan.context_seeds]]
        for record in src.store.neighbors(src.vis, anchors, types, plan.statuses, gap,
                                          config.context_window):  # fmt: skip
            if record.id not in found:
                found[record.id] = Candidate(record, channels={"context": 1.0})
                report.count += 1
    except EngramError as exc:
        report.error = type(exc).__name__
    report.ms = (time.perf_counter() - start) * 1000


def _attach_vectors(candidates: list[Candidate], src: Sources) -> None:
    """Give each candidate its stored vector and its cosine to the query."""
    if src.query_vector is None or not candidates:
        return
    try:
        vectors = src.store.vectors_of(src.vis, [c.id for c in candidates], src.model)
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
