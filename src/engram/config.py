"""Frozen configuration: per-type policies, write policy, recall weights, presets.

Every tunable number lives here under a name, never as a literal in a stage.
A ``Config`` is immutable; ``Config.with_changes`` returns a modified copy and
``Config.preset(name)`` returns one of the named presets.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from engram.errors import ConfigError
from engram.lifecycle.consolidate_config import ConsolidationConfig
from engram.lifecycle.sweep_config import SweepConfig
from engram.limits import shown
from engram.store.config import PostgresConfig, SQLiteConfig, StoreConfig
from engram.types import Retention, SourceKind, Tier
from engram.working.config import WorkingConfig

__all__ = [
    "RETENTION_PERIODS",
    "Budget",
    "Config",
    "ConsolidationConfig",
    "PostgresConfig",
    "RecallConfig",
    "SQLiteConfig",
    "ScoreWeights",
    "StoreConfig",
    "SweepConfig",
    "TypePolicy",
    "WorkingConfig",
    "WritePolicy",
    "default_types",
]

RETENTION_PERIODS: Mapping[Retention, timedelta | None] = MappingProxyType(
    {
        Retention.TRANSIENT: timedelta(hours=1),
        Retention.SESSION: timedelta(hours=24),
        Retention.SHORT_TERM: timedelta(days=7),
        Retention.MEDIUM_TERM: timedelta(days=90),
        Retention.LONG_TERM: timedelta(days=365),
        Retention.PERMANENT: None,
    }
)


@dataclass(frozen=True, slots=True)
class TypePolicy:
    """How one memory type behaves: its tier, decay, floor, retention and prompt section.

    ``half_life_days`` of ``None`` means the type does not decay with age (stable
    facts such as a timezone). ``quota`` shapes how many items of this type one
    recall selects while other types compete (work-conserving: see the budget
    stage). ``retention`` is how long a memory of the type is kept, counted from
    its last write, confirmation or recall; ``stated_retention``, when set,
    replaces it for what the user or an admin stated (``explicit_*`` authority).
    """

    tier: Tier
    half_life_days: float | None
    confidence_floor: float
    retention: Retention
    section: str
    quota: int = 3
    stated_retention: Retention | None = None

    def retention_for(self, authority: str) -> Retention:
        """The default retention of a memory of this type with ``authority``: what
        the user (or an admin) stated keeps ``stated_retention`` when one is set."""
        stated = authority in ("explicit_user", "explicit_admin")
        return self.stated_retention if stated and self.stated_retention else self.retention


def default_types() -> Mapping[str, TypePolicy]:
    """The built-in type set (docs/contract.md section 2); configuration may replace it."""
    sem, epi, proc, work = Tier.SEMANTIC, Tier.EPISODIC, Tier.PROCEDURAL, Tier.WORKING
    long, perm = Retention.LONG_TERM, Retention.PERMANENT
    return MappingProxyType(
        {
            "constraint": TypePolicy(sem, None, 0.5, perm, "constraints", 4),
            "rule": TypePolicy(sem, None, 0.5, perm, "constraints", 4),
            "preference": TypePolicy(sem, 365.0, 0.5, long, "preferences", 3, perm),
            "profile": TypePolicy(sem, None, 0.5, long, "preferences", 3, perm),
            "decision": TypePolicy(sem, 180.0, 0.5, long, "decisions", 3),
            "fact": TypePolicy(sem, 365.0, 0.4, long, "preferences", 4),
            "episode": TypePolicy(epi, 60.0, 0.3, long, "episodes", 3),
            "incident": TypePolicy(epi, 45.0, 0.3, long, "episodes", 2),
            "summary": TypePolicy(epi, 90.0, 0.3, long, "episodes", 2),
            "procedure": TypePolicy(proc, 120.0, 0.4, perm, "procedures", 2),
            "task_state": TypePolicy(work, 2.0, 0.0, Retention.SESSION, "task_state", 3),
        }
    )


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """Limits and rules the write path enforces before anything is stored."""

    max_content_bytes: int = 8192
    conflict_threshold: float = 0.8
    untrusted_sources: frozenset[SourceKind] = frozenset(
        {SourceKind.DOCUMENT, SourceKind.TOOL, SourceKind.SHARE}
    )
    reject_secrets: bool = True
    personal_data_needs_consent: bool = True
    reject_transient_chatter: bool = True
    batch_items: int = 500
    embed_timeout_seconds: float | None = 60.0

    def __post_init__(self) -> None:
        """``batch_items`` is how many items of a bulk write one transaction takes;
        ``embed_timeout_seconds`` how long one write waits for the embedder's vectors
        of one chunk (past it: ``EmbeddingTimeout``, nothing of the chunk stored; None:
        no deadline but the embedder's own)."""
        if isinstance(self.batch_items, bool) or not isinstance(self.batch_items, int):
            raise ConfigError("write.batch_items must be an integer")
        if not 1 <= self.batch_items <= 100_000:
            raise ConfigError(f"write.batch_items must be in [1, 100000], got {self.batch_items}")
        check_timeout("write.embed_timeout_seconds", self.embed_timeout_seconds)


def check_timeout(name: str, seconds: float | None) -> None:
    """Refuse a deadline that is not None or a number of seconds in (0, 3600]."""
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not 0 < seconds <= 3600:  # fmt: skip
        raise ConfigError(f"{name} must be None or a number of seconds in (0, 3600]")


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """Weights of the rerank components (docs/contract.md section 4); they need not sum to 1.

    ``structural`` rewards a hard constraint, rule or task state of a scope the
    request works in (repo, project, task, session): scope beats similarity when
    a memory directly constrains the current action (seed 000).
    ``session`` gives an episode the best relevance among the other episodes of
    its conversation session; ``speaker`` rewards a conversational memory whose
    speaker the query names; ``period`` one observed in the period the query names;
    ``standing`` a conversational memory that states a standing instruction or
    preference (``RecallConfig.standing_pattern``: "Always cite sources when I ask
    about ...", "I prefer e-books ..."), because such a statement governs every
    later request on its subject while sharing few words with it.
    ``outcome`` weighs a procedure's smoothed success rate against the prior's mean
    (``RecallConfig.outcome_prior``): a procedure without outcomes scores as if it
    had none, each success lifts it and each failure lowers it.
    ``usage`` (how often recall selected a memory before) is off by default: a
    selection is exposure, not evidence of use, so ranking on it feeds back on itself
    (BEAM R@10 59.1 with 0.01 against 61.0 without, counters flushed after every
    question; docs/evaluation.md). The counters still drive decay (``SweepConfig``).
    """

    semantic: float = 0.40
    lexical: float = 0.17
    task_fit: float = 0.12
    scope: float = 0.12
    authority: float = 0.10
    freshness: float = 0.02
    confidence: float = 0.05
    usage: float = 0.0
    context: float = 0.26
    structural: float = 0.20
    session: float = 0.05
    speaker: float = 0.10
    period: float = 0.20
    standing: float = 0.125
    outcome: float = 0.20


@dataclass(frozen=True, slots=True)
class Budget:
    """How much memory one recall may put in a prompt."""

    max_items: int = 6
    max_tokens: int = 700
    per_type: Mapping[str, int] | None = None
    layout: str = "full"  # "full": sections and attributes; "compact": one line an item


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


_SCOPE_WEIGHTS = {"task": 1.0, "session": 0.95, "repo": 0.9, "project": 0.8, "user": 0.6,
                  "global": 0.5}  # fmt: skip
_AUTHORITY_WEIGHTS = {
    "explicit_user": 1.0, "explicit_admin": 1.0, "confirmed_system": 0.95,
    "tool_observation": 0.75, "shared": 0.6, "derived_summary": 0.55, "model_inference": 0.45,
}  # fmt: skip
# How well a memory type fits a kind of request (intent -> type -> fit in 0..1).
_TASK_FIT = {
    "action": {"constraint": 1.0, "rule": 1.0, "task_state": 1.0, "procedure": 0.9,
               "decision": 0.8, "incident": 0.7, "preference": 0.6, "profile": 0.4,
               "fact": 0.5, "episode": 0.4, "summary": 0.4},
    "past": {"episode": 1.0, "incident": 1.0, "summary": 0.9, "decision": 0.8, "fact": 0.7,
             "task_state": 0.5, "procedure": 0.5, "preference": 0.5, "profile": 0.5,
             "constraint": 0.4, "rule": 0.4},
    "profile": {"profile": 1.0, "preference": 1.0, "fact": 0.8, "constraint": 0.6,
                "rule": 0.6, "decision": 0.5, "episode": 0.4, "summary": 0.4,
                "incident": 0.3, "procedure": 0.3, "task_state": 0.3},
    "general": {"fact": 0.8, "preference": 0.7, "profile": 0.7, "constraint": 0.7,
                "rule": 0.7, "decision": 0.7, "episode": 0.7, "summary": 0.7,
                "incident": 0.7, "procedure": 0.7, "task_state": 0.7},
}  # fmt: skip
# Relevance floors are per embedding model: similarity scales differ between models.
# multilingual-e5 compresses cosines: unrelated texts ~0.75-0.80, paraphrases >= 0.87
# on benchmarks/multilingual.py.
_FLOORS = {"hashing": 0.18, "all-MiniLM-L6-v2": 0.30, "multilingual-e5": 0.82}


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """Named limits, weights and thresholds of the read path.

    ``relevance_floor`` applies to an item's relevance (the best of semantic,
    lexical and structural evidence) before top-k; ``floors`` overrides it for
    embedding models whose model id starts with a given prefix.
    Which channels' bulk phases overlap the others is a store setting
    (``SQLiteConfig.overlapped_probes``): the store answers them all in one call.
    ``speaker_pattern`` finds the speaker label that opens a conversational memory
    ("Melanie: ..."); ``period_slack_days`` widens a period the query names (a
    date, or a month and year) on each side.
    ``unseen_lexical_share``: a candidate that another channel found, that holds
    some of the query's content words, but that the lexical channel (cut at its
    limit) did not return, scored below that channel's weakest hit; its BM25 is
    taken as this share of that hit's (0.5: the middle of the range it lies in;
    0: no lexical evidence, as before).
    ``standing_pattern`` finds a standing instruction or preference stated in a
    conversational memory (a sentence opening with "always" or "never", "from now
    on", "I prefer", "my preference"); such a memory gains the ``standing`` weight
    (it orders candidates, it never lets one through the floor).
    ``trace_retention`` is how many recall traces each tenant keeps in storage (the
    newest; one tenant's traffic never evicts another's); ``usage_flush_seconds``
    how long traces and access counts are batched in memory before being written.
    ``outcome_prior`` is the (successes, failures) of the Beta prior that smooths a
    procedure's success rate (``Engram.record_outcome``): (1, 1), a uniform prior,
    reads a procedure with one success as 2/3, not 1.
    ``embed_timeout_seconds`` bounds the wait for the query's vector: past it the
    vector channel reports ``EmbeddingTimeout`` and the recall answers ``partial``
    from its other channels (None: no deadline but the embedder's own).
    """

    key_limit: int = 50
    candidates_per_item: int = 4
    min_channel_limit: int = 24
    lexical_limit: int = 60
    vector_limit: int = 60
    working_limit: int = 20
    rrf_k: int = 60
    unseen_lexical_share: float = 0.5
    relevance_floor: float = 0.30
    floors: Mapping[str, float] = field(default_factory=lambda: _frozen(_FLOORS))
    near_duplicate_cosine: float = 0.95
    ambiguity_confidence: float = 0.8
    mmr_lambda: float = 0.9
    usage_saturation: int = 20
    weights: ScoreWeights = field(default_factory=ScoreWeights)
    scope_weights: Mapping[str, float] = field(default_factory=lambda: _frozen(_SCOPE_WEIGHTS))
    authority_weights: Mapping[str, float] = field(
        default_factory=lambda: _frozen(_AUTHORITY_WEIGHTS)
    )
    task_fit: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: _frozen({k: _frozen(v) for k, v in _TASK_FIT.items()})
    )
    structural_types: frozenset[str] = frozenset({"constraint", "rule", "task_state"})
    preference_types: frozenset[str] = frozenset({"preference", "profile"})
    context_types: frozenset[str] = frozenset({"episode", "incident", "summary"})
    context_seeds: int = 20
    context_seeds_per_item: int = 2
    context_window: int = 2
    context_max_gap_seconds: float = 3600.0
    context_factor: float = 0.8
    speaker_pattern: str = r"([^\W\d_][\w.' -]{0,39}?): "
    period_slack_days: float = 1.0
    standing_pattern: str = (
        r"(?i)(?:^|[.!?]\s+)(?:please\s+)?(?:always|never)\b|\bfrom now on\b"
        r"|\bI(?:'d| would| \w+)? prefer\b|\bmy preferences?\b"
    )
    working_types: frozenset[str] = frozenset({"task_state"})
    budget: Budget = field(default_factory=Budget)
    trace_retention: int = 1000
    usage_flush_seconds: float = 1.0
    outcome_prior: tuple[float, float] = (1.0, 1.0)
    embed_timeout_seconds: float | None = 10.0

    def __post_init__(self) -> None:
        """Reject values that would fail later, mid-recall or in the background (a
        division by zero, a NaN that compares false, a flush thread that dies)."""
        check_timeout("recall.embed_timeout_seconds", self.embed_timeout_seconds)
        counts = ("key_limit", "candidates_per_item", "min_channel_limit", "lexical_limit",
                  "vector_limit", "working_limit", "rrf_k", "context_seeds",
                  "context_seeds_per_item", "context_window", "trace_retention")  # fmt: skip
        for name in counts:
            if getattr(self, name) < 0:
                raise ConfigError(f"recall.{name} must be >= 0, got {getattr(self, name)}")
        if not self.usage_saturation >= 1:
            raise ConfigError(f"recall.usage_saturation must be >= 1, got {self.usage_saturation}")
        bounded = (
            ("mmr_lambda", 0.0, 1.0),
            ("near_duplicate_cosine", -1.0, 1.0),
            ("unseen_lexical_share", 0.0, 1.0),
        )
        for name, low, high in bounded:
            if not low <= getattr(self, name) <= high:  # NaN fails too
                raise ConfigError(f"recall.{name} must be in [{low}, {high}]")
        if not 0 < self.usage_flush_seconds <= 86_400:
            raise ConfigError("recall.usage_flush_seconds must be in (0, 86400]")
        if not 0 <= self.context_max_gap_seconds < math.inf:
            raise ConfigError("recall.context_max_gap_seconds must be finite and >= 0")
        if len(self.outcome_prior) != 2 or not all(0 < p < math.inf for p in self.outcome_prior):
            raise ConfigError("recall.outcome_prior must be two finite numbers > 0")
        try:
            re.compile(self.standing_pattern)
        except re.error as exc:
            raise ConfigError(f"recall.standing_pattern does not compile: {exc}") from exc

    def floor_for(self, model_id: str) -> float:
        """The relevance floor for vectors of ``model_id``."""
        for prefix, floor in self.floors.items():
            if model_id.startswith(prefix):
                return floor
        return self.relevance_floor


