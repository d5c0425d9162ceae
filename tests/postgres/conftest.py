"""Fixtures for the PostgreSQL store tests: a store on a fresh database (``pg_url``,
from ``tests/pg_server.py`` through ``tests/conftest.py``). Record builders live in
``pg_records``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def store(pg_url: str) -> Iterator[Any]:
    """A ``PostgresStore`` on a fresh database (closed afterwards)."""
    from engram.store.postgres import PostgresConfig, PostgresStore

    opened = PostgresStore.open(pg_url, PostgresConfig(max_connections=8))
    yield opened
    opened.close()
