"""SQL builders of the SQLite store's lifecycle tables.

Generations, tombstones and the sweep (schema 0019-0021); ``procedure_stats``
(counted outcomes), ``consolidated`` (episodes consolidation has read) and
``consolidation_runs`` (the per-subject lease; schema 0017). Every statement is
scoped by a predicate value (``Visibility``, ``Subject``, ``Tenant``, ``Owners``),
like every read of ``records``, except ``TENANTS``, the sweep's one pass over every
tenant (it returns tenant ids only). Lists are bound as JSON arrays
(``json_each``), so the text is constant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.store.contract import PruneRule
from engram.store.predicate import Owners, Subject, Tenant, Visibility
from engram.store.rows import COLUMNS, to_micros
from engram.store.tombstones import ERASED

__all__ = [
    "TENANTS", "add_tombstones", "anonymise_tombstones", "bump", "drop_tombstones", "due",
    "end_lease", "generation", "lease_row", "mark_consolidated", "mark_swept",
    "new_tombstone_key", "outcome", "outcomes", "prunable", "reconsolidate", "records_of",
    "subject_records", "subject_users", "swept_to", "take_lease", "tombstone_key",
    "tombstone_rows", "tombstoned",
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


def outcome(subject: Subject, procedure_id: str, success: bool, reward: float | None,
            at_us: int) -> Query:  # fmt: skip
    """Count one outcome of the subject's procedure ``procedure_id`` (nothing when it
    is not one of the subject's procedural records)."""
    cond, params = subject.sql()
    sql = (
        "INSERT INTO procedure_stats (tenant_id, procedure_id, user_id, successes, failures,"
        " reward_total, rewards, updated_at)"
        " SELECT r.tenant_id, r.id, r.user_id, :wins, :losses, :reward, :rewards, :at"
        f" FROM records r WHERE r.id = :procedure AND r.tier = 'procedural' AND {cond}"
        " ON CONFLICT (tenant_id, procedure_id) DO UPDATE SET"
        " successes = successes + excluded.successes, failures = failures + excluded.failures,"
        " reward_total = reward_total + excluded.reward_total,"
        " rewards = rewards + excluded.rewards, updated_at = max(updated_at, excluded.updated_at)"
    )
    return sql, {**params, "procedure": procedure_id, "wins": int(success),
                 "losses": int(not success), "reward": reward or 0.0,
                 "rewards": int(reward is not None), "at": at_us}  # fmt: skip


def outcomes(vis: Visibility, ids: Sequence[str]) -> Query:
    """Counted outcomes of the visible records among ``ids``."""
    cond, params = vis.sql()
    tenant, tenant_params = Tenant(vis.tenant_id).sql("s")
    sql = (
        "SELECT s.procedure_id, s.successes, s.failures, s.reward_total, s.rewards"
        " FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value"
        f" JOIN procedure_stats s ON s.procedure_id = r.id AND {tenant}"
        f" WHERE {cond}"
    )
    return sql, {**params, **tenant_params, "ids": json.dumps(list(ids))}


def mark_consolidated(subject: Subject, ids: Sequence[str], at_us: int) -> Query:
    """Mark the subject's records among ``ids`` as read by consolidation (once)."""
    cond, params = subject.sql()
    sql = (
        "INSERT OR IGNORE INTO consolidated (tenant_id, user_id, episode_id, at)"
        " SELECT r.tenant_id, r.user_id, r.id, :at FROM json_each(:ids) j"
        f" CROSS JOIN records r ON r.id = j.value WHERE {cond}"
    )
    return sql, {**params, "ids": json.dumps(list(ids)), "at": at_us}


def reconsolidate(tenant: Tenant, ids: Sequence[str], summary_type: str) -> Query:
    """Delete the consolidation marks of the episodes the tenant's summaries among
    ``ids`` (records of ``summary_type``) were derived from."""
    cond, params = tenant.sql()
    marks, _ = tenant.sql("c")
    sql = (
        f"DELETE FROM consolidated AS c WHERE {marks} AND c.episode_id IN ("
        " SELECT d.value FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value"
        f" CROSS JOIN json_each(r.derived_from) d WHERE {cond} AND r.type = :summary_type)"
    )
    return sql, {**params, "ids": json.dumps(list(ids)), "summary_type": summary_type}


def subject_users(tenant: Tenant) -> Query:
    """The owners of a tenant's records, in order ('' stands for its global records)."""
    cond, params = tenant.sql()
    return f"SELECT DISTINCT r.user_id FROM records r WHERE {cond} ORDER BY r.user_id", params


def subject_records(
    subject: Subject, types: Sequence[str], statuses: Sequence[str], before_us: int,
    at_us: int, limit: int, after: tuple[int, str] | None, unconsolidated: bool,
) -> Query:  # fmt: skip
    """One page of a subject's records, oldest observed first (``contract.SubjectScan``)."""
    cond, params = subject.sql()
    marked, _ = subject.sql("c")
    sql = (
        f"SELECT {_COLS} FROM records r WHERE {cond}"
        " AND r.type IN (SELECT value FROM json_each(:types))"
        " AND r.status IN (SELECT value FROM json_each(:statuses))"
        " AND r.observed_at < :before AND (r.expires_at IS NULL OR r.expires_at > :at)"
        " AND (r.observed_at > :after_at OR (r.observed_at = :after_at AND r.id > :after_id))"
        " AND (:every = 1 OR NOT EXISTS (SELECT 1 FROM consolidated c"
        f" WHERE {marked} AND c.episode_id = r.id))"
        " ORDER BY r.observed_at, r.id LIMIT :limit"
    )
    after_at, after_id = after if after is not None else (-(2**63), "")
    return sql, {**params, "types": json.dumps(list(types)), "statuses": json.dumps(list(statuses)),
                 "before": before_us, "at": at_us, "after_at": after_at, "after_id": after_id,
                 "every": int(not unconsolidated), "limit": limit}  # fmt: skip


def take_lease(subject: Subject, holder: str, wall_us: int, until_us: int) -> Query:
    """Take (or renew) the subject's lease unless another holder's is still running."""
    _, params = subject.sql("k")
    sql = (
        "INSERT INTO consolidation_runs (tenant_id, user_id, holder, lease_until)"
        " VALUES (:subj_tenant, :subj_user, :holder, :until)"
        " ON CONFLICT (tenant_id, user_id) DO UPDATE SET holder = excluded.holder,"
        " lease_until = excluded.lease_until"
        " WHERE consolidation_runs.holder IN ('', excluded.holder)"
        " OR consolidation_runs.lease_until <= :wall"
    )
    return sql, {**params, "holder": holder, "until": until_us, "wall": wall_us}


def lease_row(subject: Subject) -> Query:
    """The subject's lease holder and the ``now`` of its last finished run."""
    cond, params = subject.sql("k")
    return f"SELECT k.holder, k.last_run FROM consolidation_runs k WHERE {cond}", params


def end_lease(subject: Subject, holder: str, last_us: int | None) -> Query:
    """Release ``holder``'s lease; record ``last_us`` as the last run (never earlier)."""
    cond, params = subject.sql("k")
    sql = (
        "UPDATE consolidation_runs AS k SET holder = '', lease_until = 0,"
        " last_run = CASE WHEN :last IS NULL THEN k.last_run"
        " WHEN k.last_run IS NULL OR k.last_run < :last THEN :last ELSE k.last_run END"
        f" WHERE {cond} AND k.holder = :holder"
    )
    return sql, {**params, "holder": holder, "last": last_us}
