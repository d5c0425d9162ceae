"""SQL builders of the SQLite store's changes (``Store.apply``).

Rows come from ``rows.record_to_row``; deletions and usage updates are scoped by
a predicate value (``Tenant``, ``Visibility``), like every read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from engram.store.dialect import SQLITE
from engram.store.predicate import Tenant, Visibility
from engram.store.renewal import access_renewal
from engram.store.rows import COLUMNS

__all__ = [
    "ACCESSES_IN_ONE", "INSERT", "MUTABLE", "PLACE", "PLACEMENT", "PUT_VECTOR", "UPDATE",
    "delete", "touch", "unlink_contests",
]  # fmt: skip

Query = tuple[str, dict[str, Any]]

INSERT = (
    f"INSERT INTO records ({', '.join(COLUMNS)}) "
    f"VALUES ({', '.join(':' + column for column in COLUMNS)})"
)
MUTABLE = (
    "status", "valid_to", "superseded_by", "contested_with", "updated_at", "confidence",
    "observed_at", "expires_at", "access_count", "last_accessed_at", "embedding_model",
)  # fmt: skip
PLACEMENT = (
    "version", "supersedes", "created_at", "expires_at", "source_kind", "source_ref",
    "derived_from",
)  # fmt: skip
# An update names its record by id within the record's own tenant (the predicate's
# ``Tenant`` condition), so a change carrying a foreign id changes nothing.
_OWN_TENANT = Tenant("").sql("records")[0]
PLACE = (
    "UPDATE records SET "
    + ", ".join(f"{column} = :{column}" for column in PLACEMENT)
    + f" WHERE id = :id AND {_OWN_TENANT}"
)
UPDATE = (
    "UPDATE records SET "
    + ", ".join(f"{column} = :{column}" for column in MUTABLE)
    + f" WHERE id = :id AND {_OWN_TENANT}"
)
PUT_VECTOR = (
    "INSERT OR REPLACE INTO vectors (record_id, tenant_id, user_id, model, vector)"
    " VALUES (:id, :tenant, :user, :model, :vector)"
)


def delete(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Hard-delete the tenant's records among ``ids`` (triggers remove their vectors,
    count the removals and remember the ids as forgotten)."""
    cond, params = tenant.sql()
    sql = f"DELETE FROM records AS r WHERE r.id IN (SELECT value FROM json_each(:ids)) AND {cond}"
    return sql, {**params, "ids": json.dumps(list(ids))}


def unlink_contests(tenant: Tenant, ids: Sequence[str], now_us: int) -> Query:
    """End the contest (or dispute) links of the tenant's surviving records that name
    any of ``ids`` (erased records): the partner is no longer contested by anything."""
    cond, params = tenant.sql()
    sql = (
        "UPDATE records AS r SET contested_with = NULL, updated_at = :now"
        " WHERE r.contested_with IN (SELECT value FROM json_each(:ids))"
        f" AND r.id NOT IN (SELECT value FROM json_each(:ids)) AND {cond}"
    )
    return sql, {**params, "ids": json.dumps(list(ids)), "now": now_us}


# ``UPDATE ... FROM`` came in SQLite 3.33 and the MATERIALIZED hint, without which
# the planner scanned every record for each access, in 3.35; before, one statement
# per record.
ACCESSES_IN_ONE = sqlite3.sqlite_version_info >= (3, 35)
_SET_ACCESSES = (
    "access_count = {t}access_count + {n}, last_accessed_at = CASE WHEN"
    " {t}last_accessed_at >= {at} THEN {t}last_accessed_at ELSE {at} END, expires_at = {renewed}"
)
_RENEWED_FROM_U = access_renewal(SQLITE, "t.", "u.at")  # ``store.renewal``
_RENEWED_FROM_AT = access_renewal(SQLITE, "", ":at")


def touch(vis: Visibility) -> tuple[str, dict[str, Any]]:
    """Add the accesses of ``:accesses`` (a JSON list of ``[id, count, at]``, each id
    once: ``store.accesses``) to the records among them that ``vis`` may read: the
    count, the latest access time (never moved back) and the retention renewed from
    it (``store.renewal``: accesses close together renew once). One statement for a
    flush's accesses under one visibility; the text depends only on the predicate's
    shape. Needs ``ACCESSES_IN_ONE``."""
    cond, params = vis.sql()
    sql = (
        "WITH u AS MATERIALIZED (SELECT r.rowid AS rid, json_extract(j.value, '$[1]') AS n,"
        " json_extract(j.value, '$[2]') AS at FROM json_each(:accesses) j"
        f" CROSS JOIN records r ON r.id = json_extract(j.value, '$[0]') WHERE {cond})"
        " UPDATE records AS t SET "
        + _SET_ACCESSES.format(t="t.", n="u.n", at="u.at", renewed=_RENEWED_FROM_U)
        + " FROM u WHERE t.rowid = u.rid"
    )
    return sql, params


def touch_one(vis: Visibility) -> tuple[str, dict[str, Any]]:
    """``touch`` for one record (``:id``, ``:n`` accesses, the latest at ``:at``), run
    for each where ``ACCESSES_IN_ONE`` is false."""
    cond, params = vis.sql()
    sql = (
        "UPDATE records SET "
        + _SET_ACCESSES.format(t="", n=":n", at=":at", renewed=_RENEWED_FROM_AT)
        + f" WHERE rowid IN (SELECT r.rowid FROM records r WHERE r.id = :id AND {cond})"
    )
    return sql, params
