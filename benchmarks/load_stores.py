"""The stores ``load.py`` serves, one per backend, each starting from the same data.

Not a test. Both hold the records of ``rest.build_store``: ``--size`` corpus
memories of one user (``rest.USER``) written with ``remember_many`` and the
hashing embedder (``common.fill``), audit entries and all.

- SQLite: a copy of the cached file of ``rest.build_store`` in a scratch directory.
- PostgreSQL: a server from ``backends_infra.pg_server`` (``ENGRAM_BENCH_PG_URL``
  or an embedded one, its data directory kept under ``--store-dir`` with
  ``--keep``), where a template database ``engram_load_<size>`` is filled once (a
  comment on it marks it complete) and each run serves a fresh copy made with
  ``CREATE DATABASE ... TEMPLATE``, so every run starts from the same rows and the
  template never changes. Working memory is on Redis, a database number of its
  own flushed before the server starts.

``Family`` reads the memory and threads of a process and its descendants (the
``--workers`` processes, PostgreSQL's backends).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from backends_infra import pg_server, with_database
from common import fill
from corpus import Corpus
from engram import Engram
from rest import USER, build_store

__all__ = ["Family", "Served", "postgres_store", "sqlite_store"]

MB = 1024 * 1024
RUN_DATABASE = "engram_load_run"
_DONE = "engram load template complete"


@dataclass(frozen=True, slots=True)
class Served:
    """What the server is started on: the store URL, the key file's neighbour, the
    working memory URL (None: beside SQLite), the build time (None: reused) and the
    PostgreSQL postmaster's pid and settings (None and empty for SQLite or an external
    server)."""

    db: str
    path: Path
    working: str | None
    build_seconds: float | None
    postmaster: int | None = None
    pg_settings: dict[str, str] | None = None


@contextmanager
def sqlite_store(store_dir: Path, size: int, corpus: Corpus, scratch: Path) -> Iterator[Served]:
    """A scratch copy of the cached SQLite store of ``size`` records."""
    cached, built = build_store(store_dir, size, corpus)
    copy = scratch / cached.name
    shutil.copyfile(cached, copy)
    yield Served(f"sqlite:///{copy}", copy, None, built)


def _template_ready(admin: str, name: str) -> bool:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (name,),
        ).fetchone()
    return row is not None and row[0] == _DONE


def _recreate(admin: str, name: str, template: str | None = None) -> None:
    """Drop database ``name`` (closing what uses it) and create it, empty or as a copy
    of ``template`` (a file copy: much faster than replaying it through the WAL)."""
    import psycopg

    copy = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"{copy}')


def build_template(admin: str, size: int, corpus: Corpus, redis_url: str) -> float | None:
    """Fill the template database of ``size`` records unless a complete one is there
    (working memory at ``redis_url``, which a PostgreSQL store needs; flushed after);
    the build time in seconds (None when reused)."""
    name = f"engram_load_{size}"
    if _template_ready(admin, name):
        return None
    _recreate(admin, name)
    tick = time.perf_counter()
    mem = Engram.open(with_database(admin, name), embedder="hashing", working=redis_url)
    try:
        fill(mem, USER, corpus, 0, size, chunk=1000)
    finally:
        mem.close()
    seconds = time.perf_counter() - tick
    import psycopg

    # planner statistics and the visibility map settled once: every copy starts alike
    with psycopg.connect(with_database(admin, name), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"COMMENT ON DATABASE \"{name}\" IS '{_DONE}'")
    print(f"built {name}: {size} records in {seconds:.0f} s", flush=True)
    return round(seconds, 1)


def flush_redis(url: str) -> None:
    """Empty the Redis database at ``url`` (the run's working memory starts empty);
    a clear error when Redis does not answer."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    except redis.exceptions.ConnectionError as exc:
        raise SystemExit(f"Redis at {url} does not answer ({exc}); start it with: "
                         "redis-server --bind 127.0.0.1 --port 6379 --daemonize yes "
                         "--save '' --appendonly no") from None  # fmt: skip
    finally:
        client.close()


@contextmanager
def postgres_store(
    store_dir: Path, size: int, corpus: Corpus, scratch: Path, redis_url: str, keep: bool
) -> Iterator[Served]:
    """A fresh copy of the template database of ``size`` records on a PostgreSQL
    server, and Redis working memory at ``redis_url``, flushed."""
    keep_dir = store_dir / "load-pg" if keep else None
    with pg_server("512MB", keep=keep_dir) as (admin, postmaster, settings):
        built = build_template(admin, size, corpus, redis_url)
        _recreate(admin, RUN_DATABASE, template=f"engram_load_{size}")
        flush_redis(redis_url)
        try:
            yield Served(with_database(admin, RUN_DATABASE), scratch / "pg-load", redis_url,
                         built, postmaster, settings)  # fmt: skip
        finally:
            _drop(admin, RUN_DATABASE)


def _drop(admin: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Family:
    """A process and its descendants, read from ``/proc`` through psutil."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)

    def members(self) -> list[psutil.Process]:
        """The process and every descendant alive now."""
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return []

    def rss_mb(self) -> float:
        """Summed resident set size in MiB (shared pages count once per process)."""
        return self._sum(lambda p: p.memory_info().rss) / MB

    def pss_mb(self) -> float:
        """Summed proportional set size in MiB (shared pages split between processes:
        the honest total for PostgreSQL's shared buffers)."""
        return self._sum(lambda p: p.memory_full_info().pss) / MB

    def threads(self) -> int:
        """Threads over the family."""
        return int(self._sum(lambda p: p.num_threads()))

    def _sum(self, read: Callable[[psutil.Process], float]) -> float:
        total = 0.0
        for proc in self.members():
            try:
                total += read(proc)
            except psutil.Error:
                continue  # a process that ended meanwhile
        return total
