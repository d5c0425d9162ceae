"""Connections of a PostgreSQL store: the pool, per-thread transactions, execution.

Each thread that opens ``transaction`` holds one pooled connection until the
outermost block ends (nested blocks are savepoints on it); everything that thread
runs meanwhile runs on it, so it reads its own uncommitted writes. Other threads
keep borrowing connections from the pool, one statement (or probe) at a time, so
readers never wait for a writer. Every driver failure leaves here as an engram
error (``errors.mapped``) naming host and database, never the password.

Writers of one tenant take turns (``writing``): the first statement of a
transaction that touches a tenant takes that tenant's transaction-scoped
advisory lock. The write path re-reads what it decides on inside its
transaction, which SQLite's one writer at a time makes current; here the lock
does (a correction racing a retraction of the same record reads the winner's
version, a deletion sees the version a racing correction added), and writers
of one tenant never deadlock on each other's row and slot locks. Their audit
appends are serialised per tenant anyway (one hash chain); other tenants'
writers and every reader outside a transaction never wait.

``tracer`` (as on the SQLite store) sees every statement with its parameters
before it is sent, each parameter set of a pipelined batch, and ``COMMIT``
before a transaction commits; tests pin what each call sends and inject
failures. Statements reach it through the cursors of this store's connections
(``cursor_factory``), so no call site can bypass it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from engram.errors import StoreError
from engram.store.postgres.config import PostgresConfig
from engram.store.postgres.errors import Server, StatementTimeout, mapped
from engram.store.postgres.sql import Query

__all__ = ["Session", "Tracer"]

_TENANT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%(name)s, 0))"

Conn = psycopg.Connection[Any]
Tracer = Callable[[str, Mapping[str, Any]], None]


def _text(query: Any) -> str:
    """A statement's text as the tracer sees it (bytes for multi-statement scripts)."""
    return query.decode() if isinstance(query, bytes) else str(query)


def _traced_cursor(session: Session) -> type[psycopg.Cursor[Any]]:
    """A cursor class reporting each statement to ``session.tracer`` when one is set."""

    class TracedCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if session.tracer is not None:
                session.tracer(_text(query), params if isinstance(params, Mapping) else {})
            return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:
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

    @property
    def in_transaction(self) -> bool:
        """True while this thread holds an open transaction of this store."""
        return self._held() is not None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit: ``BEGIN`` on a pooled connection at the outside, a
        savepoint when nested. A failure at ``COMMIT`` (a dropped connection)
        raises ``Unavailable`` and nothing of the unit is kept."""
        held = self._held()
        if held is not None:
            locked = set(self._local.tenants)
            try:
                with self._savepoint(held):
                    yield
            except BaseException:  # a rolled-back savepoint releases its locks
                self._local.tenants &= locked
                raise
            return
        self._check_open()
        with mapped(self.server, "a transaction"), self._borrowed() as conn:
            self._local.conn = conn
            self._local.tenants = set()
            try:
                with conn.transaction():
                    yield
                    if self.tracer is not None:
                        self.tracer("COMMIT", {})
            finally:
                self._local.conn = None
                self._local.tenants = set()

    def writing(self, *tenant_ids: str) -> None:
        """Inside this thread's transaction, take the writer lock of each tenant it
        does not hold yet (in sorted order), before the statements that touch
        them; outside a transaction, nothing."""
        conn = self._held()
        if conn is None:
            return
        tenants: set[str] = self._local.tenants
        for tenant_id in sorted(set(tenant_ids) - tenants):
            name = json.dumps(["engram:tenant", tenant_id])
            try:
                with mapped(self.server, "taking a tenant's writer lock"):
                    conn.execute(_TENANT_LOCK, {"name": name})
            except StatementTimeout as exc:
                raise StatementTimeout(
                    f"{exc}: another transaction held tenant {tenant_id!r}'s writer lock longer"
                    f" than postgres.statement_timeout_ms = {self.config.statement_timeout_ms}."
                    f" Nothing was written: retry later, or raise statement_timeout_ms"
                ) from None
            tenants.add(tenant_id)

    @contextmanager
    def _savepoint(self, conn: Conn) -> Iterator[None]:
        with mapped(self.server, "a nested transaction"), conn.transaction():
            yield

    @contextmanager
    def connection(self, doing: str) -> Iterator[Conn]:
        """This thread's transaction connection, or a pooled one for the block."""
        held = self._held()
        if held is not None:
            with mapped(self.server, doing):
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
