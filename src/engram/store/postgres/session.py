"""Connections of a PostgreSQL store: the pool, per-thread transactions, execution.

Each thread that opens ``transaction`` holds one pooled connection until the
outermost block ends (nested blocks are savepoints on it); everything that thread
runs meanwhile runs on it, so it reads its own uncommitted writes. Other threads
keep borrowing connections from the pool, one statement (or probe) at a time, so
readers never wait for a writer. Every driver failure leaves here as an engram
error (``errors.mapped``) naming host and database, never the password.

Writers of one tenant take turns (``writing``): before the first statement of a
transaction that touches a tenant, that tenant's transaction-scoped advisory
lock is taken. The write path re-reads what it decides on inside its
transaction, which SQLite's one writer at a time makes current; here the lock
does (a correction racing a retraction of the same record reads the winner's
version, a deletion sees the version a racing correction added), and writers
of one tenant never deadlock on each other's row and slot locks. Their audit
appends are serialised per tenant anyway (one hash chain); other tenants'
writers and every reader outside a transaction never wait.

Advisory locks (a tenant's writer lock, ``lock``'s write slots) are queued in the
transaction's ``Unit`` and taken together, in the order asked, by one statement
sent before the transaction's next statement: the cursors of this store's
connections send it first, and a savepoint is opened only after it, so a
rolled-back savepoint never releases them. A lock already held is not asked
for again. Each savepoint snapshots the ``Unit`` and restores it on rollback;
the outermost block runs ``_before_commit`` (the audit rows still owed) before
``COMMIT``.

``tracer`` (as on the SQLite store) sees every statement with its parameters
before it is sent, each parameter set of a pipelined batch, and the
transaction control ``block`` sends (``BEGIN``, ``SAVEPOINT``, ``RELEASE``,
``COMMIT``), so it counts every statement but a rollback; tests pin what each
call sends and inject failures. Statements reach it through the cursors of this
store's connections (``cursor_factory``), so no call site can bypass it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from engram.errors import StoreError
from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.errors import Server, StatementTimeout, mapped
from engram.store.postgres.sql import Query
from engram.store.postgres.unit import Unit

__all__ = ["Session", "Tracer"]

# One statement for any number of locks, taken in array order (a function scan).
LOCKS = "SELECT pg_advisory_xact_lock(hashtextextended(n, 0)) FROM unnest(%(names)s::text[]) AS n"

Conn = psycopg.Connection[Any]
Tracer = Callable[[str, Mapping[str, Any]], None]


def _held_locks(names: list[str]) -> str:
    """The locks of ``names`` in words: a tenant's writer lock names the tenant."""
    words = []
    for name in names:
        parsed = json.loads(name) if name.startswith("[") else None
        if isinstance(parsed, list) and parsed[:1] == ["engram:tenant"] and len(parsed) == 2:
            words.append(f"tenant {parsed[1]!r}'s writer lock")
        else:
            words.append(f"the lock {name!r}")
    return ", ".join(words)


def _text(query: Any) -> str:
    """A statement's text as the tracer sees it (bytes for multi-statement scripts)."""
    return query.decode() if isinstance(query, bytes) else str(query)


def _traced_cursor(session: Session) -> type[psycopg.Cursor[Any]]:
    """A cursor class reporting each statement to ``session.tracer`` when one is set."""

    class TracedCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            session.before_statement(self.connection)
            if session.tracer is not None:
                session.tracer(_text(query), params if isinstance(params, Mapping) else {})
            return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:
            session.before_statement(self.connection)
            if session.tracer is not None:
                params_seq = list(params_seq)
                for params in params_seq:
                    session.tracer(_text(query), params if isinstance(params, Mapping) else {})
            super().executemany(query, params_seq, **kwargs)

    return TracedCursor


