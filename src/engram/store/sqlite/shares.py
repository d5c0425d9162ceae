"""The SQLite store's sharing: the tenant's grants and its share copies.

Reads go through the connection's usual readers (the writer inside a
transaction, so a share decides on what its own transaction sees); grant
changes are applied by ``Writes.apply`` like every other change.
"""

from __future__ import annotations

from datetime import datetime

from engram.store.contract import CopiesOf, CopiesTo, DropGrants, PutGrants
from engram.store.predicate import Tenant
from engram.store.rows import from_micros
from engram.store.sqlite import statements_share as sql
from engram.store.sqlite.reads import Reads
from engram.types import Record, ShareGrant

__all__ = ["Shares"]


class Shares(Reads):
    """``Store.grants`` and ``Store.copies`` on SQLite, and the grant changes."""

    def grants(self, tenant: Tenant) -> list[ShareGrant]:
        """The tenant's share grants, ordered by (from_agent, to_agent, type)."""
        rows = self._rows(sql.grants(tenant), plain=True)
        return [ShareGrant(str(t), str(f), str(to), str(kind), _time(at))
                for t, f, to, kind, at in rows]  # fmt: skip

    def copies(self, tenant: Tenant, query: CopiesOf | CopiesTo) -> list[Record]:
        """The tenant's share copies ``query`` names, oldest first."""
        empty = not query.originals if isinstance(query, CopiesOf) else not query.types
        return [] if empty else self._records(sql.copies(tenant, query))

    def _put_grants(self, change: PutGrants) -> int:
        """Insert the grants not held yet; how many were new."""
        return sum(self._run(sql.PUT_GRANT, sql.grant_row(g)).rowcount for g in change.grants)

    def _drop_grants(self, change: DropGrants) -> int:
        """Delete the named grants; how many there were."""
        return self._run(*sql.drop_grants(change)).rowcount if change.types else 0


def _time(micros: int) -> datetime:
    when = from_micros(micros)
    assert when is not None
    return when
