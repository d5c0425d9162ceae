"""SQL builders: pure functions from typed requests to ``(sql, params)``.

Each read takes a ``Visibility`` (or ``Subject``/``OwnerSlot``) from
``predicate`` and splices the condition it renders; no builder writes an
ownership condition of its own. Lists are bound as one JSON array and expanded
with ``json_each``, so the SQL text is constant whatever the list length.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram.store.predicate import OwnerSlot, Subject, Tenant, Visibility
from engram.store.rows import COLUMNS

__all__ = [
    "Query",
    "by_ids",
    "by_key",
    "derived_from",
    "export",
    "get",
    "history",
    "keyed",
    "lexical",
    "listing",
    "recent",
    "slot_by_hash",
    "slot_by_key",
    "subject_ids",
]

Query = tuple[str, dict[str, Any]]

SELECT = "SELECT " + ", ".join(f"r.{column}" for column in COLUMNS) + " FROM records r"
_STATUS = "r.status IN (SELECT value FROM json_each(:statuses))"


def _json(values: Sequence[str]) -> str:
    return json.dumps(list(values))


def get(vis: Visibility, record_id: str) -> Query:
    """One record by id, if visible."""
    cond, params = vis.sql()
    return f"{SELECT} WHERE r.id = :id AND {cond}", {**params, "id": record_id}


def by_ids(vis: Visibility, ids: Sequence[str]) -> Query:
    """Visible records among ``ids`` (order not preserved)."""
    cond, params = vis.sql()
    sql = f"{SELECT} WHERE r.id IN (SELECT value FROM json_each(:ids)) AND {cond}"
    return sql, {**params, "ids": _json(ids)}


def listing(
    vis: Visibility, type_name: str | None, statuses: Sequence[str], limit: int, offset: int
) -> Query:
    """Visible records, newest first, optionally of one type."""
    cond, params = vis.sql()
    sql = (
        f"{SELECT} WHERE {cond} AND {_STATUS} AND (:type IS NULL OR r.type = :type)"
        " ORDER BY r.created_at DESC, r.id DESC LIMIT :limit OFFSET :offset"
    )
    extra = {"statuses": _json(statuses), "type": type_name, "limit": limit, "offset": offset}
    return sql, {**params, **extra}


def history(vis: Visibility, record_id: str) -> Query:
    """The whole visible version chain through ``record_id``, oldest first."""
    cond, params = vis.sql()
    sql = f"""
    WITH RECURSIVE
      back(id, link) AS (
        SELECT r.id, r.supersedes FROM records r WHERE r.id = :id AND {cond}
        UNION SELECT r.id, r.supersedes FROM records r JOIN back b ON r.id = b.link
        WHERE {cond}),
      fwd(id, link) AS (
        SELECT r.id, r.superseded_by FROM records r WHERE r.id = :id AND {cond}
        UNION SELECT r.id, r.superseded_by FROM records r JOIN fwd f ON r.id = f.link
        WHERE {cond})
    {SELECT} WHERE r.id IN (SELECT id FROM back UNION SELECT id FROM fwd) AND {cond}
    ORDER BY r.version, r.created_at, r.id"""
    return sql, {**params, "id": record_id}


def by_key(vis: Visibility, keys: Sequence[str], statuses: Sequence[str], limit: int) -> Query:
    """Exact key lookup: visible records whose key is one of ``keys``."""
    cond, params = vis.sql()
    sql = (
        f"{SELECT} WHERE r.key IN (SELECT value FROM json_each(:keys)) AND {cond}"
        f" AND {_STATUS} ORDER BY r.created_at DESC LIMIT :limit"
    )
    return sql, {**params, "keys": _json(keys), "statuses": _json(statuses), "limit": limit}


def keyed(vis: Visibility, types: Sequence[str], statuses: Sequence[str], limit: int) -> Query:
    """Keyed records of some types (the structured channel), newest observed first."""
    cond, params = vis.sql()
    sql = (
        f"{SELECT} WHERE r.type IN (SELECT value FROM json_each(:types)) AND {cond}"
        f" AND r.key IS NOT NULL AND {_STATUS} ORDER BY r.observed_at DESC LIMIT :limit"
    )
    return sql, {**params, "types": _json(types), "statuses": _json(statuses), "limit": limit}


def lexical(vis: Visibility, match: str, statuses: Sequence[str], limit: int) -> Query:
    """BM25 over FTS5, pre-filtered by the owner column and filtered by visibility.

    ``CROSS JOIN`` fixes the join order (FTS first); without it SQLite may plan a
    scan of ``records``. The owner column has weight 0 in ``bm25``.
    """
    cond, params = vis.sql()
    sql = (
        "SELECT r.id, bm25(records_fts, 1.0, 0.0) AS score FROM records_fts"
        " CROSS JOIN records r ON r.rowid = records_fts.rowid"
        f" WHERE records_fts MATCH :match AND {cond} AND {_STATUS}"
        " ORDER BY score LIMIT :limit"
    )
    full_match = f"{vis.fts_owner_match()} AND {match}"
    return sql, {**params, "match": full_match, "statuses": _json(statuses), "limit": limit}


def recent(
    vis: Visibility, statuses: Sequence[str], types: Sequence[str] | None, limit: int
) -> Query:
    """Most recently observed visible records, optionally of some types only."""
    cond, params = vis.sql()
    sql = (
        f"{SELECT} WHERE {cond} AND {_STATUS}"
        " AND (:types IS NULL OR r.type IN (SELECT value FROM json_each(:types)))"
        " ORDER BY r.observed_at DESC, r.id DESC LIMIT :limit"
    )
    type_list = None if types is None else _json(types)
    return sql, {**params, "statuses": _json(statuses), "types": type_list, "limit": limit}


def export(vis: Visibility) -> Query:
    """Every visible record in every status, in creation order."""
    cond, params = vis.sql()
    return f"{SELECT} WHERE {cond} ORDER BY r.created_at, r.id", params


def slot_by_key(slot: OwnerSlot, key: str, statuses: Sequence[str]) -> Query:
    """Versions of ``key`` in one write slot (for confirm / supersede / contest)."""
    cond, params = slot.sql()
    sql = f"{SELECT} WHERE {cond} AND r.key = :key AND {_STATUS} ORDER BY r.version DESC"
    return sql, {**params, "key": key, "statuses": _json(statuses)}


def slot_by_hash(slot: OwnerSlot, content_hash: str, statuses: Sequence[str]) -> Query:
    """Records in one write slot with the same normalised content (duplicates)."""
    cond, params = slot.sql()
    sql = f"{SELECT} WHERE {cond} AND r.content_hash = :hash AND {_STATUS}"
    return sql, {**params, "hash": content_hash, "statuses": _json(statuses)}


def subject_ids(subject: Subject) -> Query:
    """Ids of every record of one subject (administrative erasure)."""
    cond, params = subject.sql()
    return f"SELECT r.id FROM records r WHERE {cond}", params


def derived_from(tenant: Tenant, ids: Sequence[str]) -> Query:
    """Ids of records in the tenant derived from any of ``ids`` (derived copies)."""
    cond, params = tenant.sql()
    sql = (
        "SELECT DISTINCT r.id FROM records r, json_each(r.derived_from) j"
        f" WHERE {cond} AND j.value IN (SELECT value FROM json_each(:ids))"
    )
    return sql, {**params, "ids": _json(ids)}