@dataclass(frozen=True, slots=True)
class Config:
    """Everything tunable about one Engram instance."""

    types: Mapping[str, TypePolicy] = field(default_factory=default_types)
    write: WritePolicy = field(default_factory=WritePolicy)
    recall: RecallConfig = field(default_factory=RecallConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    default_type: str = "fact"
    working: WorkingConfig = field(default_factory=WorkingConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    consolidation: ConsolidationConfig = field(default_factory=ConsolidationConfig)

    def __post_init__(self) -> None:
        if not self.types:
            raise ConfigError("config.types must define at least one memory type")
        if self.default_type not in self.types:
            raise ConfigError(f"default_type {self.default_type!r} is not in config.types")
        named = (self.consolidation.summary_type, *self.consolidation.episode_types)
        unknown = [name for name in named if name not in self.types]
        if unknown:
            raise ConfigError(f"consolidation names unknown memory types: {unknown}")
        object.__setattr__(self, "types", MappingProxyType(dict(self.types)))

    def policy(self, type_name: str) -> TypePolicy:
        """The policy of ``type_name``; raises ConfigError for an unknown type."""
        try:
            return self.types[type_name]
        except KeyError:
            known = ", ".join(sorted(self.types))
            raise ConfigError(f"unknown memory type {shown(type_name)}; known: {known}") from None

    def with_changes(self, **changes: Any) -> Config:
        """A copy with top-level fields replaced."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def preset(cls, name: str) -> Config:
        """One of the named presets: ``default``, ``strict``, ``assistant``."""
        try:
            return _PRESETS[name]()
        except KeyError:
            raise ConfigError(f"unknown preset {name!r}; known: {sorted(_PRESETS)}") from None


def _strict() -> Config:
    """Higher floors and a smaller content limit, for high-stakes agents."""
    return Config(
        write=WritePolicy(max_content_bytes=4096, conflict_threshold=0.9),
        recall=RecallConfig(relevance_floor=0.4),
    )


def _assistant() -> Config:
    """A personal assistant: episodes decay slower, more items per recall."""
    types = dict(default_types())
    types["episode"] = dataclasses.replace(types["episode"], half_life_days=180.0, quota=4)
    return Config(types=types, recall=RecallConfig(budget=Budget(max_items=10, max_tokens=1200)))


_PRESETS = {"default": Config, "strict": _strict, "assistant": _assistant}
