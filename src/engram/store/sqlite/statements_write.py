"""SQL builders of the SQLite store's changes (``Store.apply``).

Rows come from ``rows.record_to_row``; deletions and usage updates are scoped by
a predicate value (``Tenant``, ``Visibility``), like every read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.store.dialect import SQLITE
from engram.store.predicate import Tenant, Visibility
from engram.store.renewal import access_renewal
from engram.store.rows import COLUMNS

__all__ = [
    "INSERT", "MUTABLE", "PLACE", "PLACEMENT", "PUT_VECTOR", "RENEWED_EXPIRY", "UPDATE",
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


RENEWED_EXPIRY = access_renewal(SQLITE)  # ``store.renewal``: coalesced within 1 % of the period


def touch(vis: Visibility) -> tuple[str, dict[str, Any]]:
    """Count one access of each visible record among ``:ids`` at ``:now`` and restart
    its retention period (``store.renewal``: recalls close together renew once). The text depends
    only on the predicate's shape, so a flush runs it once per shape for every touch."""
    cond, params = vis.sql()
    sql = (
        "UPDATE records SET access_count = access_count + 1, last_accessed_at = :now,"
        f" expires_at = {RENEWED_EXPIRY}"
        " WHERE rowid IN (SELECT r.rowid FROM json_each(:ids) j CROSS JOIN records r"
        f" ON r.id = j.value WHERE {cond})"
    )
    return sql, params
