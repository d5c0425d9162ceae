"""Settings of the PostgreSQL store: ``StoreConfig.postgres`` (``engram.store.config``)."""

from engram.store.config import PostgresConfig

__all__ = ["PostgresConfig"]
