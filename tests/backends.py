"""Store backends under test, and the services a server backend needs.

``BACKENDS`` (used by ``tests/conftest.py``) lists each backend with a way to make
fresh store URLs for one test: SQLite files, SQLite in memory and PostgreSQL.
PostgreSQL runs on one server per session (``tests/pg_server.py``) in one
recycled database per pytest process: migrated once, then emptied between uses
(``RecycledDatabase.fresh_url``), which costs a few milliseconds where a new
database per test costs ~70 (``CREATE DATABASE`` plus the migrations).

A server store has no SQLite file beside it for working memory, so an Engram on
PostgreSQL gets working memory on the test Redis (``ENGRAM_TEST_REDIS_URL``),
under a key prefix of its own (``RedisPrefixes``), deleted at teardown.
Missing services skip with the reason, or fail under ``CI=true``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engram import Config
from engram.store.url import scheme_of

__all__ = [
    "BACKENDS", "REDIS_URL", "Backend", "RecycledDatabase", "RedisPrefixes", "missing",
    "redis_client", "table_rows",
]  # fmt: skip

REDIS_URL = os.environ.get("ENGRAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

# Tables a test writes; emptied between uses of the recycled database. The audit
# log refuses TRUNCATE by trigger, so the reset disables it for the statement.
_TABLES = (
    "records, forgotten, audit, audit_heads, audit_subjects, traces, share_grants,"
    " procedure_stats, consolidated, consolidation_runs, tombstones, tombstone_keys,"
    " cache_generations, sweeps"
)
_RESET = (
    "ALTER TABLE audit DISABLE TRIGGER audit_no_truncate;"
    f" TRUNCATE {_TABLES} RESTART IDENTITY;"
    " ALTER TABLE audit ENABLE TRIGGER audit_no_truncate;"
    " DROP INDEX IF EXISTS records_embedding;"
    " ALTER TABLE records ALTER COLUMN embedding TYPE vector;"
    " DELETE FROM engram_meta WHERE key <> 'text_search_config';"
)
_KICK = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
# What a test could change besides rows: columns, indexes, triggers, meta. A reset
# that does not bring this back to the migrated state makes a new database.
_SHAPE = (
    "SELECT string_agg(x, E'\\n' ORDER BY x) FROM ("
    " SELECT table_name::text || '.' || column_name::text || ':' || data_type || ':'"
    "   || coalesce(generation_expression, '') AS x FROM information_schema.columns"
    "   WHERE table_schema = 'public'"
    " UNION ALL SELECT indexdef::text FROM pg_indexes WHERE schemaname = 'public'"
    " UNION ALL SELECT tgname || ':' || tgenabled::text FROM pg_trigger WHERE NOT tgisinternal"
    " UNION ALL SELECT key || '=' || value FROM engram_meta) s"
)


def missing(reason: str) -> None:
    """Skip outside CI; fail in CI, where every service must be there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def redis_client() -> Any:
    """A client of the test Redis, or skip/fail with the reason it is missing."""
    try:
        import redis
    except ImportError:
        missing("redis-py is not installed (pip install 'engram[redis]')")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        missing(f"no Redis at {REDIS_URL} ({type(exc).__name__}); start redis-server")
    return client


