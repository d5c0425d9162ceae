"""Stage 2: the plan. Types, statuses, time and per-channel limits for one request.

Every limit comes from ``RecallConfig`` by name; nothing here is a literal
threshold. Superseded and expired versions are candidates too, because validity, not
status, says what holds at a time: a version superseded by a future-dated
change stays valid until that change starts, and a past ``as_of`` needs the
version that was valid then. Eligibility checks the interval. Retracted and
disputed versions never qualify.

The plan also reads the period a query names ("on 7 July, 2023", "October 13th
2023", "in May 2023"), widened by ``period_slack_days``; the rerank stage favours
memories observed in it. It does not filter: the question may name a date the
memory itself only describes.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

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
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")  # fmt: skip
_MONTH = "(" + "|".join(_MONTHS) + ")"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = (  # (pattern, group of day, group of month, group of year)
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), 1, 2, 3),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+(\d{{4}})\b", re.I), 2, 1, 3),
    (re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I), 0, 1, 2),
)
_STATUSES = (Status.ACTIVE.value, Status.SUPERSEDED.value, Status.EXPIRED.value)


def _types(config: Config, mode: Mode) -> tuple[str, ...]:
    if mode == Mode.STRUCTURED:
        tiers = {Tier.SEMANTIC, Tier.WORKING, Tier.PROCEDURAL}
        return tuple(name for name, p in config.types.items() if p.tier in tiers)
    return tuple(config.types)


def _period(query: str, now: datetime, slack_days: float) -> tuple[datetime, datetime] | None:
    """The time a query names, widened by ``slack_days`` on each side; None when it
    names none. A full date ("7 July 2023", "July 7th, 2023") is preferred to a
    month and year ("in May 2023"); an impossible date ("31 February 2023") falls
    back to its month, and one at the edge of the calendar to nothing."""
    for pattern, day, month, year in _DATES:
        found = pattern.search(query)
        if found is None:
            continue
        m, y = _MONTHS.index(found.group(month).lower()) + 1, int(found.group(year))
        slack = timedelta(days=slack_days)
        try:
            if day:
                start = datetime(y, m, int(found.group(day)), tzinfo=now.tzinfo)
                end = start + timedelta(days=1)
            else:
                start = datetime(y, m, 1, tzinfo=now.tzinfo)
                end = datetime(y + m // 12, m % 12 + 1, 1, tzinfo=now.tzinfo)
            return start - slack, end + slack
        except (ValueError, OverflowError):  # 31 February; the years 1 and 9999
            continue
    return None


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
        period=_period(query, now, rc.period_slack_days),
    )
