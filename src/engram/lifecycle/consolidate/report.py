"""What one consolidation did: counts, and the ids behind them (never content)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["ConsolidationReport", "Tally"]


@dataclass(slots=True)
class Tally:
    """Counts kept while a run goes; ``ConsolidationReport`` freezes them."""

    users: int = 0
    episodes: int = 0
    groups: int = 0
    summaries: int = 0
    summaries_confirmed: int = 0
    summaries_rejected: int = 0
    facts_proposed: int = 0
    facts_accepted: int = 0
    merges: int = 0
    outcomes: int = 0
    stale_groups: int = 0
    busy_users: list[str] = field(default_factory=list)
    summary_ids: list[str] = field(default_factory=list)
    merged: list[tuple[str, str]] = field(default_factory=list)
    rejected_reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    """The result of ``Engram.consolidate`` for one tenant (or one of its users).

    ``groups`` counts the episode groups consolidated, each in one transaction;
    ``summaries`` the summary records added (``summaries_confirmed``: the same
    text was already stored; ``summaries_rejected``: the write policy refused it,
    by reason code in ``rejected_reasons``); ``facts_proposed`` what the proposer
    suggested and ``facts_accepted`` what the write policy let through;
    ``merges`` the near-duplicate facts merged, as (kept, merged) id pairs in
    ``merged``; ``outcomes`` the procedure outcomes episodes reported;
    ``stale_groups`` groups skipped because an episode changed while they were
    summarised (they are grouped again next run); ``busy_users`` the users another
    consolidator held, left alone.
    """

    tenant_id: str
    user_id: str | None
    now: datetime
    users: int
    episodes: int
    groups: int
    summaries: int
    summaries_confirmed: int
    summaries_rejected: int
    facts_proposed: int
    facts_accepted: int
    merges: int
    outcomes: int
    stale_groups: int
    busy_users: tuple[str, ...]
    summary_ids: tuple[str, ...]
    merged: tuple[tuple[str, str], ...]
    rejected_reasons: dict[str, int]

    @classmethod
    def of(
        cls, tenant_id: str, user_id: str | None, now: datetime, tally: Tally
    ) -> ConsolidationReport:
        """Freeze a run's tally."""
        lists = ("busy_users", "summary_ids", "merged", "rejected_reasons")
        counts = {k: v for k, v in asdict(tally).items() if k not in lists}
        return cls(tenant_id, user_id, now, busy_users=tuple(tally.busy_users),
                   summary_ids=tuple(tally.summary_ids),
                   merged=tuple(tuple(p) for p in tally.merged),  # type: ignore[misc]
                   rejected_reasons=dict(tally.rejected_reasons), **counts)  # fmt: skip

    @property
    def changed(self) -> bool:
        """Whether the run wrote anything (a rerun with the same clock writes nothing)."""
        return bool(self.groups or self.merges)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: the counts, ids and the run's ``now`` as ISO 8601."""
        out = asdict(self)
        out["now"] = self.now.isoformat()
        out["busy_users"] = list(self.busy_users)
        out["summary_ids"] = list(self.summary_ids)
        out["merged"] = [list(pair) for pair in self.merged]
        return out
