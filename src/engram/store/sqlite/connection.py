"""The SQLite connections: one writer connection, one read connection per thread.

Everything that talks to ``sqlite3`` goes through ``Connection``: statements run
through ``_run`` (writes, on the writer connection under the store lock) and
``_rows`` (reads, on this thread's read connection when it may use one), and a
``tracer`` hook sees each with its parameters, which lets tests pin what each
call emits. ``transaction`` is ``BEGIN IMMEDIATE`` at the outside (SQLite admits
one writer at a time, which is what makes ``Store.lock_slot`` a no-op here) and
a savepoint when nested. Migrations run when the store opens. Waiting for
another connection's lock is bounded (``store.busy``): past
``busy_timeout_ms`` the caller gets ``Unavailable``, never "database is locked".
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import quote

from engram.errors import MigrationError, StoreError
from engram.store import busy, held_files
from engram.store.config import SQLiteConfig
from engram.store.rows import record_from_values
from engram.store.sqlite import statements
from engram.store.sqlite.schema import MIGRATIONS
from engram.types import Record

__all__ = ["Connection", "Tracer", "is_plain_file"]

Tracer = Callable[[str, Mapping[str, Any]], None]


class _Reader:
    """Holds one thread's read connection; collecting it closes the connection."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


def is_plain_file(path: str) -> bool:
    """True for a database file a second connection can open by path (not
    ``:memory:``, not a private temporary database, not a URI)."""
    return path not in ("", ":memory:") and not path.startswith("file:")


