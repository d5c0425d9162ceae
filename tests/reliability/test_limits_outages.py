"""A dead Redis or PostgreSQL: ``Unavailable`` naming host and port on the SDK, 503
problem+json on REST, ``/readyz`` saying which part is down; and recovery, without
reopening Engram, once the server is back.

Each test starts servers of its own (a ``redis-server`` on a free port, an
embedded PostgreSQL on its own socket), stops them mid-run and starts them again
in place; the shared test servers are never touched. What was acknowledged
before the outage is all there after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from limits_support import PrivatePostgres, PrivateRedis, is_problem, rest

from engram import Config, Context, Engram, Unavailable
from engram.store.config import PostgresConfig, StoreConfig
from engram.surfaces.rest.settings import RestSettings
from engram.working import WorkingConfig

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1")
ME = {"user_id": "u1", "agent_id": "coder", "session_id": "s1"}
QUICK = Config(working=WorkingConfig(redis_timeout_seconds=0.5),
               store=StoreConfig(postgres=PostgresConfig(pool_timeout_s=0.5,
                                                         connect_timeout_s=2)))  # fmt: skip
OPEN = RestSettings(mcp_path=None, rate_limit=0)


@pytest.fixture
def redis_server() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    yield server
    server.kill()


@pytest.fixture
def postgres_server() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    yield server
    server.close()


def _eventually(check: object, seconds: float = 15.0) -> None:
    """Call ``check`` until it stops raising (a pool reconnects in the background)."""
    assert callable(check)
    deadline = time.monotonic() + seconds
    while True:
        try:
            check()
            return
        except (AssertionError, Unavailable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_dead_redis_is_unavailable_then_recovers(
    redis_server: PrivateRedis, tmp_path: Path
) -> None:
    where = f"127.0.0.1:{redis_server.port}"
    mem = Engram.open(f"sqlite:///{tmp_path / 'r.db'}", embedder="hashing",
                      working=redis_server.url, config=QUICK)  # fmt: skip
    try:
        with rest(mem, tmp_path, OPEN) as api:
            mem.remember(CTX, "The staging database is restored every Sunday night.")
            assert api.call("PUT", "/v1/working/step", json={**ME, "value": 1}).status_code == 200
            assert api.client.get("/readyz").status_code == 200
            redis_server.kill()
            with pytest.raises(Unavailable) as caught:
                mem.working(CTX).set("step", 2)
            assert where in str(caught.value)
            refused = is_problem(api.call("PUT", "/v1/working/step", json={**ME, "value": 2}), 503)
            assert refused["type"] == "/problems/unavailable"
            assert where in refused["detail"]
            ready = is_problem(api.client.get("/readyz"), 503)
            assert "working memory" in ready["detail"]
            assert where not in ready["detail"]  # no key was shown: no host either
            recall = api.call(
                "POST", "/v1/recall", json={**ME, "query": "when is staging restored?"}
            )
            assert recall.status_code == 200
            assert recall.json()["status"] == "partial"  # the stored memories still answer
            assert "Sunday night" in recall.json()["prompt"]
            redis_server.start()  # the same port, empty (it saved nothing)
            assert api.call("PUT", "/v1/working/step", json={**ME, "value": 3}).status_code == 200
            assert mem.working(CTX).get("step").value == 3  # type: ignore[union-attr]
            assert api.client.get("/readyz").json() == {"status": "ready"}
    finally:
        mem.close()


def test_a_dead_postgres_is_unavailable_then_recovers(
    postgres_server: PrivatePostgres, redis_server: PrivateRedis, tmp_path: Path
) -> None:
    mem = Engram.open(postgres_server.url, embedder="hashing", working=redis_server.url,
                      config=QUICK)  # fmt: skip
    try:
        with rest(mem, tmp_path, OPEN) as api:
            before = [mem.remember(CTX, f"Queue {i} drains every {i + 1} minutes.").record
                      for i in range(3)]  # fmt: skip
            assert api.client.get("/readyz").status_code == 200
            postgres_server.stop()
            started = time.monotonic()
            with pytest.raises(Unavailable) as caught:
                mem.remember(CTX, "The deploy window is Tuesday.")
            assert time.monotonic() - started < 10  # bounded by the pool's timeout
            assert "PostgreSQL" in str(caught.value)
            assert "server is down" in str(caught.value)
            assert "password" not in str(caught.value).lower()
            body = {**ME, "content": "The deploy window is Tuesday."}
            refused = is_problem(api.call("POST", "/v1/memories", json=body), 503)
            assert refused["type"] == "/problems/unavailable"
            asked = {**ME, "query": "how often does queue 2 drain?"}
            recall = api.call("POST", "/v1/recall", json=asked)
            assert recall.status_code == 200
            assert recall.json()["status"] == "unavailable"  # every channel failed: said so
            listed = api.call("GET", "/v1/memories?user_id=u1&agent_id=coder")
            assert is_problem(listed, 503)["type"] == "/problems/unavailable"
            assert "store" in is_problem(api.client.get("/readyz"), 503)["detail"]
            postgres_server.start()

            def recovered() -> None:
                assert api.client.get("/readyz").status_code == 200

            _eventually(recovered)
            assert api.call("POST", "/v1/memories", json=body).status_code == 200
            ids = {r.id for r in mem.list(CTX, limit=100)}
            assert {r.id for r in before if r is not None} <= ids
            assert len(ids) == 4  # the refused write was not half-stored
    finally:
        mem.close()
