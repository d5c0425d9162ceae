"""Storage configuration: what every backend shares, and one block per backend.

``StoreConfig.sqlite`` holds the embedded store's settings (its pragmas, its
read connections, and the in-memory vector and lexical engines it ranks with);
``StoreConfig.postgres`` holds the server store's (its connection pool, its
statement timeout, its HNSW index and its text search configuration). A store
reads only its own block, so a setting never means two things.

This module imports nothing from the rest of ``engram.store``: ``engram.config``
re-exports it without loading a database module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from engram.errors import ConfigError

__all__ = ["PostgresConfig", "SQLiteConfig", "StoreConfig"]

_PROBES = frozenset({"vector", "lexical"})
_TEXT_SEARCH = frozenset({"simple", "english"})


@dataclass(frozen=True, slots=True)
class SQLiteConfig:
    """The embedded SQLite store.

    Pragmas: ``busy_timeout_ms`` (how long a writer waits for another's lock),
    ``synchronous`` (``NORMAL``: durable at each checkpoint under WAL) and WAL
    journaling for a file. ``read_connections`` gives each thread of a file store
    its own read connection (WAL readers do not wait for each other or for a
    writer).

    In-memory engines: the bounds of the vector (``vector_cache_rows``) and
    lexical (``lexical_cache_rows``) partitions; a vector scan of at least
    ``vector_estimate_rows`` visible rows shortlists candidates from int8 codes
    and rescores them exactly (0: always scan float32 rows); one large scan runs
    on ``vector_scan_threads`` threads (0: the cores, at most four) once it has
    ``vector_parallel_rows`` rows.

    ``overlapped_probes``: the probe kinds (``vector``, ``lexical``) whose bulk
    phase (the scan; the ranking) runs on a worker thread while the other probes
    of the same ``Store.candidates`` call run on the caller's (empty: one after
    another).

    Lexical search is BM25 over in-memory postings per partition (``lexicon``),
    with statistics over the rows the caller may read. The FTS5 engine and its
    options (``lexical_engine``, ``fts_term_cap``, ``fts_rank_window``,
    ``fts_prefilter_below_share``, ``term_count_cache``) were removed: its scores
    used statistics over every tenant's rows, so they revealed what other tenants
    stored. Passing one of them is a ``TypeError`` naming it."""

    busy_timeout_ms: int = 5000
    synchronous: str = "NORMAL"
    read_connections: bool = True
    vector_cache_rows: int = 2_000_000
    lexical_cache_rows: int = 2_000_000
    vector_scan_threads: int = 0
    vector_parallel_rows: int = 32_768
    vector_estimate_rows: int = 16_384
    overlapped_probes: frozenset[str] = frozenset({"vector"})

    def __post_init__(self) -> None:
        if self.synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigError(f"sqlite.synchronous must be OFF, NORMAL, FULL or EXTRA, "
                              f"got {self.synchronous!r}")  # fmt: skip
        unknown = set(self.overlapped_probes) - _PROBES
        if unknown:
            raise ConfigError(f"sqlite.overlapped_probes: unknown probe kinds {sorted(unknown)}")
        if self.busy_timeout_ms < 0:
            raise ConfigError("sqlite.busy_timeout_ms must be >= 0")

    def scan_threads(self) -> int:
        """Threads for one large exact scan: ``vector_scan_threads``, or when 0 the
        machine's cores, at most four (a scan is bound by memory bandwidth)."""
        if self.vector_scan_threads > 0:
            return self.vector_scan_threads
        return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    """The PostgreSQL store (``postgresql://`` URLs).

    ``pool_min`` / ``pool_max`` connections; ``statement_timeout_ms`` bounds each
    statement (0: none). The vector index is HNSW (pgvector): ``hnsw_m`` and
    ``hnsw_ef_construction`` shape it when it is built, ``hnsw_ef_search`` is the
    candidate list of a query, and ``iterative_scan`` (``relaxed_order``,
    ``strict_order`` or ``off``) lets a filtered query keep scanning until it has
    its ``limit`` visible rows. ``text_search`` is the text search configuration
    of the lexical index (``simple``: no stemming, any language; ``english``)."""

    pool_min: int = 1
    pool_max: int = 8
    statement_timeout_ms: int = 30_000
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    hnsw_ef_search: int = 100
    iterative_scan: str = "relaxed_order"
    text_search: str = "simple"

    def __post_init__(self) -> None:
        if not 1 <= self.pool_min <= self.pool_max:
            raise ConfigError("postgres pool sizes must satisfy 1 <= pool_min <= pool_max")
        if self.statement_timeout_ms < 0:
            raise ConfigError("postgres.statement_timeout_ms must be >= 0")
        if self.hnsw_m < 2 or self.hnsw_ef_construction < 2 * self.hnsw_m:
            raise ConfigError("postgres HNSW needs m >= 2 and ef_construction >= 2 * m")
        if self.hnsw_ef_search < 1:
            raise ConfigError("postgres.hnsw_ef_search must be >= 1")
        if self.iterative_scan not in ("off", "relaxed_order", "strict_order"):
            raise ConfigError("postgres.iterative_scan must be off, relaxed_order or "
                              "strict_order")  # fmt: skip
        if self.text_search not in _TEXT_SEARCH:
            raise ConfigError(f"postgres.text_search must be one of {sorted(_TEXT_SEARCH)}")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Storage settings: one block per backend (``sqlite``, ``postgres``)."""

    sqlite: SQLiteConfig = field(default_factory=SQLiteConfig)
    postgres: PostgresConfig = field(default_factory=PostgresConfig)