class Connection:
    """The writer connection, per-thread readers, transactions and migrations."""

    def __init__(self, path: str, settings: SQLiteConfig) -> None:
        self.settings = settings
        self.path = path
        self.tracer: Tracer | None = None
        self.applied_migrations: list[str] = []  # by this open (``engram migrate``)
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None  # the thread with an open transaction
        self._after_commit: list[Callable[[], None]] = []  # run at COMMIT, under the lock
        self._local = threading.local()
        self._readers: weakref.WeakSet[_Reader] = weakref.WeakSet()
        self._readers_lock = threading.Lock()  # not the store lock: a writer holds that
        self._pooled = settings.read_connections and is_plain_file(path)
        self._reader_uri = f"file:{quote(os.path.abspath(path))}?mode=rw" if self._pooled else ""
        # Counted before connecting: erasure scans read its files (``held_files``), and
        # a scan's descriptor closed after SQLite took its locks would drop them.
        self._held = is_plain_file(path)
        self._holder = held_files.hold(path) if self._held else 0
        try:
            self._open()
        except BaseException:
            if self._held:
                self._held = False
                held_files.release(path, self._holder)
            raise

    # -- opening ----------------------------------------------------------------

    def _open(self) -> None:
        """Connect, set the pragmas and migrate; a failed open (a lock never freed)
        keeps no connection."""
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database at {self.path!r}: {exc}") from exc
        self._conn.row_factory = sqlite3.Row
        try:
            self._configure()
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        """The writer's pragmas; switching to WAL waits out another connection's lock
        (``busy.retrying``) instead of failing the open."""
        for sql in statements.pragmas(self.settings, wal=self.path != ":memory:"):
            busy.retrying(partial(self._conn.execute, sql), self._conn, self.path,
                          "opening the store", self.settings.busy_timeout_ms)  # fmt: skip

    def _migrate(self) -> None:
        """Apply pending migrations. An up-to-date database is only read, so opening a
        store never waits for (or blocks) another process's write lock."""
        if not self._pending_migrations():
            return
        with self.transaction():
            self._run(statements.MIGRATIONS_TABLE)
            done = {row[0] for row in self._run(statements.MIGRATIONS_DONE)}
            for name, script in MIGRATIONS:
                if name not in done:
                    self._apply(name, script)
                    self.applied_migrations.append(name)

    def _pending_migrations(self) -> bool:
        """True when a migration has not been applied (or the database is new)."""
        try:
            done = {row[0] for row in self._conn.execute(statements.MIGRATIONS_DONE)}
        except sqlite3.OperationalError:  # no migrations table yet (or locked: let BEGIN wait)
            return True
        return any(name not in done for name, _ in MIGRATIONS)

    def _apply(self, name: str, script: str) -> None:
        try:
            for statement in _split(script):
                self._run(statement)
            self._run(statements.MIGRATION_DONE, {"name": name})
        except sqlite3.Error as exc:
            raise MigrationError(f"migration {name} failed: {exc}") from exc

    # -- statements -------------------------------------------------------------

    def _run(self, sql: str, params: Mapping[str, Any] | None = None) -> sqlite3.Cursor:
        with self._lock:
            return self._execute(self._conn, sql, params)

    def _run_many(self, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement for many parameter sets (the tracer sees each)."""
        if not rows:
            return
        with self._lock:
            if self.tracer is not None:
                for params in rows:
                    self.tracer(sql, params)
            try:
                self._conn.executemany(sql, rows)
            except sqlite3.Error as exc:
                raise self._failure(exc, "a bulk write") from exc

    def _execute(
        self, conn: sqlite3.Connection, sql: str, params: Mapping[str, Any] | None,
        plain: bool = False,
    ) -> sqlite3.Cursor:  # fmt: skip
        """Run one statement (the tracer sees it); ``plain`` rows are tuples, cheaper
        than ``sqlite3.Row`` for callers that read by position."""
        bound = params or {}
        if self.tracer is not None:
            self.tracer(sql, bound)
        try:
            cursor = conn.cursor()
            if plain:
                cursor.row_factory = None
            return cursor.execute(sql, bound)
        except sqlite3.Error as exc:
            raise self._failure(exc, "a statement") from exc

    def _failure(self, exc: sqlite3.Error, doing: str) -> StoreError:
        return busy.failure(exc, self.path, doing, self.settings.busy_timeout_ms)

    def _rows(self, query: statements.Query, plain: bool = False) -> list[Any]:
        """All rows of a read; a read refused by a lock is tried again (``busy``)."""
        reader = self._reader()
        if reader is None:
            with self._lock:
                return self._read_rows(self._conn, query, plain)
        return self._read_rows(reader, query, plain)

    def _read_rows(self, conn: sqlite3.Connection, query: statements.Query,
                   plain: bool) -> list[Any]:  # fmt: skip
        sql, params = query
        if self.tracer is not None:
            self.tracer(sql, params)

        def attempt() -> list[Any]:
            cursor = conn.cursor()
            if plain:
                cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()

        return busy.retrying(attempt, conn, self.path, "a read", self.settings.busy_timeout_ms)

    def _records(self, query: statements.Query) -> list[Record]:
        return [record_from_values(row) for row in self._rows(query, plain=True)]

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's read-only connection, or None to read on the main one.

        A file store in WAL mode serves reads outside a transaction from one
        connection per thread, so a read never waits for another thread's read or
        write (it sees the last commit). The thread that holds a transaction reads on
        the main connection, so it sees its own uncommitted writes. ``:memory:``
        has a single connection: another would open another database.
        """
        if not self._pooled or self._owner == threading.get_ident():
            return None
        holder: _Reader | None = getattr(self._local, "reader", None)
        if holder is None:
            holder = self._open_reader()
            self._local.reader = holder
        return holder.conn

    def _open_reader(self) -> _Reader:
        """A read-only connection to the same file (by absolute path, never creating
        one), closed when its thread ends and its holder is collected."""
        try:
            conn = sqlite3.connect(
                self._reader_uri, uri=True, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            for sql in statements.reader_pragmas(self.settings):
                conn.execute(sql)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open a read connection to {self.path!r}: {exc}") from exc
        holder = _Reader(conn)
        weakref.finalize(holder, conn.close)
        with self._readers_lock:
            if not self._pooled:  # the store closed while this one connected
                conn.close()
                raise StoreError(f"the store {self.path!r} is closed")
            self._readers.add(holder)
        return holder

    # -- transactions -----------------------------------------------------------

    def _in_own_transaction(self) -> bool:
        """Whether this thread holds the open transaction (it sees uncommitted rows,
        which must not reach the shared in-memory partitions)."""
        return self._owner == threading.get_ident()

    @property
    def in_transaction(self) -> bool:
        """True while a transaction is open (then its thread holds the store's lock,
        and work handed to another thread must not touch the store)."""
        return self._depth > 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit: BEGIN IMMEDIATE at the outside, a SAVEPOINT when nested."""
        with self._lock:
            depth = self._depth
            if depth == 0:
                self._begin()
            else:
                self._run(f"SAVEPOINT sp{depth}")
            self._depth += 1
            self._owner = threading.get_ident()
            try:
                try:
                    yield
                except BaseException:
                    self._depth -= 1
                    self._rollback(depth)
                    raise
                self._depth -= 1
                try:
                    self._run("COMMIT" if depth == 0 else f"RELEASE SAVEPOINT sp{depth}")
                except BaseException:  # a failed COMMIT must not leave the transaction open
                    self._rollback(depth)
                    raise
                if depth == 0:
                    for hook in self._after_commit:
                        hook()
            finally:
                if depth == 0:
                    self._owner = None
                    self._after_commit.clear()

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``: take the file's write lock, waiting at most
        ``busy_timeout_ms`` for another connection's (then ``Unavailable``)."""
        if self.tracer is not None:
            self.tracer("BEGIN IMMEDIATE", {})
        busy.retrying(lambda: self._conn.execute("BEGIN IMMEDIATE"), self._conn, self.path,
                      "a write transaction", self.settings.busy_timeout_ms)  # fmt: skip

    def _rollback(self, depth: int) -> None:
        if depth == 0:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        else:
            self._conn.execute(f"ROLLBACK TO SAVEPOINT sp{depth}")
            self._conn.execute(f"RELEASE SAVEPOINT sp{depth}")

    def _close_connections(self) -> None:
        """Close the readers and the writer (call with the store lock held)."""
        with self._readers_lock:
            self._pooled = False
            for holder in list(self._readers):
                holder.conn.close()
            self._readers.clear()
            self._conn.close()
        if self._held:
            self._held = False
            held_files.release(self.path, self._holder)


def _split(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    found: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            found.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        found.append(buffer.strip())
    return found
