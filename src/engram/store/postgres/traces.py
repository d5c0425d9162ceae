"""Recall traces on PostgreSQL: the rows of ``engram.store.traces`` and their SQL.

The rule is the SQLite store's: a trace is read back only under the visibility it
was recorded under (``Visibility.trace_sql``), deleted with any erased id it names
(``ids`` is a ``text[]``, matched with ``&&``), and retention keeps the newest
``keep`` traces of each tenant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from engram.store.dialect import POSTGRES
from engram.store.postgres.sql import Query
from engram.store.predicate import Tenant, Visibility
from engram.store.traces import TraceRow

__all__ = ["INSERT", "TraceRow", "delete_naming", "get", "params", "retention"]

INSERT = (
    "INSERT INTO traces (tenant_id, trace_id, user_id, visibility, ids, at, body)"
    " VALUES (%(tenant)s, %(id)s, %(user)s, %(vis)s, %(ids)s::text[], %(at)s, %(body)s)"
    " ON CONFLICT (tenant_id, trace_id) DO UPDATE SET (user_id, visibility, ids, at, body)"
    " = ROW(excluded.user_id, excluded.visibility, excluded.ids, excluded.at, excluded.body)"
)


def params(row: TraceRow) -> dict[str, Any]:
    """Bound parameters of ``INSERT`` for one trace."""
    return {"id": row.trace_id, "tenant": row.tenant_id, "user": row.user_id,
            "vis": row.visibility, "ids": sorted(row.ids), "at": row.at,
            "body": row.body}  # fmt: skip


def retention(tenants: Iterable[str], keep: int) -> list[Query]:
    """For each tenant, a statement deleting all but its newest ``keep`` traces."""
    out = []
    for tenant_id in sorted(set(tenants)):
        cond, bound = Tenant(tenant_id).sql("t", POSTGRES)
        inner, _ = Tenant(tenant_id).sql("x", POSTGRES)
        text = (
            f"DELETE FROM traces AS t WHERE {cond} AND t.seq <= (SELECT x.seq FROM traces x"
            f" WHERE {inner} ORDER BY x.seq DESC LIMIT 1 OFFSET %(keep)s)"
        )
        out.append((text, {**bound, "keep": keep}))
    return out


def get(vis: Visibility, trace_id: str) -> Query:
    """The body of one trace recorded under exactly ``vis``."""
    cond, bound = vis.trace_sql("t", POSTGRES)
    return f"SELECT t.body FROM traces t WHERE t.trace_id = %(id)s AND {cond}", {
        **bound, "id": trace_id,
    }  # fmt: skip


def delete_naming(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Delete the tenant's traces that name any of ``ids``."""
    cond, bound = tenant.sql("t", POSTGRES)
    text = f"DELETE FROM traces AS t WHERE t.ids && %(ids)s::text[] AND {cond}"
    return text, {**bound, "ids": list(ids)}
