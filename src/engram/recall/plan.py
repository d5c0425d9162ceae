"""Stage 2: the plan. Types, statuses, time and per-channel limits for one request.

Every limit comes from ``RecallConfig`` by name; nothing here is a literal
threshold. Superseded and expired versions are candidates too, because validity, not
status, says what holds at a time: a version superseded by a future-dated
change stays valid until that change starts, and a past ``as_of`` needs the
version that was valid then. Eligibility checks the interval. Retracted and
disputed versions never qualify.
"""

from __future__ import annotations

from datetime import datetime

from engram.config import Config
from engram.recall.model import Intent, Mode, Plan
from engram.scope import Scope
from engram.types import Status, Tier

__all__ = ["CHANNELS", "make_plan"]

CHANNELS: dict[Mode, tuple[str, ...]] = {
    Mode.NONE: (),
    Mode.STRUCTURED: ("key", "working", "lexical", "vector"),
    Mode.EPISODIC: ("working", "lexical", "vector"),
    Mode.HYBRID: ("key", "working", "lexical", "vector"),
}
_STATUSES = (Status.ACTIVE.value, Status.SUPERSEDED.value, Status.EXPIRED.value)


def _types(config: Config, mode: Mode) -> tuple[str, ...]:
    if mode == Mode.STRUCTURED:
        tiers = {Tier.SEMANTIC, Tier.WORKING, Tier.PROCEDURAL}
        return tuple(name for name, p in config.types.items() if p.tier in tiers)
    return tuple(config.types)


def make_plan(
    config: Config, scope: Scope, query: str, mode: Mode, intent: Intent,
    now: datetime, as_of: datetime | None, max_items: int,
) -> Plan:  # fmt: skip
    """Build the plan for one recall.

    The key, lexical and vector channels fetch ``candidates_per_item`` per item
    the budget allows (at least ``min_channel_limit``, at most their configured
    limits): a 6-item recall needs fewer candidates than a 25-item one. So does
    the context channel: ``context_seeds_per_item`` seeds per item, at most
    ``context_seeds``.
    """
    when = now if as_of is None else as_of
    time_travel = as_of is not None and as_of < now
    rc = config.recall
    wanted = max(rc.min_channel_limit, rc.candidates_per_item * max_items)
    limits = {
        "key": min(rc.key_limit, wanted),
        "working": rc.working_limit,
        "lexical": min(rc.lexical_limit, wanted),
        "vector": min(rc.vector_limit, wanted),
    }
    return Plan(
        mode=mode,
        intent=intent,
        scope=scope,
        query=query,
        types=_types(config, mode),
        statuses=_STATUSES,
        now=now,
        as_of=when,
        time_travel=time_travel,
        limits={name: limits[name] for name in CHANNELS[mode]},
        context_seeds=min(rc.context_seeds, rc.context_seeds_per_item * max_items),
    )
