"""Settings of the PostgreSQL store, in one frozen value.

Kept in this package until ``engram.config.StoreConfig`` grows per-backend
sections; every number the store uses is named here, never a literal in a query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engram.errors import ConfigError

__all__ = ["PostgresConfig"]

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class PostgresConfig:
    """Pool, timeouts, HNSW and text search settings of ``PostgresStore``.

    * ``min_connections`` / ``max_connections``: the ``psycopg_pool`` bounds;
      ``pool_timeout_s`` is how long a caller waits for a free connection.
    * ``connect_timeout_s``: how long opening one connection may take (an
      unreachable host fails after this, never hangs).
    * ``statement_timeout_ms``: the server cancels any statement running longer
      (0: no limit); a cancelled probe yields ``Unavailable``, never a hang.
    * ``hnsw_m`` / ``hnsw_ef_construction``: the HNSW index build; ``hnsw_ef_search``
      the candidate list of a query (200: recall@10 0.973 against exact at 100K
      hashing vectors, where 100 gave 0.941 at half the latency;
      ``benchmarks/pg_vectors.py``); ``hnsw_max_scan_tuples`` how far an iterative
      scan may walk for a selective scope before the exact fallback takes over.
    * ``text_search``: the text search configuration of the generated ``tsvector``
      column: ``english`` stems as the SQLite store's Porter2 does; ``simple``
      only lowercases, for languages PostgreSQL has no stemmer for. It is fixed
      when the schema is created (changing it needs ``rebuild_lexical``).
    * ``probe_threads``: probes of one ``candidates`` call run concurrently on
      this many pooled connections (outside a transaction; 1: one after another).
    """

    min_connections: int = 1
    max_connections: int = 8
    pool_timeout_s: float = 10.0
    connect_timeout_s: int = 5
    statement_timeout_ms: int = 5000
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    hnsw_ef_search: int = 200
    hnsw_max_scan_tuples: int = 20_000
    text_search: str = "english"
    probe_threads: int = 4
    maintenance_work_mem: str = "512MB"

    def __post_init__(self) -> None:
        if not _IDENTIFIER.fullmatch(self.text_search):
            raise ConfigError(
                f"text_search must be a text search configuration name such as 'english' or"
                f" 'simple'; got {self.text_search!r}"
            )
        if not 1 <= self.min_connections <= self.max_connections:
            raise ConfigError("connections: need 1 <= min_connections <= max_connections")
        if self.statement_timeout_ms < 0 or self.connect_timeout_s < 1:
            raise ConfigError("statement_timeout_ms must be >= 0 and connect_timeout_s >= 1")
        if min(self.hnsw_m, self.hnsw_ef_construction, self.hnsw_ef_search) < 1:
            raise ConfigError("hnsw_m, hnsw_ef_construction and hnsw_ef_search must be >= 1")
        if not re.fullmatch(r"[0-9]+(kB|MB|GB)", self.maintenance_work_mem):
            raise ConfigError("maintenance_work_mem must look like '512MB'")
