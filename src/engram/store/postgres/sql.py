"""SQL builders for PostgreSQL: pure functions from requests to ``(sql, params)``.

Every ownership condition comes from ``engram.store.predicate`` rendered for
``POSTGRES``; no builder writes one of its own. Lists are bound as arrays
(``= ANY(%(ids)s)``), so the SQL text is constant whatever their length and the
server keeps one prepared plan per builder. Queries that want index order (newest
first) run one arm per visibility branch under ``UNION ALL``, as the SQLite
builders do: an ``OR`` over both branches defeats the index order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.store.accesses import Accesses
from engram.store.dialect import POSTGRES
from engram.store.predicate import OwnerSlot, Subject, Tenant, Visibility
from engram.store.renewal import access_renewal
from engram.store.rows import COLUMNS

__all__ = [
    "COLUMNS_PG", "INSERT", "INSERT_MANY", "INSERT_ROWS", "Query", "by_ids", "by_key",
    "derived_ids", "erasure_strings", "history", "insert_many", "keyed", "lexical", "listing",
    "neighbours", "recent", "residue", "slot_by_hash", "slot_by_key", "successors", "touch",
    "unlink_contests",
]  # fmt: skip

Query = tuple[str, dict[str, Any]]

# ``fts_owner`` is a leftover of SQLite's removed FTS5 index; PostgreSQL never had it.
assert COLUMNS[-1] == "fts_owner"
COLUMNS_PG: tuple[str, ...] = COLUMNS[:-1]
_COLS = ", ".join(f"r.{column}" for column in COLUMNS_PG)
SELECT = f"SELECT {_COLS} FROM records r"
_STATUS = "r.status = ANY(%(statuses)s::text[])"

INSERT = (
    f"INSERT INTO records ({', '.join(COLUMNS_PG)}, embedding) VALUES ("
    + ", ".join(f"%({column})s" for column in COLUMNS_PG)
    + ", %(embedding)s)"
)
# The column types of ``records`` that are not text (schema migration 0003).
_NOT_TEXT = {
    "confidence": "float8", "importance": "float8", "version": "integer",
    "access_count": "integer", "private": "smallint", "observed_at": "bigint",
    "valid_from": "bigint", "valid_to": "bigint", "created_at": "bigint",
    "updated_at": "bigint", "expires_at": "bigint", "last_accessed_at": "bigint",
}  # fmt: skip
# Many records in one statement: one array per column, so the text is the same for
# any number of rows (and never meets the 65,535 bound parameters limit).
# ``INSERT_ROWS`` bounds the rows of one such statement: each row's HNSW insert
# took up to 13 ms in a loaded 100K store, so a 500-row batch in one statement ran
# past the 5 s ``statement_timeout_ms`` on a loaded machine; 100 rows stay near 1 s.
# The vectors go in binary (``%(embedding)b``): their text form, 384 numbers each
# written out by pgvector in Python, took 65-90 ms of a 100-row insert, binary 16.
INSERT_ROWS = 100
INSERT_MANY = (
    f"INSERT INTO records ({', '.join(COLUMNS_PG)}, embedding) SELECT * FROM unnest("
    + ", ".join(f"%({column})s::{_NOT_TEXT.get(column, 'text')}[]" for column in COLUMNS_PG)
    + ", %(embedding)b::vector[])"
)


def insert_many(rows: Sequence[dict[str, Any]]) -> Query:
    """``INSERT_MANY`` for ``rows`` (as ``INSERT`` takes them, one dict per record)."""
    return INSERT_MANY, {column: [row[column] for row in rows]
                         for column in (*COLUMNS_PG, "embedding")}  # fmt: skip


def _cond(vis: Visibility, alias: str = "r") -> tuple[str, dict[str, Any]]:
    return vis.sql(alias, POSTGRES)


def by_ids(vis: Visibility, ids: Sequence[str]) -> Query:
    """Visible records among ``ids`` (order not preserved)."""
    cond, params = _cond(vis)
    return f"{SELECT} WHERE r.id = ANY(%(ids)s::text[]) AND {cond}", {**params, "ids": list(ids)}


# A record's status as callers see it at %(now)s: active or disputed past its
# retention reads as expired (until the lifecycle sweep removes it).
EFFECTIVE_STATUS = (
    "CASE WHEN r.status IN ('active', 'disputed') AND r.expires_at IS NOT NULL"
    " AND r.expires_at <= %(now)s THEN 'expired' ELSE r.status END"
)


def listing(
    vis: Visibility, type_name: str | None, statuses: Sequence[str], limit: int | None,
    offset: int, now_us: int | None,
) -> Query:  # fmt: skip
    """Visible records newest first; ``statuses`` empty means all; statuses as of
    ``now_us`` when given (stored statuses when None)."""
    cond, params = _cond(vis)
    status = "r.status" if now_us is None else EFFECTIVE_STATUS
    sql = (
        f"{SELECT} WHERE {cond}"
        f" AND (cardinality(%(statuses)s::text[]) = 0 OR {status} = ANY(%(statuses)s::text[]))"
        " AND (%(type)s::text IS NULL OR r.type = %(type)s::text)"
        " ORDER BY r.created_at DESC, r.id DESC LIMIT %(limit)s OFFSET %(offset)s"
    )
    extra = {"statuses": list(statuses), "type": type_name, "limit": limit, "offset": offset,
             "now": now_us}  # fmt: skip
    return sql, {**params, **extra}


def history(vis: Visibility, record_id: str) -> Query:
    """Every visible version of the fact ``record_id`` is one of, oldest first: the
    records linked to it through ``supersedes`` and ``superseded_by``, in either
    direction and transitively, so a fact merged into another (superseded by it,
    which supersedes something else) is a version of the survivor too."""
    cond, params = _cond(vis)
    sql = f"""
    WITH RECURSIVE
      chain(id, back, fwd) AS (
        SELECT r.id, r.supersedes, r.superseded_by FROM records r
        WHERE r.id = %(id)s AND {cond}
        UNION SELECT r.id, r.supersedes, r.superseded_by FROM chain c JOIN records r
          ON r.id = c.back OR r.id = c.fwd OR r.superseded_by = c.id
        WHERE {cond})
    {SELECT} WHERE r.id IN (SELECT id FROM chain) AND {cond}
    ORDER BY r.version, r.created_at, r.id"""
    return sql, {**params, "id": record_id}


def _union(vis: Visibility, arm: str, order: str) -> Query:
    """``arm`` (with ``{cond}``) once per visibility branch, each index-ordered and
    limited, then merged, ordered and limited again."""
    arms = []
    params: dict[str, Any] = {}
    for cond, branch_params in vis.branches("r", POSTGRES):
        arms.append(f"({arm.format(cond=cond)} ORDER BY {order} LIMIT %(limit)s)")
        params.update(branch_params)
    unqualified = order.replace("r.", "")
    return " UNION ALL ".join(arms) + f" ORDER BY {unqualified} LIMIT %(limit)s", params


def by_key(vis: Visibility, keys: Sequence[str], statuses: Sequence[str], limit: int) -> Query:
    """Visible records whose key is one of ``keys``, newest created first."""
    arm = f"{SELECT} WHERE {{cond}} AND r.key = ANY(%(keys)s::text[]) AND {_STATUS}"
    sql, params = _union(vis, arm, "r.created_at DESC, r.id DESC")
    return sql, {**params, "keys": list(keys), "statuses": list(statuses), "limit": limit}


def keyed(
    vis: Visibility, types: Sequence[str] | None, statuses: Sequence[str], limit: int
) -> Query:
    """Keyed records (of ``types`` when given), most recently observed first."""
    types_cond = "" if types is None else " AND r.type = ANY(%(types)s::text[])"
    arm = f"{SELECT} WHERE {{cond}} AND r.key IS NOT NULL{types_cond} AND {_STATUS}"
    sql, params = _union(vis, arm, "r.observed_at DESC, r.id DESC")
    extra = {"statuses": list(statuses), "limit": limit, "types": list(types or ())}
    return sql, {**params, **extra}


def recent(
    vis: Visibility, types: Sequence[str] | None, statuses: Sequence[str], limit: int
) -> Query:
    """The most recently observed visible records (of ``types`` when given)."""
    types_cond = "" if types is None else " AND r.type = ANY(%(types)s::text[])"
    arm = f"{SELECT} WHERE {{cond}}{types_cond} AND {_STATUS}"
    sql, params = _union(vis, arm, "r.observed_at DESC, r.id DESC")
    extra = {"statuses": list(statuses), "limit": limit, "types": list(types or ())}
    return sql, {**params, **extra}


def lexical(
    vis: Visibility, config: str, query: str, statuses: Sequence[str], limit: int,
    rank_rows: int | None = None,
) -> Query:  # fmt: skip
    """Records matching any term of ``query`` (``websearch_to_tsquery`` syntax, terms
    joined by ``or``), ranked by ``ts_rank`` with length normalisation. ``config``
    is the schema's text search configuration (a checked identifier), so the
    text is constant for a store. The rank reads only the record itself: no
    statistic over other tenants' rows reaches a score.

    The cost is one heap visit and one ``ts_rank`` per match, so ``rank_rows``
    (None: no bound) bounds the matches ranked: the first found in storage order,
    which are all of them when the caller has no more. Only the ids and scores
    are ranked; the columns are read for the best ``limit`` alone (carrying every
    column of every match through the sort cost a third of the time at 20K
    matches)."""
    cond, params = _cond(vis)
    sql = (
        f"WITH q AS (SELECT websearch_to_tsquery('{config}'::regconfig, %(query)s) AS q),"
        " m AS (SELECT r.id, r.lexemes FROM records r, q"
        f" WHERE r.lexemes @@ q.q AND {cond} AND {_STATUS} LIMIT %(rank_rows)s),"
        " best AS (SELECT m.id, ts_rank(m.lexemes, q.q, 1) AS score FROM m, q"
        " ORDER BY score DESC, m.id LIMIT %(limit)s)"
        f" SELECT {_COLS}, b.score FROM best b JOIN records r ON r.id = b.id WHERE {cond}"
        " ORDER BY b.score DESC, r.id"
    )
    extra = {"query": query, "statuses": list(statuses), "limit": limit, "rank_rows": rank_rows}
    return sql, {**params, **extra}


def neighbours(
    vis: Visibility, anchors: Sequence[tuple[str, int]], types: Sequence[str],
    statuses: Sequence[str], gap: int, per_side: int,
) -> Query:  # fmt: skip
    """For each anchor ``(scope, at)``, the ``per_side`` visible records of ``types``
    in that scope observed just before and just after ``at`` (within ``gap``
    microseconds), in one statement: per side, one lateral subquery whose arms
    (one per visibility branch) walk the (tenant, user, observed_at) index."""
    params: dict[str, Any] = {}
    sides = (
        ("x.observed_at < a.at AND x.observed_at >= a.at - %(gap)s", " DESC"),
        ("x.observed_at > a.at AND x.observed_at <= a.at + %(gap)s", ""),
    )
    picks = []
    for where, order in sides:
        arms = []
        for cond, branch_params in vis.branches("x", POSTGRES):
            params.update(branch_params)
            arms.append(
                f"(SELECT x.id, x.observed_at AS at FROM records x WHERE {cond}"
                " AND x.scope = a.scope AND x.status = ANY(%(statuses)s::text[])"
                f" AND x.type = ANY(%(types)s::text[]) AND {where}"
                f" ORDER BY x.observed_at{order}, x.id{order} LIMIT %(per_side)s)"
            )
        nearest = f"{' UNION ALL '.join(arms)} ORDER BY at{order}, id{order} LIMIT %(per_side)s"
        picks.append(f"SELECT n.id FROM a CROSS JOIN LATERAL ({nearest}) n")
    outer, outer_params = _cond(vis)
    sql = (
        "WITH a(scope, at) AS (SELECT * FROM unnest(%(scopes)s::text[], %(ats)s::bigint[])),"
        f" hits(id) AS ({' UNION '.join(picks)})"
        f" SELECT {_COLS} FROM hits h JOIN records r ON r.id = h.id WHERE {outer}"
        " ORDER BY r.observed_at, r.id"
    )
    extra = {"scopes": [a[0] for a in anchors], "ats": [a[1] for a in anchors],
             "statuses": list(statuses), "types": list(types), "gap": gap,
             "per_side": per_side}  # fmt: skip
    return sql, {**params, **outer_params, **extra}


def slot_by_key(slot: OwnerSlot, key: str, statuses: Sequence[str]) -> Query:
    """Versions of ``key`` a write to ``slot`` meets, newest version first."""
    cond, params = slot.key_sql("r", POSTGRES)
    sql = f"{SELECT} WHERE {cond} AND r.key = %(key)s AND {_STATUS} ORDER BY r.version DESC, r.id"
    return sql, {**params, "key": key, "statuses": list(statuses)}


def slot_by_hash(slot: OwnerSlot, content_hash: str, statuses: Sequence[str]) -> Query:
    """Records of the slot with the same normalised content."""
    cond, params = slot.key_sql("r", POSTGRES)
    sql = f"{SELECT} WHERE {cond} AND r.content_hash = %(hash)s AND {_STATUS} ORDER BY r.id"
    return sql, {**params, "hash": content_hash, "statuses": list(statuses)}


_RENEWAL = access_renewal(POSTGRES, "r.", "u.at")


def touch(accesses: Accesses) -> Query:
    """Add ``accesses`` (each id once: ``store.accesses``) to the records among them
    the visibility may read: the count, the latest access time (``GREATEST``: never
    moved back; it ignores NULL) and the retention renewed from it
    (``store.renewal``: accesses close together renew once). One statement for a
    flush's accesses under one visibility; the arrays are bound, the text constant."""
    cond, params = _cond(accesses.vis)
    sql = (
        "UPDATE records AS r SET access_count = r.access_count + u.n,"
        f" last_accessed_at = GREATEST(r.last_accessed_at, u.at), expires_at = {_RENEWAL}"
        " FROM unnest(%(ids)s::text[], %(counts)s::int[], %(ats)s::bigint[]) AS u(id, n, at)"
        f" WHERE r.id = u.id AND {cond}"
    )
    extra = {"ids": list(accesses.ids), "counts": list(accesses.counts),
             "ats": list(accesses.ats)}  # fmt: skip
    return sql, {**params, **extra}


