"""SQL builders of the PostgreSQL store's lifecycle tables.

The twins of ``store.sqlite.statements_lifecycle``, in this dialect: the
generations, tombstones and the sweep (migrations 0010-0012) and the outcome
statistics, consolidation marks and lease (migration 0008); arrays bound with
``= ANY``, ``ON CONFLICT`` upserts. Every one is scoped by a predicate value and
names one tenant (``docs/sharding.md``), except ``TENANTS``, the sweep's one pass
over every tenant (tenant ids only; multi-shard on Citus).
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.store.contract import PruneRule
from engram.store.dialect import POSTGRES
from engram.store.postgres.sql import COLUMNS_PG, SELECT, Query
from engram.store.predicate import Owners, Subject, Tenant, Visibility
from engram.store.rows import to_micros
from engram.store.tombstones import ERASED

__all__ = [
    "TENANTS", "add_tombstones", "anonymise_tombstones", "bump", "drop_tombstones", "due",
    "end_lease", "generation", "lease_row", "mark_consolidated", "mark_swept",
    "new_tombstone_key", "outcome", "outcomes", "prunable", "reconsolidate", "records_of",
    "subject_records", "subject_users", "swept_to", "take_lease", "tombstone_key",
    "tombstone_rows", "tombstoned",
]  # fmt: skip

_COLS = ", ".join(f"r.{column}" for column in COLUMNS_PG)
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


def outcome(subject: Subject, procedure_id: str, success: bool, reward: float | None,
            at_us: int) -> Query:  # fmt: skip
    """Count one outcome of the subject's procedure ``procedure_id`` (nothing when it
    is not one of the subject's procedural records)."""
    cond, params = subject.sql("r", POSTGRES)
    sql = (
        "INSERT INTO procedure_stats (tenant_id, procedure_id, user_id, successes,"
        " failures, reward_total, rewards, updated_at)"
        " SELECT r.tenant_id, r.id, r.user_id, %(wins)s, %(losses)s, %(reward)s, %(rewards)s,"
        " %(at)s FROM records r"
        f" WHERE r.id = %(procedure)s AND r.tier = 'procedural' AND {cond}"
        " ON CONFLICT (tenant_id, procedure_id) DO UPDATE SET"
        " successes = procedure_stats.successes + excluded.successes,"
        " failures = procedure_stats.failures + excluded.failures,"
        " reward_total = procedure_stats.reward_total + excluded.reward_total,"
        " rewards = procedure_stats.rewards + excluded.rewards,"
        " updated_at = greatest(procedure_stats.updated_at, excluded.updated_at)"
    )
    return sql, {**params, "procedure": procedure_id, "wins": int(success),
                 "losses": int(not success), "reward": reward or 0.0,
                 "rewards": int(reward is not None), "at": at_us}  # fmt: skip


def outcomes(vis: Visibility, ids: Sequence[str]) -> Query:
    """Counted outcomes of the visible records among ``ids``."""
    cond, params = vis.sql("r", POSTGRES)
    tenant, tenant_params = Tenant(vis.tenant_id).sql("s", POSTGRES)
    sql = (
        "SELECT s.procedure_id, s.successes, s.failures, s.reward_total, s.rewards"
        f" FROM records r JOIN procedure_stats s ON s.procedure_id = r.id AND {tenant}"
        f" WHERE r.id = ANY(%(ids)s::text[]) AND {cond}"
    )
    return sql, {**params, **tenant_params, "ids": list(ids)}


def mark_consolidated(subject: Subject, ids: Sequence[str], at_us: int) -> Query:
    """Mark the subject's records among ``ids`` as read by consolidation (once)."""
    cond, params = subject.sql("r", POSTGRES)
    sql = (
        "INSERT INTO consolidated (tenant_id, user_id, episode_id, at)"
        " SELECT r.tenant_id, r.user_id, r.id, %(at)s FROM records r"
        f" WHERE r.id = ANY(%(ids)s::text[]) AND {cond} ON CONFLICT DO NOTHING"
    )
    return sql, {**params, "ids": list(ids), "at": at_us}


