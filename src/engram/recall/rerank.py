"""Stage 6: rerank. A weighted sum of named components, then an absolute relevance floor.

Components, each in 0..1 and kept on the item for the trace:

* ``semantic``: cosine between the query and the memory (stored vector);
* ``lexical``: BM25 relative to the best BM25 among this request's candidates.
  A candidate the lexical channel did not return (another channel found it) scores
  0 when it holds none of the query's content words; when it holds some and the
  channel stopped at its limit, its BM25 lies between 0 and the channel's weakest
  hit, and it gets ``unseen_lexical_share`` of that hit (the middle of the range,
  by default) rather than 0, which would rank a paraphrase that dense retrieval
  found below every lexical hit;
* ``task_fit``: how well the memory's type fits the request's intent;
* ``scope``: specificity, task > session > repo > project > user > global;
* ``authority``, ``confidence``;
* ``freshness``: exponential decay with the type's half-life, from the later of
  ``observed_at`` and ``valid_from`` (no decay for types without a half-life);
* ``usage``: saturating count of past selections;
* ``context``: relevance of conversational neighbours (see ``context``);
* ``structural``: a hard constraint or rule (for an action) or the task state of
  a scope the request is working in, weighted by that scope's specificity.
* ``session``: the best relevance among the other episodes of the memory's
  conversation session (see ``context``);
* ``speaker``: 1 when the query names the speaker of a conversational memory
  (content that opens with ``Name: ``, matched by ``speaker_pattern``): a question
  about what Melanie said wants her turns, not the turns that only address her;
* ``period``: 1 when the memory was observed in the period the query names (a
  date or a month and year, see ``plan``);
* ``outcome``: for a procedure, its success rate smoothed by a Beta prior
  (``RecallConfig.outcome_prior``) over the outcomes counted for it
  (``Engram.record_outcome``, consolidation); the score adds its weight times the
  rate's distance from the prior's mean, so a procedure without outcomes scores
  as before, a reliable one rises and a failing one sinks;
* ``standing``: 1 for a conversational memory that states a standing instruction
  or preference (``standing_pattern``: "Always use APA style when I ask about
  references", "I prefer e-books"): it governs later requests on its subject,
  which rarely repeat its words ("How should I list my sources?"), so similarity
  alone ranks it below the turns that discuss the subject.

The floor applies to *relevance*, absolute evidence that the memory bears on
this request: the cosine, the share of the query's content words the memory
contains (``coverage``), or structural relevance. Relative BM25 orders
candidates but never lets one through the floor. Weights only order what passes
it; structural evidence is weighed too, so a repository constraint that governs
the action outranks a merely similar episode (seed 000: scope beats similarity).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from engram.config import Config, RecallConfig
from engram.recall.context import add_context
from engram.recall.model import Candidate, Intent, Plan
from engram.recall.trace import Trace
from engram.scope import scope_kind
from engram.store.contract import OutcomeStats
from engram.store.lexical import terms
from engram.store.lexicon import query_terms, stem_set
from engram.types import Record, Tier

__all__ = ["forget_cached_texts", "rerank"]

_NARROW = frozenset({"task", "session", "repo", "project"})
_LN2 = math.log(2.0)


@functools.lru_cache(maxsize=16_384)
def _stems(text: str) -> frozenset[str]:
    """Stems of a text's content words; cached, because the same memories come back
    as candidates request after request."""
    return stem_set(text)


@functools.lru_cache(maxsize=16_384)
def _speaker_names(pattern: str, content: str) -> tuple[str, ...]:
    """Content words of the speaker label that opens ``content`` (cached like stems)."""
    label = re.match(pattern, content)
    return tuple(terms(label.group(1))) if label else ()


@functools.lru_cache(maxsize=16_384)
def _states_standing(pattern: str, content: str) -> bool:
    """Whether ``content`` states a standing instruction or preference (cached)."""
    return re.search(pattern, content) is not None


def forget_cached_texts() -> None:
    """Drop the cached stems, speaker names and standing flags of memory texts (after a
    forget or an erasure)."""
    _stems.cache_clear()
    _speaker_names.cache_clear()
    _states_standing.cache_clear()


@dataclass(frozen=True, slots=True)
class _Request:
    """What every candidate's components share, computed once per request."""

    plan: Plan
    config: Config
    query_stems: frozenset[str]
    query_words: frozenset[str]
    best_bm25: float
    unseen_bm25: float
    fits: Mapping[str, float]
    usage_norm: float
    outcomes: Mapping[str, OutcomeStats]
    half_lives: Mapping[str, float | None]  # by type, from the configuration


def _freshness(record: Record, half_life: float | None, now: datetime) -> float:
    if half_life is None:
        return 1.0
    start = record.observed_at
    if record.valid_from is not None and record.valid_from > start:
        start = record.valid_from
    age_days = max(0.0, (now - start).total_seconds() / 86_400)
    return math.exp(-_LN2 * age_days / half_life)


def _structural(
    record: Record, kind: str, plan: Plan, rc: RecallConfig, fit: float, overlap: bool
) -> float:
    """Relevance by role rather than by wording.

    A constraint, rule or task state of a scope the request works in governs the
    action; a standing preference governs an action that touches its subject (it
    shares at least one content word with the request).
    """
    weight = rc.scope_weights.get(kind, 0.0)
    if record.type in rc.preference_types and overlap and plan.intent == Intent.ACTION:
        return fit * weight
    if record.type not in rc.structural_types or kind not in _NARROW:
        return 0.0
    if record.type in rc.working_types:
        return weight
    return fit * weight if plan.intent == Intent.ACTION else 0.0