def unlink_contests(tenant: Tenant, ids: Sequence[str], now_us: int) -> Query:
    """End the contest links of the tenant's surviving records naming any of ``ids``."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = (
        "UPDATE records AS r SET contested_with = NULL, updated_at = %(now)s"
        " WHERE r.contested_with = ANY(%(ids)s::text[]) AND NOT (r.id = ANY(%(ids)s::text[]))"
        f" AND {cond}"
    )
    return sql, {**params, "ids": list(ids), "now": now_us}


def delete(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Delete the tenant's records among ``ids`` and remember their ids (``forgotten``);
    one row: how many were deleted."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = (
        f"WITH gone AS (DELETE FROM records AS r WHERE r.id = ANY(%(ids)s::text[]) AND {cond}"
        " RETURNING r.tenant_id, r.id),"
        " kept AS (INSERT INTO forgotten (tenant_id, id) SELECT tenant_id, id FROM gone"
        " ON CONFLICT DO NOTHING)"
        " SELECT count(*) FROM gone"
    )
    return sql, {**params, "ids": list(ids)}


def forgotten(tenant: Tenant, ids: Sequence[str]) -> Query:
    """The ids among ``ids`` of the tenant's deleted records."""
    cond, params = tenant.sql("f", POSTGRES)
    sql = f"SELECT f.id FROM forgotten f WHERE f.id = ANY(%(ids)s::text[]) AND {cond}"
    return sql, {**params, "ids": list(ids)}