@dataclass
class RecycledDatabase:
    """One migrated database, emptied for each use (``fresh_url``).

    Before emptying it, every other connection to it is terminated (an instance a
    failed test left open must not see the next test's rows). When the reset
    cannot bring the schema back (a test altered it), the database is replaced."""

    server: Any  # tests.pg_server.PgServer
    name: str | None = None
    url: str = ""
    shape: str = ""
    resets: int = 0

    def fresh_url(self, _tmp: Path | None = None) -> str:
        """The URL of the empty, migrated database."""
        if self.name is not None and self._reset():
            return self.url
        self._replace()
        return self.url

    def _replace(self) -> None:
        from engram.store.postgres.__main__ import run_migrations

        if self.name is not None:
            self.server.drop(self.name)
        self.name, self.url = self.server.create()
        run_migrations(self.url)
        self.shape = self._shape()

    def _shape(self) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(_SHAPE).fetchone()
        return hashlib.sha256(str(row).encode()).hexdigest()

    def _reset(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(_KICK)
                with conn.transaction():
                    conn.execute(_RESET.encode())
        except psycopg.Error:
            return False
        self.resets += 1
        return self._shape() == self.shape

    def close(self) -> None:
        """Drop the database."""
        if self.name is not None:
            self.server.drop(self.name)
            self.name = None


@dataclass
class RedisPrefixes:
    """Working memory on the test Redis for Engram instances on a server store: one
    key prefix per store URL handed out (``renew`` starts another), all deleted
    by ``close``."""

    by_url: dict[str, str] = field(default_factory=dict)
    made: list[str] = field(default_factory=list)

    def renew(self, url: str) -> None:
        """The next Engram on ``url`` (a ``postgresql://`` one) gets a new, empty
        working memory."""
        self.by_url.pop(url, None)

    def options(self, url: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``Engram.open`` options for ``url``: unchanged for SQLite; for a server
        store, ``working`` on the test Redis under this URL's prefix."""
        if scheme_of(url) != "postgresql" or "working" in kwargs:
            return kwargs
        from engram.store.postgres.connect import libpq_url

        url = libpq_url(url)  # postgresql+psycopg:// names the same store
        redis_client().close()
        if url not in self.by_url:
            self.by_url[url] = f"t{uuid.uuid4().hex[:12]}"
            self.made.append(self.by_url[url])
        config: Config = kwargs.get("config") or Config()
        working = dataclasses.replace(config.working, redis_prefix=self.by_url[url])
        return {**kwargs, "config": dataclasses.replace(config, working=working),
                "working": REDIS_URL}  # fmt: skip

    def close(self) -> None:
        """Delete every key under the prefixes handed out."""
        if not self.made:
            return
        client = redis_client()
        for prefix in self.made:
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if keys:
                client.delete(*keys)
        client.close()


FreshUrl = Callable[[], str]


@dataclass(frozen=True)
class Backend:
    """A store backend under test: a name (the test id), for one test a maker of URLs
    of fresh, empty stores (each call empties or makes another), and whether
    several instances (threads, processes) can open one store (not in memory)."""

    name: str
    urls: Callable[[pytest.FixtureRequest, Path], FreshUrl]
    shared: bool = True


def _files(_request: pytest.FixtureRequest, tmp: Path) -> FreshUrl:
    numbers = itertools.count()

    def fresh() -> str:
        n = next(numbers)
        return f"sqlite:///{tmp}/engram{n or ''}.db"

    return fresh


def _postgres(request: pytest.FixtureRequest, _tmp: Path) -> FreshUrl:
    database: RecycledDatabase = request.getfixturevalue("pg_database")
    prefixes: RedisPrefixes = request.getfixturevalue("redis_prefixes")

    def fresh() -> str:
        url = database.fresh_url()
        prefixes.renew(url)
        return url

    return fresh


BACKENDS: list[Backend] = [
    Backend("sqlite-file", _files),
    Backend("sqlite-memory", lambda _r, _t: lambda: "sqlite://:memory:", shared=False),
    Backend("postgresql", _postgres),
]
if os.environ.get("ENGRAM_TEST_BACKENDS"):  # e.g. "postgresql" to run one backend only
    _ONLY = set(os.environ["ENGRAM_TEST_BACKENDS"].split(","))
    BACKENDS = [b for b in BACKENDS if b.name in _ONLY]


def recycled(server: Any) -> Iterator[RecycledDatabase]:
    """A session's recycled database on ``server``, dropped at the end."""
    database = RecycledDatabase(server)
    yield database
    database.close()


def table_rows(store: Any, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` of an open store as dicts, read past the contract (a
    test checking what storage holds, such as the audit table's every entry)."""
    from engram.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        return [dict(row) for row in store._rows((f"SELECT * FROM {table}", {}))]
    from psycopg.rows import dict_row

    with store.connection("a test read") as conn, conn.cursor(row_factory=dict_row) as cursor:
        return list(cursor.execute(f"SELECT * FROM {table}").fetchall())
