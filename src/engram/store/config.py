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
import re
from dataclasses import dataclass, field

from engram.errors import ConfigError

__all__ = ["PostgresConfig", "SQLiteConfig", "StoreConfig"]

_PROBES = frozenset({"vector", "lexical"})
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # a text search configuration name


@dataclass(frozen=True, slots=True)
class SQLiteConfig:
    """The embedded SQLite store.

    Pragmas: ``busy_timeout_ms`` (how long a writer waits for another's lock,
    retried with backoff; after it ``Unavailable``: ``store.busy``),
    ``synchronous`` and WAL journaling for a file. ``synchronous`` is ``FULL``: the
    WAL is synced at every commit, so a write once acknowledged survives a power
    loss as well as a process crash (the promise of ``remember``). ``NORMAL`` syncs
    only at checkpoints (a process crash loses nothing, a power loss may lose the
    last commits) and costs 2 to 6 ms less per single write on the project's
    virtual disk; ``OFF`` never syncs (a power loss may corrupt the file);
    ``EXTRA`` is ``FULL`` plus a directory sync for the rollback journal. A
    ``sqlite://`` URL may set it too (``?synchronous=NORMAL``);
    ``docs/reliability/crash.md`` has the measurements.

    ``read_connections`` gives each thread of a file store
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
    synchronous: str = "FULL"
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
    """Pool, timeouts, HNSW and text search settings of ``PostgresStore``.

    * ``min_connections`` / ``max_connections``: the ``psycopg_pool`` bounds;
      ``pool_timeout_s`` is how long a caller waits for a free connection.
    * ``connect_timeout_s``: how long opening one connection may take (an
      unreachable host fails after this, never hangs).
    * ``reconnect_timeout_s``: how long the pool keeps retrying one lost connection
      (backing off 1 s, 2 s, ...) before it gives up; the next caller then starts a
      fresh attempt at once. Short, so that a server back after a long outage is
      used within seconds (psycopg_pool's own 300 s let the backoff grow to a minute
      and more: 17 s of refusals after a 40 s outage, measured).
    * ``statement_timeout_ms``: the server cancels any statement running longer
      (0: no limit); a cancelled probe yields ``Unavailable``, never a hang.
    * ``hnsw_m`` / ``hnsw_ef_construction``: the HNSW index build (fixed when the
      index is built: ``rebuild_vector_index`` applies a new value);
      ``hnsw_ef_search`` the candidate list of a query. On the default embedder's
      vectors at 100K (``benchmarks/pg_vectors.py --embedder local``) a build at
      ``ef_construction`` 128 gave recall@10 0.965-0.970 against exact at
      ``ef_search`` 200, where 64 gave 0.925-0.939 (64 needed ``ef_search`` 300 for
      0.950, at a slower query); 128 costs about 1.4x per vector insert into a
      loaded index and 1.3-1.8x build time. ``hnsw_max_scan_tuples`` is how far an
      iterative scan may walk for a selective scope before the exact fallback
      takes over.
    * ``exact_below_rows``: a caller who sees fewer vectors than this is searched
      exactly (a filtered index walk of a small scope misses its nearest rows;
      0: never).
    * ``text_search``: the text search configuration of the generated ``tsvector``
      column: ``english`` stems as the SQLite store's Porter2 does; ``simple``
      only lowercases, for languages PostgreSQL has no stemmer for. It is fixed
      when the schema is created (changing it needs ``rebuild_lexical``).
    * ``probe_threads``: probes of one ``candidates`` call run concurrently on
      this many pooled connections (outside a transaction; 1: one after another).
    * ``lexical_rank_rows``: a lexical probe ranks at most this many of the
      caller's matches (the first found in storage order; 0: every match). Each
      match costs a heap visit and a ``ts_rank``: at 1M records in one scope a
      common term matches 200K rows. A caller with fewer matches gets exactly the
      unbounded answer (the 100K benchmark: identical); at 1M the bound cut the
      probe's p95 from 399 to 156 ms (5,000: 90 ms, top-10 contents 81 % the same).
    * ``erasure_rewrite``: after an erasure, ``VACUUM FULL`` the tables it deleted
      from ``on_residue`` (when the relation files, readable on a local server,
      still hold erased bytes), ``always``, or ``never`` (residue is reported).
      The rewrite locks each table while it runs (``store.postgres.physical``).
    """

    min_connections: int = 1
    max_connections: int = 8
    pool_timeout_s: float = 10.0
    connect_timeout_s: int = 5
    reconnect_timeout_s: float = 5.0
    statement_timeout_ms: int = 5000
    hnsw_m: int = 16
    hnsw_ef_construction: int = 128
    hnsw_ef_search: int = 200
    hnsw_max_scan_tuples: int = 20_000
    exact_below_rows: int = 20_000
    text_search: str = "english"
    probe_threads: int = 4
    maintenance_work_mem: str = "512MB"
    lexical_rank_rows: int = 20_000
    erasure_rewrite: str = "on_residue"

    def __post_init__(self) -> None:
        if self.erasure_rewrite not in ("never", "on_residue", "always"):
            raise ConfigError("erasure_rewrite must be 'never', 'on_residue' or 'always'")
        if not _IDENTIFIER.fullmatch(self.text_search):
            raise ConfigError(
                f"text_search must be a text search configuration name such as 'english' or"
                f" 'simple'; got {self.text_search!r}"
            )
        if not 0 < self.reconnect_timeout_s <= 3600:
            raise ConfigError("reconnect_timeout_s must be a number of seconds in (0, 3600]")
        if not 1 <= self.min_connections <= self.max_connections:
            raise ConfigError("connections: need 1 <= min_connections <= max_connections")
        if self.exact_below_rows < 0 or self.lexical_rank_rows < 0:
            raise ConfigError("exact_below_rows and lexical_rank_rows must be >= 0")
        if self.statement_timeout_ms < 0 or self.connect_timeout_s < 1:
            raise ConfigError("statement_timeout_ms must be >= 0 and connect_timeout_s >= 1")
        if min(self.hnsw_m, self.hnsw_ef_construction, self.hnsw_ef_search) < 1:
            raise ConfigError("hnsw_m, hnsw_ef_construction and hnsw_ef_search must be >= 1")
        if self.hnsw_ef_construction < 2 * self.hnsw_m:  # pgvector refuses the build
            raise ConfigError("hnsw_ef_construction must be at least 2 * hnsw_m")
        if not re.fullmatch(r"[0-9]+(kB|MB|GB)", self.maintenance_work_mem):
            raise ConfigError("maintenance_work_mem must look like '512MB'")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Storage settings: one block per backend (``sqlite``, ``postgres``)."""

    sqlite: SQLiteConfig = field(default_factory=SQLiteConfig)
    postgres: PostgresConfig = field(default_factory=PostgresConfig)