def reconsolidate(tenant: Tenant, ids: Sequence[str], summary_type: str) -> Query:
    """Delete the consolidation marks of the episodes the tenant's summaries among
    ``ids`` (records of ``summary_type``) were derived from."""
    cond, params = tenant.sql("r", POSTGRES)
    marks, _ = tenant.sql("c", POSTGRES)
    sql = (
        f"DELETE FROM consolidated c WHERE {marks} AND c.episode_id IN ("
        " SELECT jsonb_array_elements_text(r.derived_from::jsonb) FROM records r"
        f" WHERE r.id = ANY(%(ids)s::text[]) AND {cond} AND r.type = %(summary_type)s)"
    )
    return sql, {**params, "ids": list(ids), "summary_type": summary_type}


def subject_users(tenant: Tenant) -> Query:
    """The owners of a tenant's records, in order ('' stands for its global records)."""
    cond, params = tenant.sql("r", POSTGRES)
    return f"SELECT DISTINCT r.user_id FROM records r WHERE {cond} ORDER BY r.user_id", params


def subject_records(
    subject: Subject, types: Sequence[str], statuses: Sequence[str], before_us: int,
    at_us: int, limit: int, after: tuple[int, str] | None, unconsolidated: bool,
) -> Query:  # fmt: skip
    """One page of a subject's records, oldest observed first (``contract.SubjectScan``)."""
    cond, params = subject.sql("r", POSTGRES)
    marked, _ = subject.sql("c", POSTGRES)
    sql = (
        f"SELECT {_COLS} FROM records r WHERE {cond}"
        " AND r.type = ANY(%(types)s::text[]) AND r.status = ANY(%(statuses)s::text[])"
        " AND r.observed_at < %(before)s AND (r.expires_at IS NULL OR r.expires_at > %(at)s)"
        " AND (r.observed_at, r.id) > (%(after_at)s, %(after_id)s::text)"
        " AND (%(every)s OR NOT EXISTS (SELECT 1 FROM consolidated c"
        f" WHERE {marked} AND c.episode_id = r.id))"
        " ORDER BY r.observed_at, r.id LIMIT %(limit)s"
    )
    after_at, after_id = after if after is not None else (-(2**63), "")
    return sql, {**params, "types": list(types), "statuses": list(statuses),
                 "before": before_us, "at": at_us, "after_at": after_at, "after_id": after_id,
                 "every": not unconsolidated, "limit": limit}  # fmt: skip


def take_lease(subject: Subject, holder: str, wall_us: int, until_us: int) -> Query:
    """Take (or renew) the subject's lease unless another holder's is still running."""
    _, params = subject.sql("k", POSTGRES)
    sql = (
        "INSERT INTO consolidation_runs (tenant_id, user_id, holder, lease_until)"
        " VALUES (%(subj_tenant)s, %(subj_user)s, %(holder)s, %(until)s)"
        " ON CONFLICT (tenant_id, user_id) DO UPDATE SET holder = excluded.holder,"
        " lease_until = excluded.lease_until"
        " WHERE consolidation_runs.holder IN ('', excluded.holder)"
        " OR consolidation_runs.lease_until <= %(wall)s"
    )
    return sql, {**params, "holder": holder, "until": until_us, "wall": wall_us}


def lease_row(subject: Subject) -> Query:
    """The subject's lease holder and the ``now`` of its last finished run."""
    cond, params = subject.sql("k", POSTGRES)
    return f"SELECT k.holder, k.last_run FROM consolidation_runs k WHERE {cond}", params


def end_lease(subject: Subject, holder: str, last_us: int | None) -> Query:
    """Release ``holder``'s lease; record ``last_us`` as the last run (never earlier)."""
    cond, params = subject.sql("k", POSTGRES)
    sql = (
        "UPDATE consolidation_runs AS k SET holder = '', lease_until = 0,"
        " last_run = CASE WHEN %(last)s::bigint IS NULL THEN k.last_run"
        " ELSE greatest(k.last_run, %(last)s::bigint) END"
        f" WHERE {cond} AND k.holder = %(holder)s"
    )
    return sql, {**params, "holder": holder, "last": last_us}
