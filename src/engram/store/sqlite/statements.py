"""SQL builders of the SQLite store's reads: pure functions to ``(sql, params)``.

Each read takes a ``Visibility`` (or ``Subject``/``OwnerSlot``) from
``predicate`` and splices the condition it renders; no builder writes an
ownership condition of its own. Lists are bound as one JSON array and expanded
with ``json_each``, so the SQL text is constant whatever the list length.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from engram.store.config import SQLiteConfig
from engram.store.predicate import OwnerSlot, Subject, Visibility
from engram.store.rows import COLUMNS

__all__ = [
    "MIGRATIONS_DONE",
    "MIGRATIONS_TABLE",
    "MIGRATION_DONE",
    "Query",
    "by_ids",
    "by_key",
    "counters",
    "export",
    "get",
    "history",
    "keyed",
    "lexical_rows",
    "listing",
    "neighbors",
    "pragmas",
    "reader_pragmas",
    "recent",
    "recent_of_types",
    "slot_by_hash",
    "slot_by_key",
    "status_of",
    "vector_rows",
    "vectors_of",
]

Query = tuple[str, dict[str, Any]]

_SELECT_COLS = "SELECT " + ", ".join(f"r.{column}" for column in COLUMNS)
SELECT = _SELECT_COLS + " FROM records r"
_STATUS = "r.status IN (SELECT value FROM json_each(:statuses))"
# SQLite 3.35+ can be told to compute a CTE once; older versions may compute it per use.
_MATERIALIZED = "MATERIALIZED " if sqlite3.sqlite_version_info >= (3, 35) else ""


MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, at TEXT)"
MIGRATIONS_DONE = "SELECT name FROM migrations"
MIGRATION_DONE = "INSERT INTO migrations VALUES (:name, datetime('now'))"


def _json(values: Sequence[str]) -> str:
    return json.dumps(list(values))


def pragmas(settings: SQLiteConfig, wal: bool) -> list[str]:
    """The writer connection's settings. Deleted rows are overwritten with zeros, not
    just unlinked: an erasure must leave no byte of what it erased in the file
    (``store.erasure``)."""
    out = [f"PRAGMA busy_timeout = {int(settings.busy_timeout_ms)}"]
    out += ["PRAGMA journal_mode = WAL"] if wal else []
    out += [f"PRAGMA synchronous = {settings.synchronous.upper()}", "PRAGMA secure_delete = ON"]
    return out


def reader_pragmas(settings: SQLiteConfig) -> list[str]:
    """A read connection's settings: it waits like the writer and never writes."""
    return [f"PRAGMA busy_timeout = {int(settings.busy_timeout_ms)}", "PRAGMA query_only = ON"]


def get(vis: Visibility, record_id: str) -> Query:
    """One record by id, if visible."""
    cond, params = vis.sql()
    return f"{SELECT} WHERE r.id = :id AND {cond}", {**params, "id": record_id}


def by_ids(vis: Visibility, ids: Sequence[str], statuses: Sequence[str] | None = None) -> Query:
    """Visible records among ``ids``, in one of ``statuses`` if given (order not
    preserved)."""
    cond, params = vis.sql()
    status = "" if statuses is None else f" AND {_STATUS}"
    sql = (
        f"{_SELECT_COLS} FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value"
        f" WHERE {cond}{status}"
    )
    extra = {} if statuses is None else {"statuses": _json(statuses)}
    return sql, {**params, "ids": _json(ids), **extra}


def status_of(vis: Visibility, ids: Sequence[str], statuses: Sequence[str]) -> Query:
    """Ids among ``ids`` that are visible and in one of ``statuses`` (a cheap check)."""
    cond, params = vis.sql()
    sql = (
        "SELECT r.id FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value"
        f" WHERE {cond} AND {_STATUS}"
    )
    return sql, {**params, "ids": _json(ids), "statuses": _json(statuses)}


# A record's status as callers see it at :now: an active or disputed record past its
# retention reads as expired (until the lifecycle sweep removes it).
EFFECTIVE_STATUS = (
    "CASE WHEN r.status IN ('active', 'disputed') AND r.expires_at IS NOT NULL"
    " AND r.expires_at <= :now THEN 'expired' ELSE r.status END"
)


def listing(
    vis: Visibility, type_name: str | None, statuses: Sequence[str], limit: int | None,
    offset: int, now_us: int | None = None,
) -> Query:  # fmt: skip
    """Visible records, newest first, optionally of one type; statuses as of ``now_us``
    (stored statuses when it is None)."""
    cond, params = vis.sql()
    status = _STATUS if now_us is None else _STATUS.replace("r.status", EFFECTIVE_STATUS, 1)
    sql = (
        f"{SELECT} WHERE {cond} AND {status} AND (:type IS NULL OR r.type = :type)"
        " ORDER BY r.created_at DESC, r.id DESC LIMIT :limit OFFSET :offset"
    )
    extra = {"statuses": _json(statuses), "type": type_name, "offset": offset, "now": now_us,
             "limit": -1 if limit is None else limit}  # fmt: skip
    return sql, {**params, **extra}


