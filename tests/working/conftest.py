"""Fixtures for working memory: both backends, each test in a namespace of its own.

Redis is the real server named by ``ENGRAM_TEST_REDIS_URL`` (default
``redis://127.0.0.1:6379/15``). When it cannot be reached the Redis cases skip
with the reason, except under ``CI=true``, where they fail: CI starts
``redis-server`` (``.ci/run``). Each test gets a fresh key prefix, and its keys
are deleted at teardown, so tests running side by side on one Redis never meet.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engram import Config, Engram
from engram.working import WorkingConfig

REDIS_URL = os.environ.get("ENGRAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
WORKING_BACKENDS = ["sqlite", "redis"]


def missing(reason: str) -> None:
    """Skip outside CI; fail in CI, where every service must be there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture
def redis_py() -> None:
    """redis-py must be importable (the ``redis`` extra); no server is needed."""
    try:
        import redis  # noqa: F401
    except ImportError:
        missing("redis-py is not installed (pip install 'engram[redis]')")


def redis_client() -> object:
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


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A fresh key prefix on the test Redis; its keys are deleted afterwards."""
    client: object = redis_client()
    prefix = f"t{uuid.uuid4().hex[:12]}"
    yield prefix
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))  # type: ignore[attr-defined]
    if keys:
        client.delete(*keys)  # type: ignore[attr-defined]
    client.close()  # type: ignore[attr-defined]


OpenWorking = Callable[..., Engram]


@pytest.fixture(params=WORKING_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The working-memory backend under test."""
    return str(request.param)


@pytest.fixture
def open_working_mem(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path,
    open_mem: Callable[..., Engram],
) -> OpenWorking:  # fmt: skip
    """``open_working_mem(**working_config)``: Engram on a file store in ``tmp_path`` with
    working memory on the current backend (the same store file on each call)."""
    prefix = request.getfixturevalue("redis_prefix") if backend == "redis" else "engram"

    def _open(url: str | None = None, **fields: object) -> Engram:
        working = WorkingConfig(redis_prefix=prefix, **fields)  # type: ignore[arg-type]
        spec = REDIS_URL if backend == "redis" else None
        return open_mem(url or f"sqlite:///{tmp_path}/engram.db",
                        config=Config(working=working), working=spec)  # fmt: skip

    return _open


@pytest.fixture
def wmem(open_working_mem: OpenWorking) -> Engram:
    """Engram with working memory on the current backend."""
    return open_working_mem()
