"""SQL builders of the SQLite store's maintenance: meta, audit, counters, erasure.

Administrative reads are scoped by ``Subject`` or ``Tenant``; ``holding`` alone
reads across tenants, and returns no record (see its docstring).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.store.predicate import Subject, Tenant
from engram.store.rows import COLUMNS

__all__ = [
    "AUDIT_ALL", "AUDIT_INSERT", "AUDIT_LAST", "DELETE_VECTORS", "META_DELETE", "META_GET",
    "META_SET", "audit_key", "audit_of", "derived_from", "erasure_strings",
    "forget_audit_key", "forget_counters", "holding", "iter_all", "new_audit_key",
    "partition_counters", "residue", "subject_counts", "subject_ids", "subject_traces",
    "successors",
]  # fmt: skip

Query = tuple[str, dict[str, Any]]
COUNTER_TABLES = ("partition_state", "lexical_state")

META_GET = "SELECT value FROM meta WHERE key = :key"
META_SET = (
    "INSERT INTO meta (key, value) VALUES (:key, :value)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
META_DELETE = "DELETE FROM meta WHERE key = :key"
DELETE_VECTORS = "DELETE FROM vectors"
AUDIT_LAST = "SELECT hash FROM audit ORDER BY seq DESC LIMIT 1"
AUDIT_INSERT = (
    "INSERT INTO audit (at, tenant_id, user_id, actor, operation, record_ids, reason,"
    " prev_hash, hash) VALUES (:at, :tenant, :user, :actor, :op, :ids, :reason,"
    " :prev, :hash)"
)
AUDIT_ALL = "SELECT * FROM audit ORDER BY seq"


def _json(values: Sequence[str]) -> str:
    return json.dumps(list(values))


def new_audit_key(subject: Subject, key: bytes) -> Query:
    """Give the subject a pseudonym key unless it has one."""
    _, params = subject.sql("k")
    sql = (
        "INSERT INTO audit_subjects (tenant_id, user_id, key)"
        " VALUES (:subj_tenant, :subj_user, :key) ON CONFLICT DO NOTHING"
    )
    return sql, {**params, "key": key}


def audit_key(subject: Subject) -> Query:
    """The subject's pseudonym key."""
    cond, params = subject.sql("k")
    return f"SELECT k.key FROM audit_subjects k WHERE {cond}", params


def forget_audit_key(subject: Subject) -> Query:
    """Delete the subject's pseudonym key."""
    cond, params = subject.sql("k")
    return f"DELETE FROM audit_subjects AS k WHERE {cond}", params


def audit_of(subject: Subject) -> Query:
    """The audit entries written under the subject's (stored) user name."""
    cond, params = subject.sql("a")
    return f"SELECT * FROM audit a WHERE {cond} ORDER BY a.seq", params


def forget_counters(subject: Subject) -> list[Query]:
    """Delete the subject's rows of the partition counter tables and its consolidation
    run (lease) row."""
    cond, params = subject.sql("p")
    return [(f"DELETE FROM {table} AS p WHERE {cond}", params)
            for table in (*COUNTER_TABLES, "consolidation_runs")]  # fmt: skip


def partition_counters(subject: Subject) -> list[Query]:
    """The subject's rows of the partition counter tables, table by table."""
    cond, params = subject.sql("p")
    return [(f"SELECT p.user_id FROM {table} p WHERE {cond}", params) for table in COUNTER_TABLES]


SUBJECT_TABLES = (
    ("records", "r"), ("vectors", "v"), ("traces", "t"), ("procedure_stats", "s"),
    ("consolidated", "c"), ("consolidation_runs", "k"),
)  # fmt: skip


def subject_counts(subject: Subject) -> list[Query]:
    """Counts of the subject's rows in records, vectors, traces and the lifecycle tables."""
    out = []
    for table, alias in SUBJECT_TABLES:
        cond, params = subject.sql(alias)
        out.append((f"SELECT count(*) FROM {table} {alias} WHERE {cond}", params))
    return out


def subject_traces(subject: Subject) -> Query:
    """Delete the subject's stored traces."""
    cond, params = subject.sql("t")
    return f"DELETE FROM traces AS t WHERE {cond}", params


def iter_all(last: int, batch: int) -> Query:
    """The next ``batch`` records after rowid ``last`` (index rebuild: every tenant)."""
    sql = (
        f"SELECT {', '.join(COLUMNS)}, rowid AS rid FROM records"
        " WHERE rowid > :last ORDER BY rowid LIMIT :n"
    )
    return sql, {"last": last, "n": batch}


def subject_ids(subject: Subject) -> Query:
    """Ids of every record of one subject (administrative erasure)."""
    cond, params = subject.sql()
    return f"SELECT r.id FROM records r WHERE {cond}", params


def derived_from(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Ids of records in the tenant derived from any of ``ids`` (derived copies)."""
    cond, params = tenant.sql()
    sql = (
        "SELECT DISTINCT r.id FROM records r, json_each(r.derived_from) j"
        f" WHERE {cond} AND r.derived_from <> '[]'"
        " AND j.value IN (SELECT value FROM json_each(:ids))"
    )
    return sql, {**params, "ids": _json(ids)}


def erasure_strings(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Content, key, stored value and source reference of the tenant's records among
    ``ids``: the texts an erasure then looks for in the database files."""
    cond, params = tenant.sql()
    sql = (
        "SELECT r.content, r.key, r.value, r.source_ref FROM json_each(:ids) j"
        f" CROSS JOIN records r ON r.id = j.value WHERE {cond}"
    )
    return sql, {**params, "ids": _json(ids)}


def successors(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Ids of the tenant's records that supersede any of ``ids``."""
    cond, params = tenant.sql()
    sql = (
        "SELECT r.id FROM records r WHERE r.supersedes IN (SELECT value FROM json_each(:ids))"
        f" AND {cond}"
    )
    return sql, {**params, "ids": _json(ids)}


def holding(window: str) -> Query:
    """One row if a record of any tenant still holds ``window`` in a text column: an
    erased text found in the file that a surviving record explains. Deliberately
    across tenants (a file byte belongs to no tenant); it returns no record."""
    sql = (
        "SELECT 1 FROM records r WHERE instr(r.content, :w) OR instr(r.key, :w)"
        " OR instr(r.value, :w) OR instr(r.source_ref, :w) LIMIT 1"
    )
    return sql, {"w": window}


def residue(tenant: Tenant, ids: Sequence[str]) -> dict[str, Query]:
    """Counts of rows still naming any of ``ids``: records, vectors, stored traces."""
    cond_r, params = tenant.sql("r")
    cond_v, _ = tenant.sql("v")
    cond_t, _ = tenant.sql("t")
    each = "json_each(:ids) j CROSS JOIN"
    queries = {
        "records rows": f"SELECT count(*) FROM {each} records r ON r.id = j.value WHERE {cond_r}",
        "vectors rows": (
            f"SELECT count(*) FROM {each} vectors v ON v.record_id = j.value WHERE {cond_v}"
        ),
        "contest links": (
            "SELECT count(*) FROM records r WHERE"
            f" r.contested_with IN (SELECT value FROM json_each(:ids)) AND {cond_r}"
        ),
        "traces rows": (
            "SELECT count(*) FROM traces t WHERE"
            f" {cond_t} AND EXISTS (SELECT 1 FROM json_each(t.ids) n"
            " WHERE n.value IN (SELECT value FROM json_each(:ids)))"
        ),
    }
    bound = {**params, "ids": _json(ids)}
    return {name: (sql, bound) for name, sql in queries.items()}