def history(vis: Visibility, record_id: str) -> Query:
    """Every visible version of the fact ``record_id`` is one of, oldest first: the
    records linked to it through ``supersedes`` and ``superseded_by``, in either
    direction and transitively, so a fact merged into another (superseded by it,
    which supersedes something else) is a version of the survivor too."""
    cond, params = vis.sql()
    sql = f"""
    WITH RECURSIVE
      chain(id, back, fwd) AS (
        SELECT r.id, r.supersedes, r.superseded_by FROM records r
        WHERE r.id = :id AND {cond}
        UNION SELECT r.id, r.supersedes, r.superseded_by FROM chain c JOIN records r
          ON r.id = c.back OR r.id = c.fwd OR r.superseded_by = c.id
        WHERE {cond})
    {SELECT} WHERE r.id IN (SELECT id FROM chain) AND {cond}
    ORDER BY r.version, r.created_at, r.id"""
    return sql, {**params, "id": record_id}


def _union(vis: Visibility, arm: str, order: str) -> Query:
    """``arm`` (with ``{cond}``) once per visibility branch, UNION ALL, ordered, limited.

    Each arm can use the (tenant, user, ...) indexes in order, which a single
    condition with ``user_id IN (...)`` cannot.
    """
    arms = []
    params: dict[str, Any] = {}
    for cond, branch_params in vis.branches():
        arms.append(f"SELECT * FROM ({arm.format(cond=cond)} ORDER BY {order} LIMIT :limit)")
        params.update(branch_params)
    unqualified = order.replace("r.", "")
    return " UNION ALL ".join(arms) + f" ORDER BY {unqualified} LIMIT :limit", params


def by_key(vis: Visibility, keys: Sequence[str], statuses: Sequence[str], limit: int) -> Query:
    """Exact key lookup: visible records whose key is one of ``keys``."""
    arm = (
        f"{_SELECT_COLS} FROM json_each(:keys) j CROSS JOIN records r ON r.key = j.value"
        f" WHERE {{cond}} AND {_STATUS}"
    )
    sql, params = _union(vis, arm, "r.created_at DESC")
    return sql, {**params, "keys": _json(keys), "statuses": _json(statuses), "limit": limit}


def keyed(vis: Visibility, types: Sequence[str], statuses: Sequence[str], limit: int) -> Query:
    """Keyed records of some types (the structured channel), newest observed first.

    One index-ordered arm per (type, visibility branch), so each arm reads at most
    ``limit`` rows of the (tenant, user, type, observed_at) index however many
    keyed records the scope holds. The arms carry only rowid and time; the full
    rows of the ``limit`` best are read by rowid at the end (materialising every
    arm's full rows cost 3x as much). ``types`` come from configuration, so the
    SQL text stays constant for a given configuration.
    """
    arms = []
    params: dict[str, Any] = {}
    for index, type_name in enumerate(types):
        for cond, branch_params in vis.branches():
            arms.append(
                "SELECT * FROM (SELECT r.rowid AS rid, r.observed_at AS at FROM records r"
                f" WHERE r.type = :type{index} AND {cond} AND r.key IS NOT NULL AND {_STATUS}"
                " ORDER BY r.observed_at DESC LIMIT :limit)"
            )
            params.update(branch_params)
        params[f"type{index}"] = type_name
    best = " UNION ALL ".join(arms) + " ORDER BY at DESC LIMIT :limit"
    sql = f"{SELECT} JOIN ({best}) k ON r.rowid = k.rid ORDER BY k.at DESC, r.rowid"
    return sql, {**params, "statuses": _json(statuses), "limit": limit}


def recent(vis: Visibility, statuses: Sequence[str], limit: int) -> Query:
    """Most recently observed visible records (one index-ordered arm per branch)."""
    arm = f"{SELECT} WHERE {{cond}} AND {_STATUS}"
    sql, params = _union(vis, arm, "r.observed_at DESC")
    return sql, {**params, "statuses": _json(statuses), "limit": limit}


