"""Shared fixtures: one store per test on every backend, a frozen clock, the hashing embedder.

``store_url`` is parametrised over ``BACKENDS`` (``tests/backends.py``: SQLite
file, SQLite in memory, PostgreSQL); a conformance test that takes ``mem`` (or
``store_url``) runs once per backend; ``shared_url`` is a store several instances
open at once (not in memory). A test that needs several fresh stores in
one run (a property test's examples) takes ``fresh_url`` or ``open_fresh``. An
Engram on PostgreSQL gets working memory on the test Redis. Tests that must
reach a backend's files directly (tampering with the audit table, reopening a
file) take ``sqlite_file_url`` instead. ``ENGRAM_TEST_BACKENDS=postgresql`` (a
comma-separated list of names) runs the parametrised tests on those backends only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import engram
from backends import BACKENDS, Backend, FreshUrl, RecycledDatabase, RedisPrefixes, recycled
from engram import Context, Engram
from pg_server import PgServer, pg_server, pg_url

__all__ = ["pg_server", "pg_url"]  # fixtures for every directory

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def pg_database(pg_server: PgServer) -> Iterator[RecycledDatabase]:
    """The session's PostgreSQL database, emptied for each use."""
    yield from recycled(pg_server)


@pytest.fixture
def redis_prefixes() -> Iterator[RedisPrefixes]:
    """Working-memory key prefixes on the test Redis, deleted after the test."""
    prefixes = RedisPrefixes()
    yield prefixes
    prefixes.close()


@pytest.fixture(params=BACKENDS, ids=[b.name for b in BACKENDS])
def store_backend(request: pytest.FixtureRequest) -> Backend:
    """The store backend under test."""
    backend: Backend = request.param
    return backend


@pytest.fixture
def fresh_url(store_backend: Backend, request: pytest.FixtureRequest, tmp_path: Path) -> FreshUrl:
    """Make the URL of a fresh, empty store of the current backend (each call another;
    on PostgreSQL, the one recycled database emptied again)."""
    return store_backend.urls(request, tmp_path)


@pytest.fixture
def store_url(fresh_url: FreshUrl) -> str:
    """A URL of a fresh, empty store, once per backend."""
    return fresh_url()


SHARED = [b for b in BACKENDS if b.shared]


@pytest.fixture(params=SHARED, ids=[b.name for b in SHARED])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store several instances can open at once (a file, a server), once per
    such backend: for races between writers."""
    backend: Backend = request.param
    return backend.urls(request, tmp_path)()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where ``sqlite_file_url`` keeps its file."""
    return tmp_path / "file-store.db"


@pytest.fixture
def sqlite_file_url(db_path: Path) -> str:
    """A fresh SQLite file store (for tests that reopen or open the file directly)."""
    return f"sqlite:///{db_path}"


@pytest.fixture
def clock() -> engram.FrozenClock:
    """A clock frozen at ``T0``; tests advance it explicitly."""
    return engram.FrozenClock(T0)


OpenMem = Callable[..., Engram]


@pytest.fixture
def open_mem(clock: engram.FrozenClock, redis_prefixes: RedisPrefixes) -> Iterator[OpenMem]:
    """Open more Engram instances (hashing embedder, the test clock; working memory on
    the test Redis for a server store); all closed at teardown."""
    opened: list[Engram] = []

    def _open(url: str, **kwargs: object) -> Engram:
        kwargs.setdefault("embedder", "hashing")
        kwargs.setdefault("clock", clock)
        instance = Engram.open(url, **redis_prefixes.options(url, kwargs))
        opened.append(instance)
        return instance

    yield _open
    for instance in opened:
        instance.close()


@pytest.fixture
def open_fresh(fresh_url: FreshUrl, open_mem: OpenMem) -> OpenMem:
    """``open_fresh(**options)``: Engram on a fresh store of the current backend, each
    call another (for property tests, whose examples each need an empty store).
    Close each before the next: on PostgreSQL the next call empties the same
    database."""
    return lambda **kwargs: open_mem(fresh_url(), **kwargs)


@pytest.fixture
def mem(store_url: str, open_mem: OpenMem) -> Engram:
    """Engram on a fresh store of the current backend."""
    return open_mem(store_url)


@pytest.fixture
def ctx() -> Context:
    """The default caller: tenant acme, user u1, agent coder, with every scope id set."""
    return Context(
        tenant_id="acme",
        user_id="u1",
        agent_id="coder",
        session_id="s1",
        project_id="p1",
        repository_id="r1",
        task_id="t1",
    )
