"""Per-key rate limits: a token bucket per API key, 429 problem+json with Retry-After.

The bucket's arithmetic is checked on a test clock; the REST checks go through
the real app on a real SQLite file: a key past its burst is refused with 429
and ``Retry-After``, the refused request stores nothing, another key (even of
the same tenant) is not slowed, and ``rate_limit=0`` turns the limit off.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from limits_support import HungServer, is_problem, rest

from engram import ConfigError, Context, Engram
from engram.surfaces.rest.ratelimit import RateLimited, SharedBuckets, TokenBuckets
from engram.surfaces.rest.settings import RestSettings

ME = {"user_id": "u1", "agent_id": "coder"}


class Clock:
    """Seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_refills_at_its_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=2.0, burst=3, clock=clock)
    for _ in range(3):
        buckets.take("k1")
    with pytest.raises(RateLimited) as caught:
        buckets.take("k1")
    assert caught.value.retry_after == 1  # half a second to the next token: whole seconds up
    buckets.take("k2")  # another key has a bucket of its own
    clock.now += 0.5
    buckets.take("k1")
    with pytest.raises(RateLimited):
        buckets.take("k1")
    clock.now += 60  # a long pause refills to the burst, never beyond it
    for _ in range(3):
        buckets.take("k1")
    with pytest.raises(RateLimited):
        buckets.take("k1")


def test_retry_after_counts_whole_seconds_up_at_a_slow_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=0.1, burst=1, clock=clock)
    buckets.take("k")
    with pytest.raises(RateLimited) as caught:
        buckets.take("k")
    assert caught.value.retry_after == 10
    assert "retry after 10 s" in str(caught.value)


@pytest.mark.parametrize(
    "changes", [{"rate_limit": -1}, {"rate_limit": float("nan")}, {"rate_burst": 0},
                {"rate_burst": 2.5}, {"rate_limit": True}],
)  # fmt: skip
def test_unusable_rate_settings_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        RestSettings(**changes)  # type: ignore[arg-type]


def _written(mem: Engram) -> int:
    mem.flush()
    return len(mem.list(Context(tenant_id="acme", user_id="u1", agent_id="coder"), limit=1000))


def test_a_key_past_its_burst_gets_429_and_nothing_is_stored(
    sqlite_file_url: str, tmp_path: Path
) -> None:
    mem = Engram.open(sqlite_file_url, embedder="hashing")
    settings = RestSettings(rate_limit=0.01, rate_burst=3, mcp_path=None)
    try:
        with rest(mem, tmp_path, settings) as api:
            for i in range(3):
                body = {**ME, "content": f"Queue {i} drains every {i + 1} minutes."}
                assert api.call("POST", "/v1/memories", json=body).status_code == 200
            refused = api.call("POST", "/v1/memories", json={**ME, "content": "Never stored."})
            problem = is_problem(refused, 429)
            assert problem["type"] == "/problems/rate-limited"
            assert int(refused.headers["retry-after"]) >= 1
            assert "rate limit" in problem["detail"]
            assert _written(mem) == 3
            garbled = api.call("POST", "/v1/memories", content=b'{"user_id": ',
                               headers={"Content-Type": "application/json"})  # fmt: skip
            is_problem(garbled, 429)  # the late key check of a malformed body: 429, not a 500
            other = api.call("GET", "/v1/memories?user_id=u1&agent_id=coder", key="acme2")
            assert other.status_code == 200  # the same tenant's other key is not slowed
            assert api.call("GET", "/healthz").status_code == 200  # no key, no bucket
            schema = api.client.get("/openapi.json").json()
            declared = schema["paths"]["/v1/memories"]["post"]["responses"]["429"]
            assert "Retry-After" in declared["headers"]
    finally:
        mem.close()


def test_rate_limit_zero_turns_the_limit_off(sqlite_file_url: str, tmp_path: Path) -> None:
    mem = Engram.open(sqlite_file_url, embedder="hashing")
    settings = RestSettings(rate_limit=0, rate_burst=1, mcp_path=None)
    try:
        with rest(mem, tmp_path, settings) as api:
            statuses = {api.call("GET", "/v1/memories?user_id=u1").status_code
                        for _ in range(30)}  # fmt: skip
            assert statuses == {200}
    finally:
        mem.close()


