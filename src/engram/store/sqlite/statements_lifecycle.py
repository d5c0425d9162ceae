"""SQL builders of the SQLite store's lifecycle: generations, tombstones, the sweep.

Every statement is scoped by a predicate value (``Tenant``, ``Subject``) except
``TENANTS``, the sweep's one pass over every tenant (it returns tenant ids only).
Lists are bound as JSON arrays (``json_each``), so the text is constant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.store.contract import PruneRule
from engram.store.predicate import Owners, Subject, Tenant
from engram.store.rows import COLUMNS, to_micros
from engram.store.tombstones import ERASED

__all__ = [
    "TENANTS", "add_tombstones", "anonymise_tombstones", "bump", "drop_tombstones", "due",
    "generation", "mark_swept", "new_tombstone_key", "prunable", "records_of", "swept_to",
    "tombstone_key", "tombstone_rows", "tombstoned",
]  # fmt: skip

Query = tuple[str, dict[str, Any]]

_COLS = ", ".join(f"r.{column}" for column in COLUMNS)
TENANTS = "SELECT DISTINCT tenant_id FROM records ORDER BY tenant_id"


def _json(values: Sequence[str]) -> str:
    return json.dumps(list(values))


def generation(tenant: Tenant) -> Query:
    """The tenant's cache generation (no row: 0)."""
    cond, params = tenant.sql("g")
    return f"SELECT g.generation FROM cache_generations g WHERE {cond}", params


def bump(tenant: Tenant) -> Query:
    """Count one more deletion in the tenant (``Store.generation``)."""
    _, params = tenant.sql("g")
    sql = (
        "INSERT INTO cache_generations (tenant_id, generation) VALUES (:ten_tenant, 1)"
        " ON CONFLICT (tenant_id) DO UPDATE SET generation = generation + 1"
    )
    return sql, params


def tombstone_key(tenant: Tenant) -> Query:
    """The tenant's tombstone key."""
    cond, params = tenant.sql("k")
    return f"SELECT k.key FROM tombstone_keys k WHERE {cond}", params


def new_tombstone_key(tenant: Tenant, key: bytes) -> Query:
    """Give the tenant a tombstone key unless it has one."""
    _, params = tenant.sql("k")
    sql = (
        "INSERT INTO tombstone_keys (tenant_id, key) VALUES (:ten_tenant, :key)"
        " ON CONFLICT DO NOTHING"
    )
    return sql, {**params, "key": key}


def tombstoned(owners: Owners, digests: Sequence[str]) -> Query:
    """The digests among ``digests`` tombstoned for any of the owners."""
    cond, params = owners.sql("t")
    sql = (
        f"SELECT DISTINCT t.digest FROM tombstones t WHERE {cond}"
        " AND t.digest IN (SELECT value FROM json_each(:digests))"
    )
    return sql, {**params, "digests": _json(digests)}


def add_tombstones(tenant: Tenant, owner: str, digests: Sequence[str], at: object) -> Query:
    """Tombstone ``digests`` for ``owner`` (kept once)."""
    _, params = tenant.sql("t")
    sql = (
        "INSERT INTO tombstones (tenant_id, user_id, digest, at)"
        " SELECT :ten_tenant, :owner, value, :at FROM json_each(:digests) WHERE true"
        " ON CONFLICT DO NOTHING"
    )
    return sql, {**params, "owner": owner, "digests": _json(digests), "at": at}


def drop_tombstones(owners: Owners, digests: Sequence[str]) -> Query:
    """Lift ``digests`` for each of the owners."""
    cond, params = owners.sql("t")
    sql = (
        f"DELETE FROM tombstones AS t WHERE {cond}"
        " AND t.digest IN (SELECT value FROM json_each(:digests))"
    )
    return sql, {**params, "digests": _json(digests)}


def anonymise_tombstones(subject: Subject) -> list[Query]:
    """Move the subject's tombstones to the erased owner, then delete its own rows."""
    cond, params = subject.sql("t")
    copy = (
        f"INSERT INTO tombstones (tenant_id, user_id, digest, at) SELECT t.tenant_id,"
        f" '{ERASED}', t.digest, t.at FROM tombstones t WHERE {cond} ON CONFLICT DO NOTHING"
    )
    return [(copy, params), (f"DELETE FROM tombstones AS t WHERE {cond}", params)]


def tombstone_rows(owners: Owners) -> Query:
    """How many tombstones name any of the owners."""
    cond, params = owners.sql("t")
    return f"SELECT count(*) FROM tombstones t WHERE {cond}", params


def records_of(tenant: Tenant, ids: Sequence[str]) -> Query:
    """The tenant's records among ``ids`` (administrative: every owner)."""
    cond, params = tenant.sql()
    sql = (
        f"SELECT {_COLS} FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value WHERE {cond}"
    )
    return sql, {**params, "ids": _json(ids)}


def due(tenant: Tenant, at: int, after: tuple[int, str], limit: int) -> Query:
    """Chain heads of the tenant past their retention at ``at``, in (expires_at, id)
    order after ``after`` (an index range: a page costs its own rows, not the
    tenant's every due row)."""
    cond, params = tenant.sql()
    sql = (
        f"SELECT {_COLS} FROM records r WHERE {cond} AND r.expires_at IS NOT NULL"
        " AND r.expires_at <= :at AND r.expires_at >= :after_at"
        " AND (r.expires_at > :after_at OR r.id > :after_id) AND r.superseded_by IS NULL"
        " ORDER BY r.expires_at, r.id LIMIT :n"
    )
    return sql, {**params, "at": at, "after_at": after[0], "after_id": after[1], "n": limit}


def prunable(tenant: Tenant, rule: PruneRule, after: str, limit: int) -> Query:
    """Chain heads of the tenant that ``rule`` lets decay pruning consider."""
    cond, params = tenant.sql()
    sql = (
        f"SELECT {_COLS} FROM records r WHERE {cond} AND r.id > :after"
        " AND r.superseded_by IS NULL AND r.status IN (SELECT value FROM json_each(:statuses))"
        " AND r.authority NOT IN (SELECT value FROM json_each(:protected))"
        " AND r.importance < :importance AND r.created_at <= :born ORDER BY r.id LIMIT :n"
    )
    return sql, {
        **params, "after": after, "statuses": _json(rule.statuses),
        "protected": _json(rule.protected), "importance": rule.max_importance,
        "born": to_micros(rule.born_before), "n": limit,
    }  # fmt: skip


def swept_to(tenant: Tenant) -> Query:
    """How far the tenant was swept (no row: never)."""
    cond, params = tenant.sql("s")
    return f"SELECT s.swept_to FROM sweeps s WHERE {cond}", params


def mark_swept(tenant: Tenant, at: object) -> Query:
    """Record a sweep at ``at``; the mark never moves back."""
    _, params = tenant.sql("s")
    sql = (
        "INSERT INTO sweeps (tenant_id, swept_to, runs) VALUES (:ten_tenant, :at, 1)"
        " ON CONFLICT (tenant_id) DO UPDATE SET swept_to = max(swept_to, excluded.swept_to),"
        " runs = runs + 1"
    )
    return sql, {**params, "at": at}
