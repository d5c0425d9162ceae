"""``SQLiteStore``: the layers of the package, with the in-memory engines it ranks with."""

from __future__ import annotations

from engram.store.config import SQLiteConfig
from engram.store.engines import MemoryLexicon, MemoryVectors
from engram.store.sqlite.lifecycle import Lifecycle
from engram.store.vectors import ScanPolicy

__all__ = ["SQLiteStore"]


class SQLiteStore(Lifecycle):
    """System of record on SQLite with derived in-memory lexical and vector indexes
    (``engram.store.engines``, which load their rows through this store)."""

    def __init__(self, path: str, settings: SQLiteConfig | None = None) -> None:
        settings = settings or SQLiteConfig()
        policy = ScanPolicy(settings.scan_threads(), settings.vector_parallel_rows,
                            settings.vector_estimate_rows)  # fmt: skip
        self._vector_engine = MemoryVectors(self, settings.vector_cache_rows, policy)
        self._lexical_engine = MemoryLexicon(self, settings.lexical_cache_rows)
        super().__init__(path, settings)

    def close(self) -> None:
        """Close the connections and drop the engines' partitions; the store is
        unusable afterwards."""
        with self._lock:
            self._vector_engine.clear()
            self._lexical_engine.clear()
            self._close_connections()