def neighbors(
    vis: Visibility, anchors: Sequence[tuple[str, int]], types: Sequence[str],
    statuses: Sequence[str], gap: int, per_side: int,
) -> Query:  # fmt: skip
    """For each anchor ``(scope, at)``, the ``per_side`` visible records of ``types`` in
    that scope observed just before and just after ``at`` (within ``gap``
    microseconds): the conversational context of several memories in one statement.

    Each side of each anchor is one subquery whose ids come back as a JSON array;
    inside it, one arm per visibility branch walks the (tenant, user,
    observed_at) index in order and stops after ``per_side`` rows, so nothing is
    sorted but those few (one condition over both branches would collect and
    sort the whole window, once per neighbour). The records are then read by
    rowid, the table's own key (by id cost a second index search per record); a
    record near two anchors comes back once.
    """
    params: dict[str, Any] = {}
    sides = (  # nearest first; equal times nearest in row order (the index's own order)
        ("x.observed_at < a.at AND x.observed_at >= a.at - :gap", " DESC"),
        ("x.observed_at > a.at AND x.observed_at <= a.at + :gap", ""),
    )
    picks = []
    for where, order in sides:
        arms = []
        for cond, branch_params in vis.branches("x"):
            params.update(branch_params)
            arms.append(
                "SELECT * FROM (SELECT x.observed_at AS at, x.rowid AS rid FROM records x"
                f" WHERE {cond} AND x.scope = a.scope"
                " AND x.status IN (SELECT value FROM json_each(:statuses))"
                f" AND x.type IN (SELECT value FROM json_each(:types)) AND {where}"
                f" ORDER BY x.observed_at{order}, x.rowid{order} LIMIT :per_side)"
            )
        nearest = f"{' UNION ALL '.join(arms)} ORDER BY at{order}, rid{order} LIMIT :per_side"
        picks.append(
            f"SELECT n.value FROM a, json_each((SELECT json_group_array(rid) FROM ({nearest}))) n"
        )
    outer, outer_params = vis.sql()
    sql = (
        "WITH a(scope, at) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')"
        f" FROM json_each(:anchors)), hits(rid) AS ({' UNION '.join(picks)})"
        f" {_SELECT_COLS} FROM hits h CROSS JOIN records r ON r.rowid = h.rid WHERE {outer}"
        " ORDER BY r.observed_at, r.id"
    )
    extra = {"anchors": json.dumps([list(x) for x in anchors]), "statuses": _json(statuses),
             "types": _json(types), "gap": gap, "per_side": per_side}  # fmt: skip
    return sql, {**params, **outer_params, **extra}


def recent_of_types(
    vis: Visibility, statuses: Sequence[str], types: Sequence[str], limit: int
) -> Query:
    """Most recently observed visible records of some types (e.g. task state)."""
    arm = (
        f"{_SELECT_COLS} FROM json_each(:types) j CROSS JOIN records r ON r.type = j.value"
        f" WHERE {{cond}} AND {_STATUS}"
    )
    sql, params = _union(vis, arm, "r.observed_at DESC")
    return sql, {**params, "statuses": _json(statuses), "types": _json(types), "limit": limit}


def export(vis: Visibility) -> Query:
    """Every visible record in every status, in creation order."""
    cond, params = vis.sql()
    return f"{SELECT} WHERE {cond} ORDER BY r.created_at, r.id", params


def slot_by_key(slot: OwnerSlot, key: str, statuses: Sequence[str]) -> Query:
    """Versions of ``key`` a write to ``slot`` meets (for confirm / supersede /
    contest: ``OwnerSlot.key_sql``)."""
    cond, params = slot.key_sql()
    sql = f"{SELECT} WHERE {cond} AND r.key = :key AND {_STATUS} ORDER BY r.version DESC"
    return sql, {**params, "key": key, "statuses": _json(statuses)}


def slot_by_hash(slot: OwnerSlot, content_hash: str, statuses: Sequence[str]) -> Query:
    """Records with the same normalised content that a write to ``slot`` confirms
    (``OwnerSlot.key_sql``)."""
    cond, params = slot.key_sql()
    sql = f"{SELECT} WHERE {cond} AND r.content_hash = :hash AND {_STATUS}"
    return sql, {**params, "hash": content_hash, "statuses": _json(statuses)}


def counters(vis: Visibility, table: str) -> Query:
    """Insert and delete counters of the caller's two partitions, from ``table``
    (``partition_state`` for vectors, ``lexical_state`` for postings)."""
    cond, params = vis.partition.partition_sql("p")
    return f"SELECT p.user_id, p.inserts, p.deletes FROM {table} p WHERE {cond}", params


def vector_rows(subject: Subject, model: str, after: int) -> Query:
    """A partition's vectors of ``model`` after sequence ``after``, with their owners."""
    cond, params = subject.sql("v")
    sql = (
        "SELECT v.seq, v.record_id, r.user_id, r.scope, r.agent_id, v.vector"
        " FROM vectors v JOIN records r ON r.id = v.record_id"
        f" WHERE {cond} AND v.model = :model AND v.seq > :after ORDER BY v.seq"
    )
    return sql, {**params, "model": model, "after": after}


def lexical_rows(subject: Subject, after: int) -> Query:
    """A partition's records after row ``after``: owners and content, for postings."""
    cond, params = subject.sql("r")
    sql = (
        "SELECT r.rowid, r.id, r.user_id, r.scope, r.agent_id, r.content FROM records r"
        f" WHERE {cond} AND r.rowid > :after ORDER BY r.rowid"
    )
    return sql, {**params, "after": after}


def vectors_of(vis: Visibility, ids: Sequence[str], model: str) -> Query:
    """Stored vectors of the visible records among ``ids``."""
    cond, params = vis.sql()
    part, part_params = vis.partition.partition_sql("v")
    sql = (
        "SELECT r.id, v.vector FROM json_each(:ids) j CROSS JOIN records r ON r.id = j.value"
        f" CROSS JOIN vectors v ON v.record_id = r.id WHERE {cond} AND {part}"
        " AND v.model = :model"
    )
    return sql, {**params, **part_params, "ids": _json(ids), "model": model}
