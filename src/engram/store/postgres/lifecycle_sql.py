"""SQL builders of the PostgreSQL store's lifecycle: generations, tombstones, the sweep.

The SQLite builders' twins (``store.sqlite.statements_lifecycle``), scoped by the
same predicate values rendered for ``POSTGRES``, lists bound as arrays. ``TENANTS``
is the sweep's one pass over every tenant (tenant ids only; multi-shard on Citus).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.store.contract import PruneRule
from engram.store.dialect import POSTGRES
from engram.store.postgres.sql import SELECT
from engram.store.predicate import Owners, Subject, Tenant
from engram.store.rows import to_micros
from engram.store.tombstones import ERASED

__all__ = [
    "TENANTS", "add_tombstones", "anonymise_tombstones", "bump", "drop_tombstones", "due",
    "generation", "mark_swept", "new_tombstone_key", "prunable", "records_of", "swept_to",
    "tombstone_key", "tombstone_rows", "tombstoned",
]  # fmt: skip

Query = tuple[str, dict[str, Any]]

TENANTS = "SELECT DISTINCT r.tenant_id FROM records r ORDER BY r.tenant_id"


def generation(tenant: Tenant) -> Query:
    """The tenant's cache generation (no row: 0)."""
    cond, params = tenant.sql("g", POSTGRES)
    return f"SELECT g.generation FROM cache_generations g WHERE {cond}", params


def bump(tenant: Tenant) -> Query:
    """Count one more deletion in the tenant. An update, else an insert, rather than
    ``ON CONFLICT DO UPDATE`` (which a sharded table over ``postgres_fdw`` refuses):
    race-free because writers of one tenant hold its writer lock (``Session.writing``)."""
    cond, params = tenant.sql("g", POSTGRES)
    sql = (
        "WITH up AS (UPDATE cache_generations AS g SET generation = g.generation + 1"
        f" WHERE {cond} RETURNING g.tenant_id)"
        " INSERT INTO cache_generations (tenant_id, generation)"
        " SELECT %(ten_tenant)s, 1 WHERE NOT EXISTS (SELECT 1 FROM up)"
    )
    return sql, params


def tombstone_key(tenant: Tenant) -> Query:
    """The tenant's tombstone key."""
    cond, params = tenant.sql("k", POSTGRES)
    return f"SELECT k.key FROM tombstone_keys k WHERE {cond}", params


def new_tombstone_key(tenant: Tenant, key: bytes) -> Query:
    """Give the tenant a tombstone key unless it has one."""
    _, params = tenant.sql("k", POSTGRES)
    sql = (
        "INSERT INTO tombstone_keys (tenant_id, key) VALUES (%(ten_tenant)s, %(key)s)"
        " ON CONFLICT DO NOTHING"
    )
    return sql, {**params, "key": key}


def tombstoned(owners: Owners, digests: Sequence[str]) -> Query:
    """The digests among ``digests`` tombstoned for any of the owners."""
    cond, params = owners.sql("t", POSTGRES)
    sql = (
        f"SELECT DISTINCT t.digest FROM tombstones t WHERE {cond}"
        " AND t.digest = ANY(%(digests)s::text[])"
    )
    return sql, {**params, "digests": list(digests)}


def add_tombstones(tenant: Tenant, owner: str, digests: Sequence[str], at: int | None) -> Query:
    """Tombstone ``digests`` for ``owner`` (kept once)."""
    _, params = tenant.sql("t", POSTGRES)
    sql = (
        "INSERT INTO tombstones (tenant_id, user_id, digest, at)"
        " SELECT %(ten_tenant)s, %(owner)s, d, %(at)s FROM unnest(%(digests)s::text[]) d"
        " ON CONFLICT DO NOTHING"
    )
    return sql, {**params, "owner": owner, "digests": list(digests), "at": at}


