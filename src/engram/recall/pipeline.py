"""The read path in order. ``STAGES`` lists the stages; ``run`` executes them, times
each one and records its sizes in the trace, so no stage writes tracing code. A
structured recall (a question about the user's own settings and profile) that keeps
nothing after rerank runs once more over every type, reported as the ``widen`` stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from engram.config import Budget, Config
from engram.embed import Embedder
from engram.embed.deadline import embed_within
from engram.errors import EngramError
from engram.ids import new_id
from engram.recall import budget as budget_stage
from engram.recall.candidates import Sources, gather
from engram.recall.conflicts import clarification, resolve_conflicts
from engram.recall.dedup import dedupe
from engram.recall.eligibility import filter_eligible
from engram.recall.intent import classify
from engram.recall.model import (
    Candidate,
    Conflict,
    Intent,
    Mode,
    Plan,
    RecallItem,
    RecallResult,
    RecallStatus,
)
from engram.recall.plan import make_plan
from engram.recall.render import BlockLength, render
from engram.recall.rerank import rerank
from engram.recall.trace import ChannelReport, StageReport, Trace
from engram.scope import Scope
from engram.store.contract import OutcomeStats, Store
from engram.store.predicate import Visibility
from engram.types import Record, Tier

__all__ = ["STAGES", "Request", "run"]


@dataclass(frozen=True, slots=True)
class Request:
    """One recall call, validated."""

    scope: Scope
    query: str
    intent: str | None
    budget: Budget
    now: datetime
    as_of: datetime | None
    working: Callable[[int], Sequence[Record]] | None = None  # live working items, newest first


@dataclass(slots=True)
class _State:
    request: Request
    store: Store
    embedder: Embedder
    config: Config
    counter: budget_stage.TokenCounter
    trace: Trace
    mode: Mode = Mode.HYBRID
    intent: Intent = Intent.GENERAL
    plan: Plan | None = None
    candidates: list[Candidate] = field(default_factory=list)
    eligible: list[Candidate] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    prompt: str = ""
    tokens: int = 0
    query_vector: tuple[NDArray[np.float32] | None, str | None] | None = None  # embedded once

    @property
    def the_plan(self) -> Plan:
        assert self.plan is not None
        return self.plan


def _intent(s: _State) -> None:
    s.mode, s.intent = classify(s.request.query, s.request.intent)


def _plan(s: _State) -> None:
    r = s.request
    s.plan = make_plan(s.config, r.scope, r.query, s.mode, s.intent, r.now, r.as_of,
                       r.budget.max_items)  # fmt: skip


def _query_vector(s: _State) -> tuple[NDArray[np.float32] | None, str | None]:
    """The query's vector, or the embedder's error; embedded once per recall, so a
    widened pass neither pays a slow model's deadline twice nor gets another answer."""
    if "vector" not in s.the_plan.limits:
        return None, None
    if s.query_vector is None:
        s.query_vector = _embed_query(s)
    return s.query_vector


def _embed_query(s: _State) -> tuple[NDArray[np.float32] | None, str | None]:
    """Embed the query within the recall's deadline. An embedder past it is
    ``EmbeddingTimeout`` (and a store whose vectors are another model's answers the
    probe with ``IndexMismatch``): the other channels still answer."""
    try:
        vectors = embed_within(s.embedder, [s.request.query], s.config.recall.embed_timeout_seconds)
        return vectors[0], None
    except EngramError as exc:
        return None, type(exc).__name__


def _candidates(s: _State) -> None:
    vector, error = _query_vector(s)
    src = Sources(s.store, Visibility.of(s.request.scope), vector, s.embedder.model_id, error,
                  s.request.working)  # fmt: skip
    s.candidates = gather(s.the_plan, src, s.config.recall, s.trace)


def _eligibility(s: _State) -> None:
    s.candidates = filter_eligible(s.candidates, s.the_plan, s.config, s.trace)


def _dedup(s: _State) -> None:
    s.candidates = dedupe(s.candidates, s.config.recall, s.trace)
    s.eligible = list(s.candidates)


def _outcomes(s: _State) -> Mapping[str, OutcomeStats]:
    """Counted outcomes of the procedures among the candidates; a failed read leaves
    them unranked by outcome and is reported as the ``outcomes`` channel's error."""
    ids = [c.id for c in s.candidates if c.record.tier == Tier.PROCEDURAL]
    if not ids:
        return {}
    try:
        return s.store.outcomes(Visibility.of(s.request.scope), ids)
    except EngramError as exc:
        s.trace.channels["outcomes"] = ChannelReport("outcomes", error=type(exc).__name__)
        return {}


def _rerank(s: _State) -> None:
    floor = s.config.recall.floor_for(s.embedder.model_id)
    s.candidates = rerank(s.candidates, s.the_plan, s.config, floor, s.trace, _outcomes(s))


def _conflicts(s: _State) -> None:
    s.candidates, s.conflicts = resolve_conflicts(s.candidates, s.eligible, s.config.recall,
                                                  s.trace)  # fmt: skip


