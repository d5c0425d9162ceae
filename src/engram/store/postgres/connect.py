"""Opening a PostgreSQL store: one checked connection, migrations, then the pool.

The first connection is opened directly (with ``connect_timeout``), so an
unreachable server or a refused login fails at once with a message naming host
and database, never the password. Migrations run on it under a transaction-scoped
advisory lock, so processes opening the same database at once apply each
migration exactly once. Pooled connections are autocommit (a store transaction
is an explicit ``BEGIN``), with their session settings (statement timeout, HNSW
search parameters) set once in ``configure``, before any statement is prepared:
a prepared plan would not see a later ``SET`` (FINDINGS).
"""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from engram.errors import ConfigError, MigrationError
from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.errors import Server, mapped, translate
from engram.store.postgres.schema import TEXT_CONFIG_KEY, migrations

__all__ = ["connect", "libpq_url", "migrate", "open_pool", "session_settings"]

_MIGRATE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('engram:migrate', 0))"
_LEDGER = (
    "CREATE TABLE IF NOT EXISTS engram_migrations"
    " (name text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"
)


def libpq_url(url: str) -> str:
    """``url`` as libpq takes it: SQLAlchemy-style ``postgresql+psycopg://`` (any
    ``+driver``) and ``postgres://`` become ``postgresql://``; a ``key=value``
    connection string is returned as given. Another ``+driver`` than psycopg is
    accepted too: the URL names the server, this store always speaks psycopg 3."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    base = scheme.split("+", 1)[0].lower()
    if base not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL (scheme {scheme!r}); use postgresql://...")
    return f"postgresql://{rest}"


def connect(url: str, config: PostgresConfig, server: Server) -> psycopg.Connection[Any]:
    """One autocommit connection, or ``Unavailable`` naming host and database."""
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=config.connect_timeout_s)
    except psycopg.Error as exc:
        raise translate(exc, server, "opening a connection") from None


def _applied(conn: psycopg.Connection[Any]) -> set[str] | None:
    """Names of applied migrations, or None when the ledger does not exist yet."""
    exists = conn.execute("SELECT to_regclass('engram_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return None
    return {row[0] for row in conn.execute("SELECT name FROM engram_migrations")}


def migrate(conn: psycopg.Connection[Any], config: PostgresConfig, server: Server) -> list[str]:
    """Apply pending migrations in one transaction; the names applied, in order. An
    up-to-date database is only read."""
    steps = migrations(config.text_search)
    with mapped(server, "reading the migration ledger"):
        done = _applied(conn)
    if done is not None and all(name in done for name, _ in steps):
        return []
    applied: list[str] = []
    try:
        with conn.transaction():
            conn.execute(_MIGRATE_LOCK)
            conn.execute(_LEDGER)
            done = _applied(conn) or set()
            for name, script in steps:
                if name in done:
                    continue
                _apply(conn, name, script, server)
                applied.append(name)
    except psycopg.Error as exc:  # the ledger or the lock itself failed
        raise MigrationError(
            f"migrating {server.where()} failed: {server.scrub(str(exc))}"
        ) from None
    return applied


def _apply(conn: psycopg.Connection[Any], name: str, script: str, server: Server) -> None:
    try:
        conn.execute(script.encode())  # several statements: the simple query protocol
        conn.execute("INSERT INTO engram_migrations (name) VALUES (%s)", (name,))
    except psycopg.Error as exc:
        detail = server.scrub(str(exc).strip())
        raise MigrationError(f"migration {name} failed on {server.where()}: {detail}") from None


def text_config(conn: psycopg.Connection[Any], server: Server) -> str:
    """The text search configuration the schema's ``tsvector`` column was made with."""
    with mapped(server, "reading the text search configuration"):
        row = conn.execute(
            "SELECT value FROM engram_meta WHERE key = %s", (TEXT_CONFIG_KEY,)
        ).fetchone()
    if row is None:
        raise MigrationError(f"{server.where()} has no text search configuration recorded")
    return str(row[0])


def session_settings(config: PostgresConfig) -> dict[str, str]:
    """The session settings every pooled connection gets (``set_config``)."""
    return {
        "statement_timeout": str(config.statement_timeout_ms),
        "hnsw.ef_search": str(config.hnsw_ef_search),
        "hnsw.iterative_scan": "relaxed_order",
        "hnsw.max_scan_tuples": str(config.hnsw_max_scan_tuples),
        # A scope's size varies by orders of magnitude between callers, so a generic
        # plan of a prepared statement (chosen for an average user) is wrong for most:
        # plan each execution with its own parameters.
        "plan_cache_mode": "force_custom_plan",
    }


def _configure(config: PostgresConfig) -> Any:
    settings = list(session_settings(config).items())

    def configure(conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        for name, value in settings:
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))

    return configure


def open_pool(url: str, config: PostgresConfig, server: Server) -> ConnectionPool:
    """The connection pool, opened and holding ``min_connections`` live ones."""
    pool: ConnectionPool = ConnectionPool(
        url,
        min_size=config.min_connections,
        max_size=config.max_connections,
        kwargs={"autocommit": True, "connect_timeout": config.connect_timeout_s},
        configure=_configure(config),
        timeout=config.pool_timeout_s,
        reconnect_timeout=config.reconnect_timeout_s,  # see PostgresConfig
        open=False,
        name="engram",
    )
    with mapped(server, "opening the connection pool"):
        pool.open(wait=True, timeout=config.pool_timeout_s + config.connect_timeout_s)
    return pool