def test_serve_takes_the_rate_flags() -> None:
    import argparse

    from engram.surfaces.rest.cli import add_command

    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--rate-limit", "5", "--rate-burst", "9"])
    assert (args.rate_limit, args.rate_burst) == (5.0, 9)
    defaults = parser.parse_args(["serve"])
    assert (defaults.rate_limit, defaults.rate_burst) == (100.0, 200)


def test_workers_share_a_bucket_through_redis(sqlite_file_url: str, tmp_path: Path) -> None:
    """Two apps over one store stand for two ``--workers`` processes: with the buckets
    in Redis a key's burst is spent across both; with Redis gone each falls back to
    buckets of its own and keeps answering."""
    from fastapi.testclient import TestClient
    from limits_support import PrivateRedis, Rest

    from engram.surfaces.rest import KeyRing, create_app

    redis_server = PrivateRedis()
    mem = Engram.open(sqlite_file_url, embedder="hashing")
    shared = RestSettings(rate_limit=0.01, rate_burst=3, mcp_path=None,
                          rate_limit_redis=redis_server.url)  # fmt: skip
    listing = "/v1/memories?user_id=u1"
    try:
        with (
            rest(mem, tmp_path, shared) as first,
            TestClient(create_app(mem, KeyRing(path=tmp_path / "keys.json"), shared)) as client,
        ):
            second = Rest(client, mem, first.keys)  # the same keys, another process's app
            assert [first.call("GET", listing).status_code for _ in range(2)] == [200, 200]
            assert second.call("GET", listing).status_code == 200
            is_problem(first.call("GET", listing), 429)
            is_problem(second.call("GET", listing), 429)
            redis_server.kill()
            assert first.call("GET", listing).status_code == 200  # its own bucket now
    finally:
        mem.close()
        redis_server.kill()


def test_the_worker_spec_carries_the_rate_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.surfaces.rest.workers import WorkerSpec

    spec = WorkerSpec("sqlite:///x.db", "redis://127.0.0.1:1/0", "hashing", None, 4096,
                      "127.0.0.1", 7.5, 11, "redis://127.0.0.1:1/0")  # fmt: skip
    for name in WorkerSpec.__dataclass_fields__:
        monkeypatch.setenv(f"ENGRAM_SERVE_{name.upper()}", "")  # undone after the test
    spec.export()
    assert WorkerSpec.imported() == spec


def _keyed_app(mem: Engram, tmp_path: Path, settings: RestSettings) -> tuple[Any, str]:
    """The REST app over ``mem`` and one admin key of tenant acme."""
    from engram.surfaces.rest import KeyFile, KeyRing, create_app

    path = tmp_path / "keys.json"
    key = KeyFile(path).create("acme", admin=True)[1]
    return create_app(mem, KeyRing(path=path), settings), key


def test_a_hung_rate_limit_redis_never_stalls_the_event_loop(
    sqlite_file_url: str, tmp_path: Path
) -> None:
    """A Redis that accepts and never answers costs the first wave of requests one
    timeout (0.5 s) together, not 0.5 s each on the event loop; ``/healthz`` answers
    meanwhile, and until the next probe no request waits on that Redis again."""
    import asyncio

    import httpx

    hung = HungServer()
    mem = Engram.open(sqlite_file_url, embedder="hashing")
    settings = RestSettings(rate_limit=1000, rate_burst=1000, mcp_path=None,
                            rate_limit_redis=hung.url)  # fmt: skip
    app, key = _keyed_app(mem, tmp_path, settings)
    auth = {"Authorization": f"Bearer {key}"}
    listing = "/v1/memories?user_id=u1"

    async def scenario() -> tuple[list[int], float, float, float]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram") as client:
            started = time.monotonic()
            wave = [asyncio.create_task(client.get(listing, headers=auth)) for _ in range(8)]
            await asyncio.sleep(0.05)  # the wave is waiting on Redis now
            assert (await client.get("/healthz")).status_code == 200
            healthz = time.monotonic() - started
            statuses = [answer.status_code for answer in await asyncio.gather(*wave)]
            together = time.monotonic() - started
            after = time.monotonic()
            statuses += [(await client.get(listing, headers=auth)).status_code
                         for _ in range(6)]  # fmt: skip
            return statuses, healthz, together, time.monotonic() - after

    try:
        statuses, healthz, together, after = asyncio.run(scenario())
    finally:
        mem.close()
        hung.close()
    assert statuses == [200] * 14  # per-process buckets answer while Redis hangs
    assert healthz < 0.4, f"/healthz took {healthz:.2f} s behind a hung Redis"
    assert together < 2.0, f"8 requests took {together:.2f} s: serialized on the loop"
    assert after < 1.0, f"6 requests after the failure took {after:.2f} s: waited on Redis"


