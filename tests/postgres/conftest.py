"""Fixtures for the PostgreSQL store tests: a server (``tests/pg_server.py``), a fresh
database per test, and a store on it. Record builders live in ``pg_records``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pg_server as _server

pg_server = _server.pg_server
pg_url = _server.pg_url


@pytest.fixture
def store(pg_url: str) -> Iterator[Any]:
    """A ``PostgresStore`` on a fresh database (closed afterwards)."""
    from engram.store.postgres import PostgresConfig, PostgresStore

    opened = PostgresStore.open(pg_url, PostgresConfig(max_connections=8))
    yield opened
    opened.close()
