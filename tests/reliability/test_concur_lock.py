"""A write lock held past the bound: the caller gets ``Unavailable``, not a crash or a hang.

Another connection (a raw ``sqlite3`` connection on the file; a raw ``psycopg``
connection holding the tenant's advisory writer lock on PostgreSQL) holds the
write lock longer than the store's bound (``sqlite.busy_timeout_ms``,
``postgres.statement_timeout_ms``). A write must fail with ``Unavailable`` within
a few bounds, name what it waited for and what to do, and write nothing; once the
lock is released the same write succeeds. A lock released within the bound is
waited out. A connection that locks the file even against readers (exclusive
locking mode) makes opening the store ``Unavailable`` too.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from tests.conftest import OpenMem

from engram import Config, Context, Engram, Unavailable
from engram.config import SQLiteConfig, StoreConfig
from engram.store.postgres.config import PostgresConfig

BOUND_MS = 300
SLACK_S = 10 * BOUND_MS / 1000  # "no hang": far below a test timeout, far above the bound


def _sqlite_config(bound_ms: int = BOUND_MS) -> Config:
    return Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=bound_ms)))


@contextmanager
def _sqlite_writer_lock(path: Path, exclusive: bool = False) -> Iterator[sqlite3.Connection]:
    """Another connection holding the file's write lock (``exclusive``: against
    readers too) until the block ends."""
    with closing(sqlite3.connect(path, isolation_level=None, check_same_thread=False)) as holder:
        if exclusive:
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("CREATE TABLE IF NOT EXISTS holder_mark (x)")  # a real pending write
        if exclusive:
            holder.execute("COMMIT")  # exclusive mode keeps the lock after the commit
            holder.execute("BEGIN IMMEDIATE")
        yield holder
        if holder.in_transaction:
            holder.execute("ROLLBACK")


def _timed_failure(call: object) -> tuple[BaseException, float]:
    start = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        call()  # type: ignore[operator]
    return caught.value, time.monotonic() - start


def test_sqlite_write_past_the_bound_is_unavailable_then_succeeds(
    tmp_path: Path, open_mem: OpenMem, ctx: Context
) -> None:
    path = tmp_path / "bound.db"
    mem = open_mem(f"sqlite:///{path}", config=_sqlite_config())
    with _sqlite_writer_lock(path):
        error, waited = _timed_failure(lambda: mem.remember(ctx, "Lock test: blocked write."))
        many, _ = _timed_failure(lambda: mem.remember_many(ctx, [{"content": "Blocked bulk."}]))
    assert BOUND_MS / 1000 * 0.9 <= waited < SLACK_S, waited
    for message in (str(error), str(many)):
        assert str(path) in message
        assert "busy_timeout_ms" in message
        assert "nothing was written" in message
        assert "retry later" in message
    assert mem.list(ctx, status=None) == []
    written = mem.remember(ctx, "Lock test: the write after the release.")
    assert written.record is not None
    assert [r.id for r in mem.list(ctx)] == [written.record.id]
    assert mem.audit_verify().ok


def test_sqlite_lock_released_within_the_bound_is_waited_out(
    tmp_path: Path, open_mem: OpenMem, ctx: Context
) -> None:
    path = tmp_path / "wait.db"
    mem = open_mem(f"sqlite:///{path}", config=_sqlite_config(5000))
    with _sqlite_writer_lock(path) as holder:
        timer = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
        timer.start()
        written = mem.remember(ctx, "Lock test: waited for the other writer.")
        timer.join()
    assert written.record is not None
    assert mem.get(ctx, written.record.id).content


def test_sqlite_exclusive_lock_makes_open_unavailable_then_it_opens(
    tmp_path: Path, open_mem: OpenMem, ctx: Context
) -> None:
    path = tmp_path / "exclusive.db"
    mem = open_mem(f"sqlite:///{path}", config=_sqlite_config())
    mem.remember(ctx, "Lock test: written before the exclusive lock.")
    mem.close()
    with _sqlite_writer_lock(path, exclusive=True):
        error, waited = _timed_failure(
            lambda: Engram.open(f"sqlite:///{path}", embedder="hashing", config=_sqlite_config())
        )
        assert waited < SLACK_S
        assert str(path) in str(error)
        assert "opening the store" in str(error)
    again = open_mem(f"sqlite:///{path}", config=_sqlite_config())
    assert len(again.list(ctx)) == 1


def _tenant_lock(pg_url: str, tenant: str) -> tuple[object, threading.Event]:
    """A raw connection holding ``tenant``'s writer lock until the event is set."""
    import psycopg

    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(pg_url) as conn, conn.transaction():
            name = json.dumps(["engram:tenant", tenant])
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))
            taken.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    return thread, release


def test_postgres_tenant_lock_past_the_bound_is_unavailable_then_succeeds(
    pg_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    pg = PostgresConfig(statement_timeout_ms=BOUND_MS)
    mem = open_mem(pg_url, config=Config(store=StoreConfig(postgres=pg)))
    thread, release = _tenant_lock(pg_url, ctx.tenant_id)
    try:
        error, waited = _timed_failure(lambda: mem.remember(ctx, "Lock test: blocked on PG."))
    finally:
        release.set()
        thread.join()
    assert waited < SLACK_S, waited
    message = str(error)
    assert "writer lock" in message
    assert "statement_timeout_ms" in message
    assert "Nothing was written" in message
    assert ctx.tenant_id in message
    assert mem.list(ctx, status=None) == []
    written = mem.remember(ctx, "Lock test: the PG write after the release.")
    assert written.record is not None
    assert [r.id for r in mem.list(ctx)] == [written.record.id]
    assert mem.audit_verify().ok
