"""Per-key rate limits: a token bucket for each API key, refusals as 429 problems.

Each authenticated request takes one token from its key's bucket. A bucket holds
at most ``burst`` tokens and refills at ``rate`` tokens a second; a request that
finds less than one token is refused with ``RateLimited``, which the problem
handler answers 429 with ``Retry-After`` (whole seconds until a token is back).
Nothing of a refused request runs: the check sits in the authentication
dependency, before the body reaches the SDK.

The buckets live in the server process. ``engram serve --workers N`` runs N
processes, each with its own buckets, so a key may make up to N times the rate
there (the socket spreads connections over the workers). That is documented
rather than hidden; a bucket shared through Redis would make the limit exact
across workers at the price of one Redis round trip per request.

Only keys that authenticated have buckets, so the table is bounded by the key
file; a request with a wrong key is refused 401 before any bucket is touched.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateLimited", "TokenBuckets"]


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
