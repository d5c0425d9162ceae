"""``open_store``: the one factory of stores, dispatching on the URL's scheme.

``sqlite:///path`` (or ``sqlite://:memory:``, or a bare path) opens the embedded
store; ``postgresql://...`` (or ``postgres://``) opens the server store, whose
module ``engram.store.postgres`` is imported only then, so SQLite users need no
PostgreSQL driver. Each backend reads its own block of ``StoreConfig``.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Protocol, cast

from engram.errors import ConfigError
from engram.store.config import StoreConfig
from engram.store.contract import Maintenance, Store
from engram.store.url import scheme_of, sqlite_options, sqlite_path

__all__ = ["Backend", "migrate", "open_store"]


class Backend(Store, Maintenance, Protocol):
    """A store and its administration: what ``open_store`` returns.

    ``applied_migrations``: the schema migrations this open applied, in order
    (empty when the schema was up to date)."""

    applied_migrations: list[str]


def open_store(url: str, config: StoreConfig | None = None) -> Backend:
    """Open (creating or migrating if needed) the store at ``url``. Options in a
    ``sqlite://`` URL (``?synchronous=NORMAL``) override ``config.sqlite``'s."""
    config = config or StoreConfig()
    scheme = scheme_of(url)
    if scheme == "sqlite":
        from engram.store.sqlite import SQLiteStore

        settings = config.sqlite
        options = sqlite_options(url)
        if "synchronous" in options:
            settings = dataclasses.replace(settings, synchronous=options["synchronous"])
        return SQLiteStore(sqlite_path(url), settings)
    if scheme == "postgresql":
        return _postgres(url, config)
    raise ConfigError(f"unsupported store URL scheme {scheme!r}; use sqlite:///path or "
                      "postgresql://user@host/db")  # fmt: skip


def _postgres(url: str, config: StoreConfig) -> Backend:
    """The PostgreSQL store (``engram.store.postgres.open_postgres``), imported lazily."""
    try:
        module = importlib.import_module("engram.store.postgres")
    except ImportError as exc:
        raise ConfigError(
            f"postgresql:// URLs need the PostgreSQL backend, which is not available here "
            f"({exc}); install engram with its postgres extra, or use sqlite:///path"
        ) from exc
    return cast(Backend, module.open_postgres(url, config.postgres))


def migrate(url: str, config: StoreConfig | None = None) -> list[str]:
    """Bring the schema of the store at ``url`` up to date (opening a store migrates
    it); the names of the migrations applied, in order (``engram migrate``)."""
    store = open_store(url, config)
    try:
        return list(store.applied_migrations)
    finally:
        store.close()
