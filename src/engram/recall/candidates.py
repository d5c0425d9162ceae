"""Stage 3: candidates from every channel the plan names, fused by reciprocal rank.

Channels (all under the scope predicate, inside the storage query):

* ``key``: keyed records of structured types (exact, deterministic lookup);
* ``working``: task state of the caller's task and session;
* ``lexical``: BM25 over FTS5;
* ``vector``: exact cosine over the caller's vector partitions;
* ``context``: the episodes observed just before and after the best episodic
  candidates (a conversation turn is often only meaningful next to its
  neighbours: the answer follows the question).

A channel that fails is reported in the trace and the others still answer (the
pipeline turns that into status ``partial``). Each candidate keeps the channels
that found it, its rank and raw score in each, and its fused RRF score. The
vector and lexical channels may run on worker threads beside the others
(``overlapped_channels``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engram.config import RecallConfig
from engram.errors import EngramError
from engram.recall.model import Candidate, Plan
from engram.recall.trace import ChannelReport, Trace
from engram.store.base import Store
from engram.store.predicate import Visibility
from engram.types import Record

__all__ = ["Sources", "gather"]

Hits = list[tuple[Record, float]]


@dataclass(frozen=True, slots=True)
class Sources:
    """What the channels read from: the store, the caller's visibility, the query vector."""

    store: Store
    vis: Visibility
    query_vector: NDArray[np.float32] | None
    model: str
    vector_error: str | None = None


def _key(plan: Plan, src: Sources, config: RecallConfig) -> Hits:
    types = [t for t in plan.types if t not in config.working_types]
    records = src.store.keyed(src.vis, types, plan.statuses, plan.limits["key"])
    return [(r, 1.0) for r in records]


def _working(plan: Plan, src: Sources, config: RecallConfig) -> Hits:
    types = [t for t in plan.types if t in config.working_types]
    if not types:
        return []
    records = src.store.recent(src.vis, plan.statuses, plan.limits["working"], types)
    return [(r, 1.0) for r in records]


IdHits = list[tuple[str, float]]


def _lexical(plan: Plan, src: Sources, config: RecallConfig) -> IdHits:
    return src.store.lexical(src.vis, plan.query, plan.statuses, plan.limits["lexical"])


class _NoQueryVector(EngramError):
    """The query could not be embedded; ``args[0]`` names the error that prevented it."""


def _vector(plan: Plan, src: Sources, config: RecallConfig) -> IdHits:
    if src.query_vector is None:
        raise _NoQueryVector(src.vector_error or "no query vector")
    return src.store.vector(src.vis, src.query_vector, src.model, plan.statuses,
                            plan.limits["vector"])  # fmt: skip


_RECORD_CHANNELS: dict[str, Callable[[Plan, Sources, RecallConfig], Hits]] = {
    "key": _key,
    "working": _working,
}
# These find ids; their records are fetched by the calling thread (``_finish``), so
# a worker thread does only the search, which is mostly GIL-free.
_ID_CHANNELS: dict[str, Callable[[Plan, Sources, RecallConfig], IdHits]] = {
    "lexical": _lexical,
    "vector": _vector,
}


def _failed(report: ChannelReport, exc: EngramError) -> None:
    """Name the cause in the trace, e.g. IndexMismatch."""
    report.error = str(exc) if isinstance(exc, _NoQueryVector) else type(exc).__name__


def _search(
    name: str, plan: Plan, src: Sources, config: RecallConfig, report: ChannelReport
) -> Hits | IdHits:  # fmt: skip
    start = time.perf_counter()
    found: Hits | IdHits
    try:
        if name in _ID_CHANNELS:
            found = _ID_CHANNELS[name](plan, src, config)
        else:
            found = _RECORD_CHANNELS[name](plan, src, config)
    except EngramError as exc:
        _failed(report, exc)
        found = []
    report.ms += (time.perf_counter() - start) * 1000
    return found


def _finish(
    name: str, found: Hits | IdHits, src: Sources, report: ChannelReport, known: dict[str, Record]
) -> Hits:  # fmt: skip
    """Records for an id channel's hits (visible ones, in order; ``known`` holds the
    records earlier channels fetched, so an id two channels found is read once);
    counts either kind."""
    start = time.perf_counter()
    hits: Hits = []
    try:
        if name in _ID_CHANNELS:
            ids = [(str(i), score) for i, score in found]
            missing = [i for i, _ in ids if i not in known]
            known.update((r.id, r) for r in src.store.fetch(src.vis, missing) if missing)
            hits = [(known[i], score) for i, score in ids if i in known]
        else:
            hits = [(record, score) for record, score in found if isinstance(record, Record)]
            known.update((record.id, record) for record, _ in hits)
    except EngramError as exc:
        _failed(report, exc)
    report.ms += (time.perf_counter() - start) * 1000
    report.count = len(hits)
    return hits


def _run_channels(plan: Plan, src: Sources, config: RecallConfig, trace: Trace) -> dict[str, Hits]:
    """Every channel of the plan. The ``overlapped_channels`` search one after
    another on a worker thread while the others run here: the vector scan is SIMD
    work and SQLite steps release the GIL, and a file store gives each thread its
    own read connection, so the two threads overlap on separate cores (one worker,
    not one per channel: on two cores a third busy thread only slows the other
    two). Records are decoded here, not on the worker (decoding holds the GIL).
    Not inside an open transaction: the worker would not see the transaction's own
    writes (and on a single-connection store it would wait for the lock the caller
    holds)."""
    reports = {name: ChannelReport(name) for name in plan.limits}
    trace.channels.update(reports)
    overlapped: list[str] = []
    if not src.store.in_transaction and len(plan.limits) > 1:
        overlapped = [name for name in plan.limits if name in config.overlapped_channels]
        overlapped = overlapped if len(overlapped) < len(plan.limits) else overlapped[1:]

    def search_overlapped() -> dict[str, Hits | IdHits]:
        return {name: _search(name, plan, src, config, reports[name]) for name in overlapped}

    pending = _worker().submit(search_overlapped) if overlapped else None
    known: dict[str, Record] = {}
    hits = {name: _finish(name, _search(name, plan, src, config, reports[name]), src,
                          reports[name], known)
            for name in plan.limits if name not in overlapped}  # fmt: skip
    if pending is not None:
        for name, found in pending.result().items():
            hits[name] = _finish(name, found, src, reports[name], known)
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
            cand = found.setdefault(record.id, Candidate(record))
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
    for cand in candidates:
        vector = vectors.get(cand.id)
        if vector is not None:
            cand.vector = vector
            cand.components["semantic_raw"] = float(vector @ src.query_vector)
