"""The PostgreSQL store: records, lexical (``tsvector``) and vector (pgvector HNSW)
indexes in one database, behind the ``engram.store.contract`` protocols.

Needs the ``postgres`` extra (``pip install 'engram[postgres]'``: psycopg 3,
psycopg_pool, pgvector) and a server with the ``vector`` extension available.
"""

from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.errors import ConstraintViolation, StatementTimeout, Unavailable
from engram.store.postgres.store import PostgresStore


def open_postgres(url: str, config: PostgresConfig | None = None) -> PostgresStore:
    """The factory ``engram.store.open.open_store`` calls for ``postgresql://`` URLs."""
    return PostgresStore.open(url, config)


__all__ = [
    "ConstraintViolation", "PostgresConfig", "PostgresStore", "StatementTimeout", "Unavailable",
    "open_postgres",
]  # fmt: skip
