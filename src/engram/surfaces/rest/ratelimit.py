"""Per-key rate limits: a token bucket for each API key, refusals as 429 problems.

Each authenticated request takes one token from its key's bucket. A bucket holds
at most ``burst`` tokens and refills at ``rate`` tokens a second; a request that
finds less than one token is refused with ``RateLimited``, which the problem
handler answers 429 with ``Retry-After`` (whole seconds until a token is back).
Nothing of a refused request runs: the check sits in the authentication
dependency, before the body reaches the SDK.

``TokenBuckets`` live in the server process. ``engram serve --workers N`` with
working memory on Redis uses ``SharedBuckets`` instead: one bucket per key in
that Redis for every worker, at the price of one Redis round trip per request
(on a worker thread, behind a circuit breaker: a hung Redis never stalls the
event loop, and while it fails only one probe every few seconds waits on it).
Without Redis each of the N workers keeps its own buckets, so a key may make up
to N times the rate there (the socket spreads connections over the workers);
that is documented rather than hidden. One process alone keeps its buckets in
memory (exact, and no round trip).

Only keys that authenticated have buckets, so the table is bounded by the key
file; a request with a wrong key is refused 401 before any bucket is touched.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread

__all__ = ["Limiter", "RateLimited", "SharedBuckets", "TokenBuckets"]

_log = logging.getLogger("engram.rest")
_PROBE_EVERY_S = 5.0  # a degraded shared limiter asks Redis again this often, once


class Limiter(Protocol):
    """What the authentication asks of a rate limit: one token of a key, or
    ``RateLimited``."""

    def take(self, key_id: str) -> None:
        """Spend one token of ``key_id``'s bucket, or raise ``RateLimited``."""
        ...

    async def acquire(self, key_id: str) -> None:
        """``take`` for a caller on the event loop: never blocks it."""
        ...


class RateLimited(Exception):
    """A key spent its tokens; ``retry_after`` is whole seconds until the next one."""

    def __init__(self, key_id: str, rate: float, burst: int, retry_after: int) -> None:
        super().__init__(f"API key {key_id!r} is over its rate limit ({rate:g} requests a "
                         f"second, bursts of {burst}); retry after {retry_after} s")  # fmt: skip
        self.retry_after = retry_after


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class TokenBuckets:
    """One token bucket per key id, safe to share between the server's threads.

    ``rate`` is tokens a second (> 0), ``burst`` the bucket's size (>= 1); ``clock``
    is seconds on a monotonic clock (a test passes its own)."""

    def __init__(self, rate: float, burst: int,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    async def acquire(self, key_id: str) -> None:
        """``take`` on the event loop: a lock held for microseconds, no thread hop."""
        self.take(key_id)

    def take(self, key_id: str) -> None:
        """Spend one token of ``key_id``'s bucket, or raise ``RateLimited``."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key_id)
            if bucket is None:
                bucket = self._buckets[key_id] = _Bucket(float(self.burst), now)
            elapsed = max(0.0, now - bucket.stamp)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
            bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            missing = 1.0 - bucket.tokens
        raise RateLimited(key_id, self.rate, self.burst, max(1, math.ceil(missing / self.rate)))


# One bucket as a Redis hash {tokens, stamp}, refilled and spent atomically; the
# clock is the Redis server's, so every worker sees the same time.
_TAKE = """
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(held[1]) or burst
local stamp = tonumber(held[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local granted = 0
if tokens >= 1 then tokens = tokens - 1; granted = 1 end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {granted, tostring(tokens)}
"""


class SharedBuckets:
    """The buckets of every worker process in one Redis (``engram serve --workers N``
    with ``--working redis://``): a key gets its rate across all of them, at the price
    of one Redis round trip per request, made on a worker thread (``acquire``) so a
    slow or hung Redis never stalls the event loop.

    A circuit breaker guards that round trip: after Redis fails (an error or its
    timeout) the process uses buckets of its own (the limit holds per process,
    requests still answer, the log says so once) and asks Redis again only every
    ``probe_every`` seconds, one request at a time; when a probe answers, the shared
    buckets are back. ``clock`` is monotonic seconds (a test passes its own)."""

    def __init__(self, client: Any, rate: float, burst: int, prefix: str = "engram", *,
                 probe_every: float = _PROBE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.rate = rate
        self.burst = burst
        self._client = client
        self._take = client.register_script(_TAKE)
        self._prefix = f"{prefix}:ratelimit:"
        self._local = TokenBuckets(rate, burst)
        self._probe_every = probe_every
        self._clock = clock
        self._state = threading.Lock()
        self._degraded = False
        self._probing = False
        self._next_probe = 0.0

    def take(self, key_id: str) -> None:
        """Spend one token of ``key_id``'s shared bucket, or raise ``RateLimited``;
        blocks on Redis (for a caller on a thread of its own)."""
        if not self._ask_redis():
            self._local.take(key_id)
            return
        try:
            outcome = self._shared(key_id)
        except BaseException:  # not Redis's error (interrupted, a bad reply): free the probe
            self._release_probe()
            raise
        self._settle(key_id, outcome)

    async def acquire(self, key_id: str) -> None:
        """``take`` for the event loop: the Redis round trip on a worker thread, none at
        all while the breaker is open."""
        if not self._ask_redis():
            self._local.take(key_id)
            return
        try:
            outcome = await anyio.to_thread.run_sync(self._shared, key_id)
        except BaseException:  # cancelled, maybe before the thread ran: free the probe
            self._release_probe()
            raise
        self._settle(key_id, outcome)

    def _release_probe(self) -> None:
        """Let a later request probe: this one ended without Redis's answer or error."""
        with self._state:
            self._probing = False

    def _ask_redis(self) -> bool:
        """Whether this request goes to Redis: always while it answers; while degraded,
        only the one probe of each interval."""
        with self._state:
            if not self._degraded:
                return True
            if self._probing or self._clock() < self._next_probe:
                return False
            self._probing = True
            return True

    def _shared(self, key_id: str) -> tuple[int, float] | None:
        """The Lua take in Redis, ``(granted, tokens left)``, or None when Redis failed;
        records the outcome in the breaker (here, so a cancelled waiter cannot skip it)."""
        from redis import exceptions

        try:
            granted, left = self._take(keys=[self._prefix + key_id],
                                       args=[repr(self.rate), self.burst])  # fmt: skip
        except exceptions.RedisError as exc:
            self._failed(exc)
            return None
        with self._state:
            if self._degraded:
                _log.warning("rate limit: Redis answers again; shared buckets")
            self._degraded = self._probing = False
        return int(granted), float(left)

    def _failed(self, exc: Exception) -> None:
        """Open the breaker (or keep it open) until the next probe."""
        with self._state:
            if not self._degraded:
                _log.warning("rate limit: Redis unreachable (%s); per-process buckets, "
                             "probing every %g s", type(exc).__name__,
                             self._probe_every)  # fmt: skip
            self._degraded = True
            self._probing = False
            self._next_probe = self._clock() + self._probe_every

    def _settle(self, key_id: str, outcome: tuple[int, float] | None) -> None:
        """Grant or refuse on Redis's answer; without one, on the local bucket."""
        if outcome is None:
            self._local.take(key_id)
            return
        granted, left = outcome
        if granted != 1:
            retry = max(1, math.ceil((1.0 - left) / self.rate))
            raise RateLimited(key_id, self.rate, self.burst, retry)
