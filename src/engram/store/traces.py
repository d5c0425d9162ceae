"""Recall traces in storage: the rows, and the SQL that stores, reads and deletes them.

A trace names record ids (selected, rejected, merged, in conflict), so it is
stored with the visibility its recall ran under (``Visibility.trace_key``) and
the ids it names. It is read back only under the same visibility
(``Visibility.trace_sql``), deleted with any erased id it names, and retention
keeps the newest ``keep`` traces of each tenant (one tenant's traffic never
evicts another's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.store.predicate import Tenant, Visibility
from engram.store.rows import to_micros

__all__ = [
    "TraceRow", "delete_naming", "get", "insert", "named_ids", "named_ids_in", "retention",
]  # fmt: skip

_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
# A JSON string that is exactly an id: an opening quote (never escaped, so never after a
# backslash; a quote inside a string always is), 26 id characters, the closing quote.
_QUOTED_ID = re.compile(r'(?<!\\)"([0-9A-HJKMNP-TV-Z]{26})"')


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One recall trace as stored: owner, visibility key, the ids it names, its body."""

    trace_id: str
    tenant_id: str
    user_id: str
    visibility: str
    ids: frozenset[str]
    at: int
    body: str

    @classmethod
    def of(cls, vis: Visibility, trace_id: str, at: datetime, body: dict[str, object]) -> TraceRow:
        """The row of a trace recorded under ``vis`` at ``at`` (stored as microseconds)."""
        text = json.dumps(body)
        ids = named_ids_in(text) - {trace_id}
        return cls(trace_id, vis.tenant_id, vis.user_id, vis.trace_key(), ids,
                   to_micros(at) or 0, text)  # fmt: skip

    def params(self) -> dict[str, Any]:
        """Bound parameters of ``insert``."""
        return {"id": self.trace_id, "tenant": self.tenant_id, "user": self.user_id,
                "vis": self.visibility, "ids": json.dumps(sorted(self.ids)), "at": self.at,
                "body": self.body}  # fmt: skip


def named_ids(value: object) -> frozenset[str]:
    """Every record id (a 26-character ULID string) anywhere in a trace body: a walk
    rather than a list of fields, so a field added to traces later is covered."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) == 26 and _ID.fullmatch(item):
                found.add(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return frozenset(found)


def named_ids_in(text: str) -> frozenset[str]:
    """``named_ids`` of the value ``text`` is the ``json.dumps`` of (string keys
    only, as in every trace body), read from the text: one regular-expression pass
    instead of a walk over the value (a recall's trace names a few hundred ids)."""
    return frozenset(_QUOTED_ID.findall(text))


def insert() -> str:
    """Store one trace (``TraceRow.params``)."""
    return (
        "INSERT OR REPLACE INTO traces (trace_id, tenant_id, user_id, visibility, ids, at, body)"
        " VALUES (:id, :tenant, :user, :vis, :ids, :at, :body)"
    )


def retention(tenants: Iterable[str], keep: int) -> list[tuple[str, dict[str, Any]]]:
    """For each tenant, a statement deleting all but its newest ``keep`` traces."""
    out = []
    for tenant_id in sorted(set(tenants)):
        cond, params = Tenant(tenant_id).sql("t")
        inner, _ = Tenant(tenant_id).sql("x")
        sql = (
            f"DELETE FROM traces AS t WHERE {cond} AND t.seq <= (SELECT x.seq FROM traces x"
            f" WHERE {inner} ORDER BY x.seq DESC LIMIT 1 OFFSET :keep)"
        )
        out.append((sql, {**params, "keep": keep}))
    return out


def get(vis: Visibility, trace_id: str) -> tuple[str, dict[str, Any]]:
    """The body of one trace recorded under exactly ``vis``."""
    cond, params = vis.trace_sql("t")
    sql = f"SELECT t.body FROM traces t WHERE t.trace_id = :id AND {cond}"
    return sql, {**params, "id": trace_id}


def delete_naming(tenant: Tenant, ids: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Delete the tenant's traces that name any of ``ids`` (erased records)."""
    cond, params = tenant.sql("t")
    inner, _ = tenant.sql("x")
    sql = (
        f"DELETE FROM traces AS t WHERE {cond} AND t.seq IN (SELECT x.seq FROM traces x,"
        f" json_each(x.ids) j WHERE {inner} AND j.value IN (SELECT value FROM json_each(:ids)))"
    )
    return sql, {**params, "ids": json.dumps(list(ids))}
