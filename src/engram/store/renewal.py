"""How an access renews a record's retention, as SQL both stores run.

A recall that selects a record restarts its retention period (retention counts
from the last write, confirmation or access; it is never shortened). An access
moves ``expires_at`` only when that gains more than a hundredth of the period
(36 s of an hour, 3.65 days of a year): recalls close together renew once.

Why coalesce. ``expires_at`` is indexed (the sweep finds due records by it), so
on PostgreSQL an update that changes it cannot be a heap-only (HOT) update: the
new row version gets an entry in every index of ``records``, the HNSW graph of
its vector and the GIN index of its text included. Usage flushes touch a few
records per recall, and those re-insertions made a flush of 40 recalls take
about 225 ms at 2,000 records (``docs/evaluation.md``, "Usage flushes on
PostgreSQL"), holding the tenant's writer lock, so a ``remember`` behind it
waited as long. Confirmations (a write) keep
the exact renewal of ``commit.renewed_expiry``.

A flush renews each record once per visibility that recalled it, from the
latest of those accesses (``store.accesses``). Renewing at every access in turn
gives an expiry in the same window, from the latest access + period less the
step to the latest access + period (or the old expiry, if later), so the two
differ by less than the step, and only where an access fell within the step of
one that renewed.
"""

from __future__ import annotations

from engram.config import RETENTION_PERIODS
from engram.store.dialect import Dialect

__all__ = ["ACCESS_RENEWAL_STEP", "access_renewal"]

ACCESS_RENEWAL_STEP = 100  # an access renews when it gains more than period / this


def _per_retention(column: str, micros: dict[str, int]) -> str:
    arms = " ".join(f"WHEN '{name}' THEN {value}" for name, value in micros.items())
    return f"CASE {column} {arms} ELSE 0 END"


def access_renewal(dialect: Dialect, alias: str = "", at: str | None = None) -> str:
    """The new ``expires_at`` of a record accessed at ``at`` (an SQL expression in
    microseconds; None: the parameter ``now``), in ``dialect`` (``alias``: the
    table's alias with its dot, or empty). NULL stays NULL (permanent); otherwise
    the access + period when that is later than the current expiry by more than
    the step, else the current expiry."""
    periods = {r.value: int(p.total_seconds() * 1_000_000)
               for r, p in RETENTION_PERIODS.items() if p is not None}  # fmt: skip
    steps = {name: micros // ACCESS_RENEWAL_STEP for name, micros in periods.items()}
    retention, expires = f"{alias}retention", f"{alias}expires_at"
    now = dialect.param("now") if at is None else at
    renewed = f"{now} + {_per_retention(retention, periods)}"
    return (
        f"CASE WHEN {expires} IS NULL THEN NULL"
        f" WHEN {renewed} > {expires} + {_per_retention(retention, steps)} THEN {renewed}"
        f" ELSE {expires} END"
    )
