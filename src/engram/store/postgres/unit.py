"""What one PostgreSQL transaction of a store has learned and still owes.

A write transaction of the SDK sends many small statements; most of what they
used to re-read is fixed for the rest of the transaction once read, because the
transaction holds the lock that keeps it fixed:

* advisory locks already held (a tenant's writer lock, a write slot): taking one
  again is a no-op on the server, so it is not sent again; locks asked for are
  queued and taken together, in the order asked, by one statement sent before
  the transaction's next statement (``Session``);
* the vector model read in this transaction (``engram_meta``);
* the audit pseudonym keys read or made in this transaction: a key changes only
  by ``forget_audit_subject``, under the tenant's writer lock this transaction
  holds, and that method drops it here;
* each tenant's audit chain head, locked (the ``audit_heads`` row) by the first
  append of the transaction, and advanced here by every entry chained since;
* the audit rows chained but not inserted yet: they are inserted by one
  statement before ``COMMIT`` (or before the transaction reads the audit log).

A savepoint that rolls back undoes what happened inside it on the server (locks
taken, rows written, the chain head moved), so ``Session`` snapshots this state
when a savepoint opens and restores it when one rolls back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Unit", "VectorMeta"]

VectorMeta = tuple[str | None, int | None]  # (model, dimension) as engram_meta holds them


@dataclass
class Unit:
    """The state of one open transaction (see the module docstring)."""

    locks: set[str] = field(default_factory=set)
    pending: list[str] = field(default_factory=list)
    model: VectorMeta | None = None  # None: not read in this transaction
    keys: dict[tuple[str, str], bytes] = field(default_factory=dict)
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    entries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by tenant

    def ask(self, name: str) -> None:
        """Queue the advisory lock ``name`` unless it is held or queued already."""
        if name not in self.locks and name not in self.pending:
            self.pending.append(name)

    def taken(self, names: list[str]) -> None:
        """The queued locks ``names`` are now held."""
        self.locks.update(names)

    def snapshot(self) -> Unit:
        """A copy to restore when a savepoint opened now rolls back."""
        entries = {tenant: list(rows) for tenant, rows in self.entries.items()}
        return Unit(set(self.locks), list(self.pending), self.model, dict(self.keys),
                    dict(self.heads), entries)  # fmt: skip

    def restore(self, saved: Unit) -> None:
        """Go back to ``saved`` (a savepoint rolled back). Locks taken inside the
        savepoint were released by the rollback; those queued before it and taken
        inside it are queued again."""
        self.locks, self.pending, self.model = saved.locks, saved.pending, saved.model
        self.keys, self.heads, self.entries = saved.keys, saved.heads, saved.entries
