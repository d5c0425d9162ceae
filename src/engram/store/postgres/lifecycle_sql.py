"""SQL builders of the PostgreSQL store's lifecycle tables (migration 0007).

The same statements as ``engram.store.sqlite.statements_lifecycle``, in this
dialect: arrays bound with ``= ANY``, ``ON CONFLICT`` upserts. Every one is scoped
by a predicate value and names one tenant (``docs/sharding.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.store.dialect import POSTGRES
from engram.store.postgres.sql import COLUMNS_PG, Query
from engram.store.predicate import Subject, Tenant, Visibility

__all__ = [
    "end_lease", "lease_row", "mark_consolidated", "outcome", "outcomes", "reconsolidate",
    "subject_records", "subject_users", "take_lease",
]  # fmt: skip

_COLS = ", ".join(f"r.{column}" for column in COLUMNS_PG)


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