def _budget(s: _State) -> None:
    rendered: dict[str, str] = {}

    def draft(items: list[Candidate]) -> str:
        return render(items, s.config.types, rendered, s.request.budget.layout)

    ranked = s.candidates

    def fresh(items: list[Candidate]) -> str:
        return render(items, s.config.types, None, s.request.budget.layout)

    covered: dict[str, Candidate] = {}
    lengths = BlockLength(s.config.types, s.request.budget.layout, rendered)
    s.candidates, s.tokens = budget_stage.select(ranked, s.config, s.request.budget, draft,
                                                 s.counter, fresh, covered, lengths)  # fmt: skip
    chosen = {c.id for c in s.candidates}
    for cand in ranked:
        if cand.id in covered:
            s.trace.reject("covered_by", cand.id)
            s.trace.merges.append({"kept": covered[cand.id].id, "merged": cand.id,
                                   "by": "derived_from"})  # fmt: skip
        elif cand.id not in chosen:
            s.trace.reject("budget", cand.id)


def _widen(s: _State) -> None:
    """A structured recall that kept nothing searches every type again, still with the
    profile intent: a preference a user stated only in conversation (an episode) is
    still theirs, and ``empty`` must mean that nothing relevant exists. The first
    pass's rejections, merges and channel reports (an ``outcomes`` read that failed
    among them) are dropped; the wider pass judges a superset of its types."""
    s.mode = Mode.HYBRID
    s.trace.rejections.clear()
    s.trace.merges.clear()
    s.trace.channels.clear()
    for stage in _WIDENED:
        stage(s)


def _widens(s: _State) -> bool:
    """Whether the gate's structured plan kept nothing from sources that answered. A
    caller's explicit ``intent="structured"`` wins (``recall.intent``) and is never
    widened; nor is a pass whose every source failed (``unavailable``): its emptiness
    says nothing about the data, and a second pass would only fail the same reads."""
    chosen = s.request.intent == Mode.STRUCTURED.value
    if s.mode != Mode.STRUCTURED or s.candidates or chosen:
        return False
    return not _every_source_failed(s)


def _every_source_failed(s: _State) -> bool:
    """Whether every channel the plan searches reported an error."""
    channels = s.trace.channels
    sources = [channels[name] for name in (s.plan.limits if s.plan else ()) if name in channels]
    return bool(sources) and all(c.error for c in sources)


def _render(s: _State) -> None:
    s.prompt = render(s.candidates, s.config.types, layout=s.request.budget.layout)


STAGES: tuple[tuple[str, Callable[[_State], None]], ...] = (
    ("intent", _intent),
    ("plan", _plan),
    ("candidates", _candidates),
    ("eligibility", _eligibility),
    ("dedup", _dedup),
    ("rerank", _rerank),
    ("conflicts", _conflicts),
    ("budget", _budget),
    ("render", _render),
)
_WIDENED = (_plan, _candidates, _eligibility, _dedup, _rerank)


def _status(s: _State) -> RecallStatus:
    """Unavailable when every source the plan named failed (a stage that only expands
    their results searched nothing of its own); partial when any channel failed."""
    failed = [c for c in s.trace.channels.values() if c.error]
    if _every_source_failed(s):
        return RecallStatus.UNAVAILABLE
    if s.conflicts:
        return RecallStatus.AMBIGUOUS
    if failed:
        return RecallStatus.PARTIAL
    return RecallStatus.OK if s.candidates else RecallStatus.EMPTY


def _finish(s: _State) -> RecallResult:
    status = _status(s)
    items = [RecallItem(c.record, c.score, dict(c.components), _reason(c), tuple(c.merged_from))
             for c in s.candidates]  # fmt: skip
    t = s.trace
    t.mode, t.intent, t.status = s.mode.value, s.intent.value, status.value
    t.as_of = s.request.as_of.isoformat() if s.request.as_of else None
    t.tokens_used, t.token_budget = s.tokens, s.request.budget.max_tokens
    t.selected = [{"id": i.record.id, "score": round(i.score, 4), "reason": i.reason,
                   "components": {k: round(v, 4) for k, v in i.components.items()}}
                  for i in items]  # fmt: skip
    return RecallResult(status, items, s.conflicts, clarification(s.conflicts, s.eligible),
                        s.prompt, t, s.tokens)  # fmt: skip


def _reason(cand: Candidate) -> str:
    c = cand.components
    basis = max(("semantic", "coverage", "structural"), key=lambda k: c.get(k, 0.0))
    found = "+".join(sorted(cand.channels)) or "none"
    reason = f"{cand.record.type} in {cand.record.scope}; relevant by {basis}; found by {found}"
    return f"{reason}; {cand.reason}" if cand.reason else reason


def _timed(state: _State, name: str, stage: Callable[[_State], None]) -> None:
    size_in = len(state.candidates)
    t0 = time.perf_counter()
    stage(state)
    ms = (time.perf_counter() - t0) * 1000
    state.trace.stages.append(StageReport(name, size_in, len(state.candidates), ms))


def run(
    request: Request, store: Store, embedder: Embedder, config: Config,
    counter: budget_stage.TokenCounter,
) -> RecallResult:  # fmt: skip
    """Execute every stage in order and return the result with its trace."""
    state = _State(request, store, embedder, config, counter, Trace(new_id()))
    started = time.perf_counter()
    for name, stage in STAGES:
        _timed(state, name, stage)
        if state.mode == Mode.NONE and name == "plan":
            break
        if name == "rerank" and _widens(state):
            _timed(state, "widen", _widen)  # reported as a stage of its own
    state.trace.total_ms = (time.perf_counter() - started) * 1000
    return _finish(state)
