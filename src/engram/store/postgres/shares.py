"""The PostgreSQL store's sharing: the tenant's grants and its share copies.

The same statements as SQLite's (``sqlite.statements_share``) rendered for
PostgreSQL: one tenant through the predicate's ``Tenant`` condition, lists
bound as arrays. Reads inside a transaction take the tenant's writer lock
first (``Session.writing``), so a share or a revocation decides on what no
other writer of the tenant is changing meanwhile.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engram.store.contract import CopiesOf, CopiesTo, DropGrants, PutGrants
from engram.store.dialect import POSTGRES
from engram.store.postgres.admin import Admin
from engram.store.postgres.session import Conn
from engram.store.postgres.sql import SELECT, Query
from engram.store.predicate import Tenant
from engram.store.rows import from_micros, record_from_values, to_micros
from engram.types import Record, ShareGrant

__all__ = ["Shares", "copies_query", "drop_query", "grants_query"]

_COLUMNS = ("tenant_id", "from_agent", "to_agent", "type", "granted_at")
_PUT = (
    f"INSERT INTO share_grants ({', '.join(_COLUMNS)}) VALUES ("
    + ", ".join(f"%({column})s" for column in _COLUMNS)
    + ") ON CONFLICT (tenant_id, from_agent, to_agent, type) DO NOTHING"
)
_SHARED = "r.source_kind = 'share'"


def grants_query(tenant: Tenant) -> Query:
    """The tenant's grants in key order."""
    cond, params = tenant.sql("g", POSTGRES)
    sql = (
        f"SELECT {', '.join(f'g.{c}' for c in _COLUMNS)} FROM share_grants g"
        f" WHERE {cond} ORDER BY g.from_agent, g.to_agent, g.type"
    )
    return sql, params


def drop_query(change: DropGrants) -> Query:
    """Delete the grants of one (from, to) pair among ``types``."""
    cond, params = change.tenant.sql("g", POSTGRES)
    sql = (
        f"DELETE FROM share_grants AS g WHERE {cond} AND g.from_agent = %(from_agent)s"
        " AND g.to_agent = %(to_agent)s AND g.type = ANY(%(types)s::text[])"
    )
    bound = {"from_agent": change.from_agent, "to_agent": change.to_agent,
             "types": list(change.types)}  # fmt: skip
    return sql, {**params, **bound}


def copies_query(tenant: Tenant, query: CopiesOf | CopiesTo) -> Query:
    """Share copies of originals (``derived_from[0]``, the ``records_share_original``
    index) or of one target agent (the ``records_shared`` index), oldest first."""
    cond, params = tenant.sql("r", POSTGRES)
    if isinstance(query, CopiesOf):
        sql = (
            f"{SELECT} WHERE {cond} AND {_SHARED}"
            " AND ((r.derived_from::jsonb) ->> 0) = ANY(%(ids)s::text[]) ORDER BY r.id"
        )
        return sql, {**params, "ids": list(query.originals)}
    sql = (
        f"{SELECT} WHERE {cond} AND {_SHARED} AND r.agent_id = %(agent)s"
        " AND r.type = ANY(%(types)s::text[]) ORDER BY r.id"
    )
    return sql, {**params, "agent": query.agent_id, "types": list(query.types)}


def _grant_row(grant: ShareGrant) -> dict[str, Any]:
    return {
        "tenant_id": grant.tenant_id, "from_agent": grant.from_agent,
        "to_agent": grant.to_agent, "type": grant.type,
        "granted_at": to_micros(grant.granted_at),
    }  # fmt: skip


def _time(micros: int) -> datetime:
    when = from_micros(micros)
    assert when is not None
    return when


class Shares(Admin):
    """``Store.grants`` and ``Store.copies`` on PostgreSQL, and the grant changes."""

    def grants(self, tenant: Tenant) -> list[ShareGrant]:
        """The tenant's share grants, ordered by (from_agent, to_agent, type)."""
        self.writing(tenant.tenant_id)
        rows = self.rows(grants_query(tenant), "reading share grants")
        return [ShareGrant(str(t), str(f), str(to), str(kind), _time(int(at)))
                for t, f, to, kind, at in rows]  # fmt: skip

    def copies(self, tenant: Tenant, query: CopiesOf | CopiesTo) -> list[Record]:
        """The tenant's share copies ``query`` names, oldest first."""
        empty = not query.originals if isinstance(query, CopiesOf) else not query.types
        if empty:
            return []
        self.writing(tenant.tenant_id)
        found = self.rows(copies_query(tenant, query), "reading share copies")
        return [record_from_values(row) for row in found]

    @staticmethod
    def put_grants(conn: Conn, change: PutGrants) -> int:
        """Insert the grants not held yet, on ``conn``; how many were new."""
        return sum(conn.execute(_PUT, _grant_row(g)).rowcount for g in change.grants)

    @staticmethod
    def drop_grants(conn: Conn, change: DropGrants) -> int:
        """Delete the named grants, on ``conn``; how many there were."""
        return conn.execute(*drop_query(change)).rowcount if change.types else 0