def _speaker(record: Record, rc: RecallConfig, query_words: frozenset[str]) -> float:
    if record.type not in rc.context_types:
        return 0.0
    names = _speaker_names(rc.speaker_pattern, record.content)
    return 1.0 if names and query_words.issuperset(names) else 0.0


def _standing(record: Record, rc: RecallConfig) -> float:
    if record.type not in rc.context_types:
        return 0.0
    return 1.0 if _states_standing(rc.standing_pattern, record.content) else 0.0


def _in_period(record: Record, plan: Plan) -> float:
    if plan.period is None:
        return 0.0
    return 1.0 if plan.period[0] <= record.observed_at < plan.period[1] else 0.0


def _components(cand: Candidate, req: _Request) -> None:
    """Every component of one candidate, in the order the trace shows them (the
    helpers above, inlined where they run for every candidate)."""
    rc, record, query_stems = req.config.recall, cand.record, req.query_stems
    kind, type_name = scope_kind(record.scope), record.type
    fit = req.fits.get(type_name, 0.5)
    overlap = len(query_stems & _stems(record.content)) if query_stems else 0
    bm25 = cand.channels.get("lexical", req.unseen_bm25 if overlap else 0.0)
    lives = req.half_lives  # an unknown type raises ConfigError from ``policy``
    half_life = (
        lives[type_name] if type_name in lives else req.config.policy(type_name).half_life_days
    )
    conversational = type_name in rc.context_types
    c = cand.components
    c["semantic"] = max(0.0, c.get("semantic_raw", 0.0))
    c["lexical"] = bm25 / req.best_bm25 if req.best_bm25 > 0 else 0.0
    c["coverage"] = overlap / len(query_stems) if query_stems else 0.0
    c["task_fit"] = fit
    c["scope"] = rc.scope_weights.get(kind, 0.0)
    c["authority"] = rc.authority_weights.get(record.authority, 0.0)
    c["freshness"] = 1.0 if half_life is None else _freshness(record, half_life, req.plan.now)
    c["confidence"] = record.confidence
    counted = req.config.recall.weights.usage > 0  # a part shown only when it counts
    c["usage"] = min(1.0, math.log1p(record.access_count) / req.usage_norm) if counted else 0.0
    c["structural"] = _structural(record, kind, req.plan, rc, fit, overlap > 0)
    c["speaker"] = _speaker(record, rc, req.query_words) if conversational else 0.0
    c["period"] = 0.0 if req.plan.period is None else _in_period(record, req.plan)
    c["standing"] = _standing(record, rc) if conversational else 0.0
    if record.tier == Tier.PROCEDURAL:
        stats = req.outcomes.get(record.id) or OutcomeStats()
        c["outcome"] = stats.success_rate(*rc.outcome_prior)


def _outcome_lift(cand: Candidate, rc: RecallConfig) -> float:
    """The outcome component's distance from the prior's mean (0 for non-procedures)."""
    rate = cand.components.get("outcome")
    if rate is None:
        return 0.0
    wins, losses = rc.outcome_prior
    return rate - wins / (wins + losses)


def _score(cand: Candidate, rc: RecallConfig) -> float:
    w, c = rc.weights, cand.components
    return (w.semantic * c["semantic"] + w.lexical * c["lexical"] + w.task_fit * c["task_fit"]
            + w.scope * c["scope"] + w.authority * c["authority"] + w.freshness * c["freshness"]
            + w.confidence * c["confidence"] + w.usage * c["usage"]
            + w.structural * c["structural"] + w.context * c["context"]
            + w.session * c["session"] + w.speaker * c["speaker"]
            + w.period * c["period"] + w.standing * c["standing"]
            + w.outcome * _outcome_lift(cand, rc))  # fmt: skip


def _unseen_bm25(candidates: list[Candidate], plan: Plan, rc: RecallConfig, trace: Trace) -> float:
    """The BM25 credited to a candidate that holds a query word but that the lexical
    channel did not return: a share of the weakest hit when the channel was cut at
    its limit (below it, every memory holding a query word was returned), else 0."""
    report, limit = trace.channels.get("lexical"), plan.limits.get("lexical", 0)
    hits = [c.channels["lexical"] for c in candidates if "lexical" in c.channels]
    if report is None or report.error or not hits or report.count < limit:
        return 0.0
    return rc.unseen_lexical_share * min(hits)


def rerank(
    candidates: list[Candidate], plan: Plan, config: Config, floor: float, trace: Trace,
    outcomes: Mapping[str, OutcomeStats] | None = None,
) -> list[Candidate]:  # fmt: skip
    """Score every candidate, drop those below the relevance floor, best first.
    ``outcomes`` are the counted outcomes of the procedures among them."""
    rc = config.recall
    req = _Request(
        plan=plan, config=config, query_stems=frozenset(query_terms(plan.query)),
        query_words=frozenset(terms(plan.query)),
        best_bm25=max((c.channels.get("lexical", 0.0) for c in candidates), default=0.0),
        unseen_bm25=_unseen_bm25(candidates, plan, rc, trace),
        fits=rc.task_fit.get(plan.intent.value, {}),
        usage_norm=math.log1p(rc.usage_saturation), outcomes=outcomes or {},
        half_lives={name: policy.half_life_days for name, policy in config.types.items()},
    )  # fmt: skip
    for cand in candidates:
        _components(cand, req)
    add_context(candidates, config.recall)
    kept = []
    for cand in candidates:
        c = cand.components
        cand.relevance = max(c["semantic"], c["coverage"], c["structural"], c["context_relevance"])
        cand.score = _score(cand, config.recall)
        if cand.relevance >= floor:
            kept.append(cand)
        else:
            trace.reject("below_relevance_floor", cand.id)
    return sorted(kept, key=lambda c: (-c.score, c.id))