def test_a_degraded_limiter_probes_redis_once_per_interval(tmp_path: Path) -> None:
    """While Redis fails the buckets are the process's own; after ``probe_every`` one
    request (one only) tries Redis again, and when Redis answers the shared buckets
    are back."""
    import anyio
    from limits_support import PrivateRedis

    from engram.working.redis_url import RedisTarget

    redis_server = PrivateRedis()
    clock = Clock()
    client = RedisTarget.parse(redis_server.url).client(0.5)
    buckets = SharedBuckets(client, rate=100, burst=100, probe_every=5.0, clock=clock)

    async def timed(limiter: SharedBuckets, count: int) -> list[float]:
        spent: list[float] = []

        async def one() -> None:
            started = time.monotonic()
            await limiter.acquire("k")
            spent.append(time.monotonic() - started)

        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one)
        return sorted(spent)

    hung = HungServer()
    stuck = SharedBuckets(RedisTarget.parse(hung.url).client(0.5), rate=100, burst=100,
                          probe_every=5.0, clock=clock)  # fmt: skip
    try:
        anyio.run(stuck.acquire, "k")  # the first failure: one timeout, then degraded
        assert max(anyio.run(timed, stuck, 5)) < 0.3  # inside the interval: never asks Redis
        clock.now += 5.1
        spent = anyio.run(timed, stuck, 5)
        assert spent[-1] >= 0.4  # one probe waited on Redis ...
        assert spent[-2] < 0.3  # ... and the others did not
        assert max(anyio.run(timed, stuck, 3)) < 0.3  # the probe failed: another interval

        anyio.run(buckets.acquire, "k")
        assert client.exists("engram:ratelimit:k") == 1  # shared while Redis answers
        redis_server.kill()
        anyio.run(buckets.acquire, "k")  # refused: the process's own bucket
        redis_server.start()
        anyio.run(buckets.acquire, "k2")
        assert client.exists("engram:ratelimit:k2") == 0  # no probe before the interval
        clock.now += 5.1
        anyio.run(buckets.acquire, "k3")  # the probe finds Redis again
        anyio.run(buckets.acquire, "k4")
        assert client.exists("engram:ratelimit:k3", "engram:ratelimit:k4") == 2
    finally:
        hung.close()
        redis_server.kill()


def test_a_probe_that_breaks_off_leaves_the_next_interval_its_probe() -> None:
    """A probe that ends in an error other than Redis's (an interrupt, a reply it cannot
    read) must not leave the breaker believing a probe is still out: the next interval
    probes again, through the blocking ``take`` as through ``acquire``."""
    from limits_support import PrivateRedis

    from engram.working.redis_url import RedisTarget

    redis_server = PrivateRedis()
    clock = Clock()
    client = RedisTarget.parse(redis_server.url).client(0.5)
    buckets = SharedBuckets(client, rate=100, burst=100, probe_every=5.0, clock=clock)
    try:
        redis_server.kill()
        buckets.take("k")  # Redis down: degraded, the process's own bucket answers
        redis_server.start()
        working_take = buckets._take
        calls: list[str] = []

        def broken(*args: Any, **kwargs: Any) -> Any:
            calls.append("broken")
            raise KeyboardInterrupt

        buckets._take = broken
        clock.now += 5.1
        with pytest.raises(KeyboardInterrupt):
            buckets.take("k")  # the probe breaks off
        buckets._take = working_take
        clock.now += 5.1
        buckets.take("k2")  # the next interval's probe reaches Redis
        assert calls == ["broken"]
        assert client.exists("engram:ratelimit:k2") == 1
    finally:
        redis_server.kill()
