"""Traffic for ``load.py``: keep-alive HTTP clients, a request mix, closed and open loops.

Not a test. ``Mix`` hands out REST requests (recall of corpus queries, remember of
new or of a bounded set of contents); ``sequential`` sends them one at a time
(the unloaded baseline); ``closed_loop`` runs client threads flat out (capacity);
``open_loop`` sends at a fixed rate with exponential gaps (a Poisson load) and
counts each request's latency from the moment it was *due*, so a server that
falls behind shows its queueing delay instead of hiding it (no coordinated
omission). Every loop stops itself at its deadline; requests still queued after
a grace period are abandoned and counted.
"""

from __future__ import annotations

import http.client
import itertools
import json
import queue
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Mix", "Sample", "closed_loop", "open_loop", "sequential", "summary"]

GRACE_SECONDS = 30.0  # how long an open loop waits for its backlog after its deadline


@dataclass(frozen=True, slots=True)
class Sample:
    """One request: its kind, HTTP status (0: no answer) and latency."""

    kind: str
    status: int
    ms: float


# What a keep-alive connection the server closed while idle raises on its next use.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class Connection:
    """One keep-alive connection; reconnects after a failure.

    uvicorn closes a connection idle for 5 s. A request sent on such a connection
    fails before the server reads it (it closes only idle connections), so that one
    case is retried once on a new connection and counted in ``stale_retries``;
    any other failure is status 0 (lost)."""

    stale_retries = 0  # all connections together (read after the threads are joined)

    def __init__(self, url: str, key: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, body: dict[str, Any]) -> int:
        """POST ``body`` as JSON; the status (0 when the connection failed)."""
        reused = self.conn is not None
        try:
            return self._post(path, body)
        except _STALE:
            self._drop()
            if not reused:
                return 0
            Connection.stale_retries += 1
        except (OSError, http.client.HTTPException):
            self._drop()
            return 0
        try:
            return self._post(path, body)
        except (OSError, http.client.HTTPException):
            self._drop()
            return 0

    def _post(self, path: str, body: dict[str, Any]) -> int:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        self.conn.request("POST", path, body=json.dumps(body), headers=self.headers)
        response = self.conn.getresponse()
        response.read()
        return response.status

    def _drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None


@dataclass
class Mix:
    """Requests of one user: recalls of ``queries`` and a ``remember_share`` of writes.

    ``fresh`` writes are new contents (each an ADD); otherwise writes cycle through
    ``pool`` contents, so after one pass they are CONFIRMs and the data stops
    growing (the soak: memory that still grows is not data)."""

    user: str
    queries: Sequence[str]
    remember_share: float = 0.2
    fresh: bool = True
    pool: int = 500
    seed: int = 11
    _count: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def next(self) -> tuple[str, str, dict[str, Any]]:
        """(kind, path, body) of the next request."""
        with self._lock:
            n = next(self._count)
            write = self._rng.random() < self.remember_share
            query = self.queries[self._rng.randrange(len(self.queries))]
        if not write:
            return "recall", "/v1/recall", {"user_id": self.user, "query": query}
        tag = n if self.fresh else n % self.pool
        content = (f"Load note {tag}: the nightly job of queue {tag % 97} finished in "
                   f"{tag % 53 + 1} minutes on host {tag % 31}.")  # fmt: skip
        return "remember", "/v1/memories", {"user_id": self.user + "-writer", "content": content}


def _send(conn: Connection, mix: Mix) -> Sample:
    kind, path, body = mix.next()
    started = time.perf_counter()
    status = conn.post(path, body)
    return Sample(kind, status, (time.perf_counter() - started) * 1000)


def sequential(url: str, key: str, mix: Mix, count: int) -> list[Sample]:
    """``count`` requests one after another on one connection."""
    conn = Connection(url, key)
    return [_send(conn, mix) for _ in range(count)]


def closed_loop(url: str, key: str, mix: Mix, clients: int, seconds: float) -> list[Sample]:
    """``clients`` threads, each sending its next request as soon as the last answers."""
    deadline = time.monotonic() + seconds
    results: list[list[Sample]] = [[] for _ in range(clients)]

    def run(slot: int) -> None:
        conn = Connection(url, key)
        while time.monotonic() < deadline:
            results[slot].append(_send(conn, mix))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + GRACE_SECONDS)
    return [s for part in results for s in part]


def open_loop(url: str, key: str, mix: Mix, rate: float, seconds: float,
              workers: int = 16) -> tuple[list[Sample], int]:  # fmt: skip
    """Requests due at a Poisson ``rate`` a second for ``seconds``, sent by ``workers``
    connections; latency counts from when each was due. Returns the samples and how
    many due requests were abandoned (still queued past the grace period)."""
    due: queue.Queue[float | None] = queue.Queue()
    samples: list[Sample] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds + GRACE_SECONDS

    def work() -> None:
        conn = Connection(url, key)
        while (when := due.get()) is not None:
            if time.monotonic() > stop_at:
                continue  # abandoned: counted below
            time.sleep(max(0.0, when - time.perf_counter()))
            kind, path, body = mix.next()
            status = conn.post(path, body)
            sample = Sample(kind, status, (time.perf_counter() - when) * 1000)
            with lock:
                samples.append(sample)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    rng = random.Random(5)
    start = time.perf_counter()
    when, scheduled = start, 0
    while when < start + seconds:
        when += rng.expovariate(rate)
        time.sleep(max(0.0, when - time.perf_counter() - 0.002))
        due.put(when)
        scheduled += 1
    for _ in threads:
        due.put(None)
    for thread in threads:
        thread.join(max(0.0, stop_at - time.monotonic()) + 5)
    return samples, scheduled - len(samples)


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return round(ordered[index], 2)


def summary(samples: Sequence[Sample], seconds: float | None = None) -> dict[str, Any]:
    """Per kind: count, p50/p95/p99 ms, rate (when ``seconds`` is given), statuses."""
    out: dict[str, Any] = {}
    for kind in sorted({s.kind for s in samples}):
        mine = [s for s in samples if s.kind == kind]
        times = [s.ms for s in mine if s.status == 200]
        statuses: dict[str, int] = {}
        for s in mine:
            statuses[str(s.status)] = statuses.get(str(s.status), 0) + 1
        out[kind] = {
            "n": len(mine), "p50_ms": _percentile(times, 50), "p95_ms": _percentile(times, 95),
            "p99_ms": _percentile(times, 99), "statuses": statuses,
            "per_s": round(len(mine) / seconds, 1) if seconds else None,
        }  # fmt: skip
    out["server_errors"] = sum(1 for s in samples if s.status >= 500 or s.status == 0)
    return out
