"""``engram serve --workers N``: N server processes on one socket.

One process runs Python on one core at a time (the GIL); several worker
processes share the listening socket, each with its own ``Engram`` over the
same store (SQLite admits many processes, WAL mode; PostgreSQL many
connections), so recalls use every core. The parent binds the socket,
announces the URL, and hands the socket to uvicorn's process supervisor; each
worker builds its app with ``worker_app`` from a ``WorkerSpec`` the parent put
in the environment (a spawned process inherits nothing else). Each worker
holds its own in-memory indexes, so memory grows with the number of workers.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engram.surfaces import collector
from engram.surfaces.collector import DEFAULT_RESCAN_SECONDS
from engram.surfaces.rest.keys import KeyRing
from engram.surfaces.rest.serve import listening_url
from engram.surfaces.rest.settings import RestSettings

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["WorkerSpec", "run_workers", "worker_app"]

_PREFIX = "ENGRAM_SERVE_"
_FIELDS = ("db", "working", "embedder", "keys", "max_body_bytes", "host", "rate_limit",
           "rate_burst", "rate_limit_redis", "recall_concurrency",
           "recall_queue_seconds", "gc_rescan_seconds")  # fmt: skip


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What every worker opens: the store, working memory, embedder, keys, body limit,
    the host it listens on (the MCP endpoint's Host check), the rate limit and the
    recall gate's slots."""

    db: str
    working: str | None
    embedder: str
    keys: str | None  # None: the keys come from ENGRAM_API_KEYS
    max_body_bytes: int
    host: str = "127.0.0.1"
    rate_limit: float = 100.0  # each worker keeps its own buckets (surfaces.rest.ratelimit)
    rate_burst: int = 200
    rate_limit_redis: str | None = None  # the buckets every worker shares (None: per worker)
    recall_concurrency: int = 1  # per worker (surfaces.gate)
    recall_queue_seconds: float = 10.0
    gc_rescan_seconds: float = DEFAULT_RESCAN_SECONDS  # surfaces.collector (0: Python's own)

    def export(self) -> None:
        """Put this spec in the environment the workers inherit."""
        for name in _FIELDS:
            value = getattr(self, name)
            os.environ[_PREFIX + name.upper()] = "" if value is None else str(value)

    @classmethod
    def imported(cls) -> WorkerSpec:
        """The spec the parent exported."""
        read = {name: os.environ[_PREFIX + name.upper()] for name in _FIELDS}
        return cls(read["db"], read["working"] or None, read["embedder"], read["keys"] or None,
                   int(read["max_body_bytes"]), read["host"], float(read["rate_limit"]),
                   int(read["rate_burst"]), read["rate_limit_redis"] or None,
                   int(read["recall_concurrency"]),
                   float(read["recall_queue_seconds"]),
                   float(read["gc_rescan_seconds"]))  # fmt: skip


def worker_app() -> FastAPI:
    """The app of one worker (a uvicorn factory); its Engram closes when the process exits."""
    from engram.engram import Engram
    from engram.surfaces.rest.app import create_app

    spec = WorkerSpec.imported()
    mem = Engram.open(spec.db, embedder=spec.embedder, working=spec.working)
    atexit.register(mem.close)
    settings = RestSettings(max_body_bytes=spec.max_body_bytes, host=spec.host,
                            rate_limit=spec.rate_limit, rate_burst=spec.rate_burst,
                            rate_limit_redis=spec.rate_limit_redis,
                            recall_concurrency=spec.recall_concurrency,
                            recall_queue_seconds=spec.recall_queue_seconds)  # fmt: skip
    app = create_app(mem, KeyRing.from_environment(spec.keys), settings)
    collector.install(spec.gc_rescan_seconds)  # after the store and the app exist
    return app


def run_workers(spec: WorkerSpec, host: str, port: int, workers: int, access_log: bool,
                announce: Callable[[str], None]) -> int:  # fmt: skip
    """Serve with ``workers`` processes until interrupted; the exit status."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    spec.export()
    config = uvicorn.Config(
        "engram.surfaces.rest.workers:worker_app", factory=True, host=host, port=port,
        workers=workers, access_log=access_log, lifespan="on",
        log_level="info" if access_log else "warning",
    )  # fmt: skip
    sock = config.bind_socket()
    sock.listen(config.backlog)  # connections queue until a worker accepts them
    announce(listening_url(sock.getsockname()))
    Multiprocess(config, sockets=[sock]).run()
    return 0
