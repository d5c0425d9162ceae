"""Shared fixtures: one store per test on every backend, a frozen clock, the hashing embedder.

``store_url`` is parametrised over ``BACKENDS``; a conformance test that takes
``mem`` (or ``store_url``) runs once per backend. To add a backend (e.g.
PostgreSQL), append a ``Backend`` whose ``make_url`` returns the URL of a fresh,
empty database for one test; no test needs to change. Tests that must reach a
backend's files directly (tampering with the audit table, reopening a file)
take ``sqlite_file_url`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

import engram
from engram import Context, Engram

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Backend:
    """A store backend under test: a name (the test id) and how to get a fresh URL."""

    name: str
    make_url: Callable[[Path], str]


BACKENDS: list[Backend] = [
    Backend("sqlite-file", lambda tmp: f"sqlite:///{tmp}/engram.db"),
    Backend("sqlite-memory", lambda tmp: "sqlite://:memory:"),
]
if os.environ.get("ENGRAM_TEST_POSTGRES_URL"):  # a fresh database per test is the URL's job
    _PG = os.environ["ENGRAM_TEST_POSTGRES_URL"]
    BACKENDS.append(Backend("postgresql", lambda tmp: _PG))


@pytest.fixture(params=BACKENDS, ids=[b.name for b in BACKENDS])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of a fresh, empty store, once per backend."""
    backend: Backend = request.param
    return backend.make_url(tmp_path)


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
def open_mem(clock: engram.FrozenClock) -> Iterator[OpenMem]:
    """Open more Engram instances (hashing embedder, the test clock); all closed at teardown."""
    opened: list[Engram] = []

    def _open(url: str, **kwargs: object) -> Engram:
        kwargs.setdefault("embedder", "hashing")
        kwargs.setdefault("clock", clock)
        instance = Engram.open(url, **kwargs)  # type: ignore[arg-type]
        opened.append(instance)
        return instance

    yield _open
    for instance in opened:
        instance.close()


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
