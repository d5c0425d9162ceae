"""SQL builders of the SQLite store's sharing: grants and share copies.

Every statement names one tenant through the predicate's ``Tenant`` condition;
lists are bound as one JSON array (``json_each``), so the SQL text is constant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.store.contract import CopiesOf, CopiesTo, DropGrants
from engram.store.predicate import Tenant
from engram.store.rows import COLUMNS, to_micros
from engram.types import ShareGrant

__all__ = ["GRANT_COLUMNS", "PUT_GRANT", "copies", "drop_grants", "grant_row", "grants"]

Query = tuple[str, dict[str, Any]]

GRANT_COLUMNS = ("tenant_id", "from_agent", "to_agent", "type", "granted_at")
PUT_GRANT = (
    f"INSERT INTO share_grants ({', '.join(GRANT_COLUMNS)})"
    " VALUES (:tenant_id, :from_agent, :to_agent, :type, :granted_at)"
    " ON CONFLICT (tenant_id, from_agent, to_agent, type) DO NOTHING"
)
_SELECT = "SELECT " + ", ".join(f"r.{column}" for column in COLUMNS)
_SHARED = "r.source_kind = 'share'"


def grant_row(grant: ShareGrant) -> dict[str, Any]:
    """The bound parameters of ``PUT_GRANT`` for one grant."""
    return {
        "tenant_id": grant.tenant_id, "from_agent": grant.from_agent,
        "to_agent": grant.to_agent, "type": grant.type,
        "granted_at": to_micros(grant.granted_at),
    }  # fmt: skip


def grants(tenant: Tenant) -> Query:
    """The tenant's grants in key order."""
    cond, params = tenant.sql("g")
    sql = (
        f"SELECT {', '.join(f'g.{c}' for c in GRANT_COLUMNS)} FROM share_grants g"
        f" WHERE {cond} ORDER BY g.from_agent, g.to_agent, g.type"
    )
    return sql, params


def drop_grants(change: DropGrants) -> Query:
    """Delete the grants of one (from, to) pair among ``types``."""
    cond, params = change.tenant.sql("g")
    sql = (
        f"DELETE FROM share_grants AS g WHERE {cond} AND g.from_agent = :from_agent"
        " AND g.to_agent = :to_agent AND g.type IN (SELECT value FROM json_each(:types))"
    )
    bound = {"from_agent": change.from_agent, "to_agent": change.to_agent,
             "types": _json(change.types)}  # fmt: skip
    return sql, {**params, **bound}


def copies(tenant: Tenant, query: CopiesOf | CopiesTo) -> Query:
    """Share copies of originals (``derived_from[0]``, the ``records_share_original``
    index) or of one target agent (the ``records_shared`` index), oldest first."""
    cond, params = tenant.sql()
    if isinstance(query, CopiesOf):
        sql = (
            f"{_SELECT} FROM records r WHERE {cond} AND {_SHARED}"
            " AND json_extract(r.derived_from, '$[0]') IN (SELECT value FROM json_each(:ids))"
            " ORDER BY r.id"
        )
        return sql, {**params, "ids": _json(query.originals)}
    sql = (
        f"{_SELECT} FROM records r WHERE {cond} AND {_SHARED} AND r.agent_id = :agent"
        " AND r.type IN (SELECT value FROM json_each(:types)) ORDER BY r.id"
    )
    return sql, {**params, "agent": query.agent_id, "types": _json(query.types)}


def _json(values: Sequence[str]) -> str:
    return json.dumps(list(values))
