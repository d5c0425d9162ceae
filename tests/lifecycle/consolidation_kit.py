"""What the consolidation tests share: episodes to write, the clock, store snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from tests.conftest import T0

from backends import table_rows
from engram import Context, Engram, EngramError, Record
from engram.lifecycle.consolidate import ExtractiveSummariser
from engram.store.predicate import Subject

__all__ = [
    "LATER", "SESSIONS", "FailingSummariser", "snapshot", "summaries", "write_episodes",
    "write_sessions",
]  # fmt: skip

LATER = T0 + timedelta(days=8)  # every episode written around T0 is old enough
SESSIONS = (
    ("We decided to move the billing service to Postgres 16.",
     "The first migration failed with a lock timeout on the invoices table.",
     "Adding an index fixed it and the migration passed on staging."),
    ("I prefer short commit messages in the imperative mood.",
     "We agreed to squash merge every pull request.",
     "The release checklist now includes a changelog entry."),
    ("The nightly backup job crashed with an out of memory error.",
     "We raised the memory limit to 2 GiB and the backup succeeded.",
     "Backups are kept for 30 days in the eu-west bucket."),
    ("Let's plan the Kubernetes upgrade for Friday 17 May.",
     "The staging cluster upgrade completed without errors.",
     "Production nodes drain one at a time during the upgrade."),
)  # fmt: skip


def write_episodes(mem: Engram, ctx: Context, texts: Sequence[str], start: datetime,
                   step: timedelta = timedelta(minutes=1), **fields: Any) -> list[str]:  # fmt: skip
    """Write ``texts`` as episodes observed ``step`` apart from ``start``; their ids."""
    ids = []
    for i, text in enumerate(texts):
        written = mem.remember(ctx, text, type="episode", now=start + i * step, **fields)
        assert written.record is not None, written.reason
        ids.append(written.record.id)
    return ids


def write_sessions(mem: Engram, ctx: Context, sessions: Sequence[Sequence[str]] = SESSIONS,
                   start: datetime = T0) -> list[list[str]]:  # fmt: skip
    """Each session's episodes, the sessions three hours apart (longer than the gap)."""
    return [write_episodes(mem, ctx, texts, start + timedelta(hours=3 * n))
            for n, texts in enumerate(sessions)]  # fmt: skip


def summaries(mem: Engram, ctx: Context) -> list[Record]:
    """The summaries ``ctx`` sees, oldest observed first."""
    found = mem.list(ctx, type="summary", status=None, limit=1000)
    return sorted(found, key=lambda r: (r.observed_at, r.id))


def snapshot(mem: Engram, tenant: str = "acme", user: str = "u1") -> dict[str, Any]:
    """Everything a consolidation may change: every record, the audit entries, the
    outcome statistics and the consolidation marks (not the lease row)."""
    return {
        "records": sorted(
            (r["id"], r["status"], r["updated_at"], r["confidence"])
            for r in table_rows(mem.store, "records")
        ),
        "audit": len(mem.store.audit_entries(Subject(tenant, user))),
        "stats": sorted(map(str, table_rows(mem.store, "procedure_stats"))),
        "marks": sorted(map(str, table_rows(mem.store, "consolidated"))),
    }


class FailingSummariser(ExtractiveSummariser):
    """The default summariser that raises on its ``fail_at``-th group (1-based)."""

    def __init__(self, fail_at: int) -> None:
        self.calls = 0
        self.fail_at = fail_at

    def summarise(self, episodes: Sequence[Record], limit: int) -> str:
        """Raise on the ``fail_at``-th call, else summarise."""
        self.calls += 1
        if self.calls == self.fail_at:
            raise EngramError("the summariser stopped (test)")
        return super().summarise(episodes, limit)