class Session:
    """The pool and this thread's open transaction, if any."""

    def __init__(
        self, pool: ConnectionPool, server: Server, config: PostgresConfig, text_config: str
    ) -> None:
        self.config = config
        self.server = server
        self.text_config = text_config
        self._pool = pool
        self._local = threading.local()
        self._closed = False
        self.tracer: Tracer | None = None
        self._cursor = _traced_cursor(self)

    # -- connections and transactions -------------------------------------------

    def _held(self) -> Conn | None:
        """This thread's transaction connection, if it holds one."""
        conn: Conn | None = getattr(self._local, "conn", None)
        return conn

    def unit(self) -> Unit | None:
        """The state of this thread's open transaction (None outside one)."""
        unit: Unit | None = getattr(self._local, "unit", None)
        return unit

    def _held_unit(self) -> tuple[Conn, Unit] | None:
        """This thread's transaction connection and its state, if it holds one."""
        conn, unit = self._held(), self.unit()
        if conn is None:
            return None
        assert unit is not None, "a held connection always has its transaction state"
        return conn, unit

    @property
    def in_transaction(self) -> bool:
        """True while this thread holds an open transaction of this store."""
        return self._held() is not None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit: ``BEGIN`` on a pooled connection at the outside, a
        savepoint when nested. A failure at ``COMMIT`` (a dropped connection)
        raises ``Unavailable`` and nothing of the unit is kept."""
        open_one = self._held_unit()
        if open_one is not None:
            held, unit = open_one
            with mapped(self.server, "taking write locks"):
                self._take_locks(held, unit)  # outside the savepoint: they outlast it
            saved = unit.snapshot()
            try:
                with self._savepoint(held):
                    yield
            except BaseException:  # the rollback undid the savepoint's locks and rows
                unit.restore(saved)
                raise
            return
        self._check_open()
        with mapped(self.server, "a transaction"), self._borrowed() as conn:
            self._local.conn, self._local.unit = conn, Unit()
            try:
                with self.block(conn):
                    yield
                    self._before_commit(conn)
            finally:
                self._local.conn, self._local.unit = None, None

    def _before_commit(self, conn: Conn) -> None:
        """What the outermost block sends before ``COMMIT`` (subclasses: audit rows)."""

    def writing(self, *tenant_ids: str) -> None:
        """Inside this thread's transaction, ask for the writer lock of each tenant it
        does not hold yet (in sorted order); it is taken before the transaction's
        next statement. Outside a transaction, nothing."""
        unit = self.unit()
        if unit is None:
            return
        for tenant_id in sorted(set(tenant_ids)):
            unit.ask(json.dumps(["engram:tenant", tenant_id]))

    def lock(self, name: str) -> None:
        """Ask for the advisory lock ``name`` until this thread's transaction ends
        (taken before its next statement; a no-op when held already)."""
        unit = self.unit()
        if unit is None:
            raise StoreError(f"locking {name!r} needs an open transaction")
        unit.ask(name)

    def before_statement(self, conn: Conn) -> None:
        """Take the locks this thread's transaction asked for, when ``conn`` is its
        connection and a statement is about to be sent on it."""
        unit = self.unit()
        if unit is not None and unit.pending and conn is self._held():
            self._take_locks(conn, unit)

    def _take_locks(self, conn: Conn, unit: Unit) -> None:
        names, unit.pending = unit.pending, []
        if not names:
            return
        try:
            with mapped(self.server, "taking a writer lock"):
                conn.execute(LOCKS, {"names": names}).fetchall()
        except StatementTimeout as exc:
            unit.pending = names + unit.pending
            raise StatementTimeout(
                f"{exc}: another transaction held {_held_locks(names)} longer than"
                f" postgres.statement_timeout_ms = {self.config.statement_timeout_ms}."
                " Nothing was written: retry later, or raise statement_timeout_ms"
            ) from None
        except BaseException:
            unit.pending = names + unit.pending
            raise
        unit.taken(names)

    @contextmanager
    def _savepoint(self, conn: Conn) -> Iterator[None]:
        with mapped(self.server, "a nested transaction"), self.block(conn):
            yield

    @contextmanager
    def block(self, conn: Conn) -> Iterator[None]:
        """``conn.transaction()``, reported to ``tracer``: ``BEGIN`` and ``COMMIT``
        on a connection outside a transaction, ``SAVEPOINT`` and ``RELEASE`` inside
        one (a rollback is not reported)."""
        outer = conn.info.transaction_status == TransactionStatus.IDLE
        if self.tracer is not None:
            self.tracer("BEGIN" if outer else "SAVEPOINT", {})
        with conn.transaction():
            yield
            if self.tracer is not None:
                self.tracer("COMMIT" if outer else "RELEASE", {})

    @contextmanager
    def connection(self, doing: str) -> Iterator[Conn]:
        """This thread's transaction connection, or a pooled one for the block."""
        open_one = self._held_unit()
        if open_one is not None:
            held, unit = open_one
            with mapped(self.server, doing):
                self._take_locks(held, unit)
                yield held
            return
        self._check_open()
        with mapped(self.server, doing), self._borrowed() as conn:
            yield conn

    @contextmanager
    def _borrowed(self) -> Iterator[Conn]:
        """A pooled connection whose cursors report to ``tracer``."""
        with self._pool.connection() as conn:
            conn.cursor_factory = self._cursor
            yield conn

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the PostgreSQL store for {self.server.where()} is closed")

    def close(self) -> None:
        """Close the pool; the store is unusable afterwards."""
        self._closed = True
        self._pool.close()

    # -- execution ----------------------------------------------------------------

    def rows(self, query: Query, doing: str = "a query") -> list[tuple[Any, ...]]:
        """All rows of one statement."""
        with self.connection(doing) as conn:
            return on(conn, query)

    def run(self, query: Query, doing: str = "a change") -> int:
        """One statement; the rows it changed."""
        with self.connection(doing) as conn:
            return conn.execute(query[0], query[1]).rowcount

    def run_many(self, sql: str, params: Sequence[Mapping[str, Any]], doing: str) -> None:
        """One statement for many parameter sets (pipelined: one round trip)."""
        if not params:
            return
        with self.connection(doing) as conn, conn.cursor() as cursor:
            cursor.executemany(sql, params)

    def in_own_transaction(self, doing: str) -> None:
        """Refuse ``doing`` outside a transaction of this thread."""
        if self._held() is None:
            raise StoreError(f"{doing} needs an open transaction (use store.transaction())")


def on(conn: Conn, query: Query) -> list[tuple[Any, ...]]:
    """All rows of one statement on ``conn`` (errors left to the caller's mapping)."""
    return conn.execute(query[0], query[1]).fetchall()
