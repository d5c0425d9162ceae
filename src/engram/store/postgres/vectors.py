"""Vectors in PostgreSQL: the model claim, the HNSW index and the scoped search.

``records.embedding`` starts as an untyped ``vector``. The first write carrying
a vector claims the model: under an advisory lock it records the model and the
dimension in ``engram_meta``, types the column ``vector(dim)`` and creates the
HNSW index (``vector_cosine_ops``), all inside the writer's transaction. A
store of another model is refused (``IndexMismatch``), as on SQLite.

A search renders the scope predicate inside the query that walks the index, with
``hnsw.iterative_scan = relaxed_order`` (a session setting, ``connect``), so the
scan keeps going until ``limit`` visible rows are found, up to
``hnsw.max_scan_tuples``. A caller who sees fewer than ``exact_below_rows``
vectors (counted by a bounded B-tree walk) is answered by an exact search over the
visible rows instead (a materialised scan no index can reorder): a filtered walk
of a selective scope stops at its tuple limit with visible rows that are not the
nearest (recall@10 0.42 for a 1 % scope at 1M). When the walk of a large scope
still returns fewer than ``limit`` (most rows in other statuses), the exact
search answers too. So a small scope is exact and every scope gets ``limit``
results whenever ``limit`` exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.errors import IndexMismatch
from engram.store.dialect import POSTGRES
from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.schema import VECTOR_DIM_KEY, VECTOR_MODEL_KEY
from engram.store.postgres.sql import COLUMNS_PG, Query
from engram.store.predicate import Visibility

__all__ = [
    "HNSW_MAX_DIMENSIONS", "approximate", "claim_statements", "exact",
    "reset_statements", "stored", "vectors_of", "visible_up_to",
]  # fmt: skip

HNSW_MAX_DIMENSIONS = 2000  # pgvector's HNSW limit for ``vector``; larger: exact only
_INDEX = "records_embedding"
_COLS = ", ".join(f"r.{column}" for column in COLUMNS_PG)
_FILTER = (
    "r.embedding IS NOT NULL AND r.embedding_model = %(model)s"
    " AND r.status = ANY(%(statuses)s::text[])"
)
CLAIM_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('engram:vector_model', 0))"


def stored() -> str:
    """The claimed model and dimension (two rows at most)."""
    return (
        "SELECT key, value FROM engram_meta WHERE key IN"
        f" ('{VECTOR_MODEL_KEY}', '{VECTOR_DIM_KEY}')"
    )


def claim_statements(model: str, dimension: int, config: PostgresConfig) -> list[Query]:
    """What claiming ``model`` at ``dimension`` runs (after ``CLAIM_LOCK``, in the
    writer's transaction, once per database)."""
    steps: list[Query] = [
        (
            "INSERT INTO engram_meta (key, value) VALUES (%(k1)s, %(model)s), (%(k2)s, %(dim)s)",
            {"k1": VECTOR_MODEL_KEY, "model": model, "k2": VECTOR_DIM_KEY, "dim": str(dimension)},
        ),
        (f"ALTER TABLE records ALTER COLUMN embedding TYPE vector({int(dimension)})", {}),
    ]
    if dimension <= HNSW_MAX_DIMENSIONS:
        steps.append((index_statement(config), {}))
    return steps


def index_statement(config: PostgresConfig) -> str:
    """The HNSW index over ``records.embedding`` (cosine distance)."""
    return (
        f"CREATE INDEX IF NOT EXISTS {_INDEX} ON records USING hnsw (embedding vector_cosine_ops)"
        f" WITH (m = {int(config.hnsw_m)}, ef_construction = {int(config.hnsw_ef_construction)})"
    )


def drop_index_statement() -> str:
    """Drop the HNSW index (before a bulk load, or a reset)."""
    return f"DROP INDEX IF EXISTS {_INDEX}"


def reset_statements() -> list[Query]:
    """Forget every vector and the model: the column goes back to untyped."""
    return [
        ("UPDATE records SET embedding = NULL WHERE embedding IS NOT NULL", {}),
        (drop_index_statement(), {}),
        ("ALTER TABLE records ALTER COLUMN embedding TYPE vector", {}),
        (
            "DELETE FROM engram_meta WHERE key IN (%(k1)s, %(k2)s)",
            {"k1": VECTOR_MODEL_KEY, "k2": VECTOR_DIM_KEY},
        ),
    ]


def check(stored_model: str | None, wanted: str) -> None:
    """Raise ``IndexMismatch`` when vectors of another model are stored."""
    if stored_model is not None and stored_model != wanted:
        raise IndexMismatch.between(stored_model, wanted)


def _params(
    vis: Visibility, query: NDArray[np.float32], model: str, statuses: Sequence[str], limit: int
) -> tuple[str, dict[str, Any]]:
    cond, params = vis.sql("r", POSTGRES)
    extra = {"q": np.ascontiguousarray(query, dtype=np.float32), "model": model,
             "statuses": list(statuses), "limit": limit}  # fmt: skip
    return cond, {**params, **extra}


def approximate(
    vis: Visibility, query: NDArray[np.float32], model: str, statuses: Sequence[str], limit: int
) -> Query:
    """The index walk: nearest visible rows by cosine distance, re-sorted (a relaxed
    iterative scan may return them slightly out of order)."""
    cond, params = _params(vis, query, model, statuses, limit)
    sql = (
        f"SELECT * FROM (SELECT {_COLS}, r.embedding <=> %(q)s AS distance FROM records r"
        f" WHERE {cond} AND {_FILTER} ORDER BY r.embedding <=> %(q)s LIMIT %(limit)s) v"
        " ORDER BY v.distance, v.id"
    )
    return sql, params


def visible_up_to(vis: Visibility, model: str, statuses: Sequence[str], bound: int) -> Query:
    """How many vectors the caller sees, counted no further than ``bound`` in each
    visibility branch (own records, tenant-wide ones): below ``bound`` the search is
    exact, because an index walk filtered down to a small scope stops at its tuple
    limit with rows that are not the nearest. The sum is below ``bound`` exactly
    when the caller sees fewer. Each branch is an index-only walk of the
    ``records_vector_owners`` index (tenant, user, scope, agent, model, status of
    the rows holding a vector), which reads no heap page of an all-visible table:
    the heap walk it replaces read up to ``bound`` rows, 50-100 ms at 100K."""
    arms, params = [], {}
    for cond, branch in vis.branches("r", POSTGRES):
        arms.append(f"(SELECT count(*) FROM (SELECT 1 FROM records r WHERE {cond} AND {_FILTER}"
                    " LIMIT %(bound)s) c)")  # fmt: skip
        params.update(branch)
    sql = "SELECT " + " + ".join(arms)
    return sql, {**params, "model": model, "statuses": list(statuses), "bound": bound}


def exact(
    vis: Visibility, query: NDArray[np.float32], model: str, statuses: Sequence[str], limit: int
) -> Query:
    """Exact search over the visible rows: distances of every visible row are
    materialised first, so no index can answer approximately."""
    cond, params = _params(vis, query, model, statuses, limit)
    sql = (
        "WITH d AS MATERIALIZED (SELECT r.id, r.embedding <=> %(q)s AS distance FROM records r"
        f" WHERE {cond} AND {_FILTER}),"
        " best AS (SELECT id, distance FROM d ORDER BY distance, id LIMIT %(limit)s)"
        f" SELECT {_COLS}, b.distance FROM best b JOIN records r ON r.id = b.id"
        f" WHERE {cond} ORDER BY b.distance, b.id"
    )
    return sql, params


def vectors_of(vis: Visibility, ids: Sequence[str], model: str) -> Query:
    """Stored vectors of the visible records among ``ids`` under ``model``."""
    cond, params = vis.sql("r", POSTGRES)
    sql = (
        "SELECT r.id, r.embedding FROM records r WHERE r.id = ANY(%(ids)s::text[])"
        f" AND {cond} AND r.embedding IS NOT NULL AND r.embedding_model = %(model)s"
    )
    return sql, {**params, "ids": list(ids), "model": model}