def drop_tombstones(owners: Owners, digests: Sequence[str]) -> Query:
    """Lift ``digests`` for each of the owners."""
    cond, params = owners.sql("t", POSTGRES)
    sql = f"DELETE FROM tombstones AS t WHERE {cond} AND t.digest = ANY(%(digests)s::text[])"
    return sql, {**params, "digests": list(digests)}


def anonymise_tombstones(subject: Subject) -> list[Query]:
    """Move the subject's tombstones to the erased owner, then delete its own rows."""
    cond, params = subject.sql("t", POSTGRES)
    copy = (
        f"INSERT INTO tombstones (tenant_id, user_id, digest, at) SELECT t.tenant_id,"
        f" '{ERASED}', t.digest, t.at FROM tombstones t WHERE {cond} ON CONFLICT DO NOTHING"
    )
    return [(copy, params), (f"DELETE FROM tombstones AS t WHERE {cond}", params)]


def tombstone_rows(owners: Owners) -> Query:
    """How many tombstones name any of the owners."""
    cond, params = owners.sql("t", POSTGRES)
    return f"SELECT count(*) FROM tombstones t WHERE {cond}", params


def records_of(tenant: Tenant, ids: Sequence[str]) -> Query:
    """The tenant's records among ``ids`` (administrative: every owner)."""
    cond, params = tenant.sql("r", POSTGRES)
    return f"{SELECT} WHERE r.id = ANY(%(ids)s::text[]) AND {cond}", {**params, "ids": list(ids)}


def due(tenant: Tenant, at: int, after: tuple[int, str], limit: int) -> Query:
    """Chain heads of the tenant past their retention at ``at``, in (expires_at, id)
    order after ``after`` (an index range, ``records_due``)."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = (
        f"{SELECT} WHERE {cond} AND r.expires_at IS NOT NULL AND r.expires_at <= %(at)s"
        " AND (r.expires_at, r.id) > (%(after_at)s, %(after_id)s)"
        " AND r.superseded_by IS NULL ORDER BY r.expires_at, r.id LIMIT %(n)s"
    )
    return sql, {**params, "at": at, "after_at": after[0], "after_id": after[1], "n": limit}


def prunable(tenant: Tenant, rule: PruneRule, after: str, limit: int) -> Query:
    """Chain heads of the tenant that ``rule`` lets decay pruning consider."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = (
        f"{SELECT} WHERE {cond} AND r.id > %(after)s AND r.superseded_by IS NULL"
        " AND r.status = ANY(%(statuses)s::text[]) AND NOT r.authority = ANY(%(protected)s::text[])"
        " AND r.importance < %(importance)s AND r.created_at <= %(born)s ORDER BY r.id LIMIT %(n)s"
    )
    return sql, {
        **params, "after": after, "statuses": list(rule.statuses),
        "protected": list(rule.protected), "importance": rule.max_importance,
        "born": to_micros(rule.born_before), "n": limit,
    }  # fmt: skip


def swept_to(tenant: Tenant) -> Query:
    """How far the tenant was swept, locking its mark (no row: never)."""
    cond, params = tenant.sql("s", POSTGRES)
    return f"SELECT s.swept_to FROM sweeps s WHERE {cond} FOR UPDATE", params


def mark_swept(tenant: Tenant, at: int | None) -> Query:
    """Record a sweep at ``at``; the mark never moves back (update, else insert, under
    the tenant's writer lock, as ``bump``)."""
    cond, params = tenant.sql("s", POSTGRES)
    sql = (
        "WITH up AS (UPDATE sweeps AS s SET swept_to = greatest(s.swept_to, %(at)s),"
        f" runs = s.runs + 1 WHERE {cond} RETURNING s.tenant_id)"
        " INSERT INTO sweeps (tenant_id, swept_to, runs)"
        " SELECT %(ten_tenant)s, %(at)s, 1 WHERE NOT EXISTS (SELECT 1 FROM up)"
    )
    return sql, {**params, "at": at}