def hold_versions(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Share-lock the tenant's records among ``ids`` (versions about to be
    superseded) until commit: a concurrent deletion waits for this transaction, or
    committed first and left its id in ``forgotten``. One row: the ids locked, and
    the ids among ``ids`` in ``forgotten`` as of the statement's snapshot (a
    deletion that committed while the lock waited is missing from both: the
    caller reads ``forgotten`` again)."""
    cond, params = tenant.sql("r", POSTGRES)
    gone, _ = tenant.sql("f", POSTGRES)
    sql = (
        f"WITH held AS (SELECT r.id FROM records r WHERE r.id = ANY(%(ids)s::text[]) AND {cond}"
        " FOR KEY SHARE)"
        " SELECT (SELECT array_agg(h.id) FROM held h),"
        " (SELECT coalesce(array_agg(f.id), '{}') FROM forgotten f"
        f" WHERE f.id = ANY(%(ids)s::text[]) AND {gone})"
    )
    return sql, {**params, "ids": list(ids)}


def subject_ids(subject: Subject) -> Query:
    """Ids of every record of one subject."""
    cond, params = subject.sql("r", POSTGRES)
    return f"SELECT r.id FROM records r WHERE {cond} ORDER BY r.id", params


def derived_ids(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Ids of the tenant's records derived from any of ``ids``."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = (
        f"SELECT r.id FROM records r WHERE {cond} AND r.derived_from <> '[]'"
        " AND r.derived_from::jsonb ?| %(ids)s::text[] ORDER BY r.id"
    )
    return sql, {**params, "ids": list(ids)}


def successors(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Ids of the tenant's records that supersede any of ``ids``."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = f"SELECT r.id FROM records r WHERE r.supersedes = ANY(%(ids)s::text[]) AND {cond}"
    return sql, {**params, "ids": list(ids)}


def erasure_strings(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Content, key, stored value and source reference of the tenant's ``ids``."""
    cond, params = tenant.sql("r", POSTGRES)
    sql = (
        "SELECT r.content, r.key, r.value, r.source_ref FROM records r"
        f" WHERE r.id = ANY(%(ids)s::text[]) AND {cond}"
    )
    return sql, {**params, "ids": list(ids)}


def residue(tenant: Tenant, ids: Sequence[str]) -> dict[str, Query]:
    """Counts of rows still naming any of ``ids``: records, vectors, contest links,
    stored traces (the SQLite store's check names)."""
    cond_r, params = tenant.sql("r", POSTGRES)
    cond_t, _ = tenant.sql("t", POSTGRES)
    queries = {
        "records rows": f"SELECT count(*) FROM records r WHERE r.id = ANY(%(ids)s) AND {cond_r}",
        "vectors rows": (
            "SELECT count(*) FROM records r WHERE r.id = ANY(%(ids)s)"
            f" AND r.embedding IS NOT NULL AND {cond_r}"
        ),
        "contest links": (
            f"SELECT count(*) FROM records r WHERE r.contested_with = ANY(%(ids)s) AND {cond_r}"
        ),
        "traces rows": f"SELECT count(*) FROM traces t WHERE t.ids && %(ids)s AND {cond_t}",
    }
    bound = {**params, "ids": list(ids)}
    return {
        name: (sql.replace("%(ids)s", "%(ids)s::text[]"), bound) for name, sql in queries.items()
    }
