"""Working memory for the embedded store: a SQLite file of its own beside the records.

``Engram.open("sqlite:///engram.db")`` keeps working memory in
``engram.db-working`` (``working_path``). Not in the records' file: SQLite admits
one writer per file, and a working write queued behind a bulk ``remember_many``
chunk or an index rebuild waited 188-360 ms at p95 (``benchmarks/working.py``),
four to seven times the 50 ms target; in a file of its own it waits for no
record transaction (2-5 ms). This module owns the file's one table, ``working_items``: its DDL
is applied here, by name, and recorded in ``working_migrations``.
``:memory:`` gets a private in-memory database.

Every ownership condition is rendered by the scope predicate
(``engram.store.predicate``): ``OwnerSlot`` for one scope, ``Subject`` for an
erasure. Time comes from the injected clock: an item is live while ``now <
expires_at``; an expired item is never returned, and is deleted lazily: each
write purges its own scope, and at most every ``purge_interval_seconds`` one
write purges every scope. ``secure_delete`` zeroes what a delete frees, as in
the record store, and erasing a subject then checkpoints the WAL into the file
and truncates it, so an erased value leaves no bytes behind.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from engram.errors import InvalidArgument, MigrationError, StoreError, Unavailable
from engram.store import busy, erasure, held_files
from engram.store.erasure import Scrub
from engram.store.predicate import NO_AGENT, OwnerSlot, Subject
from engram.working.base import WorkingItem, WorkingScope
from engram.working.config import WorkingConfig

__all__ = ["SQLiteWorking", "working_path"]

_ITEMS = """
CREATE TABLE working_items (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,  -- '' for no agent (an agent id is never empty)
    scope TEXT NOT NULL CHECK (scope LIKE 'session:_%' OR scope LIKE 'task:_%'),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    set_at INTEGER NOT NULL,  -- microseconds since the Unix epoch, UTC
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id, agent_id, scope, key)
) WITHOUT ROWID;
CREATE INDEX working_items_expiry ON working_items (expires_at);
"""
# Named, append-only: never edit a shipped entry; add one.
MIGRATIONS: tuple[tuple[str, str], ...] = (("w0001_items", _ITEMS),)

_UPSERT = (
    "INSERT INTO working_items VALUES (:slot_tenant, :slot_user, :slot_agent, :slot_scope, "
    ":key, :value, :set_at, :expires_at) "
    "ON CONFLICT (tenant_id, user_id, agent_id, scope, key) "
    "DO UPDATE SET value = excluded.value, set_at = excluded.set_at, "
    "expires_at = excluded.expires_at"
)
_TABLE = "working_items"
# A byte check across every scope (a file byte belongs to no scope); it returns no item.
_HOLDING = "SELECT 1 FROM working_items WHERE instr(value, :w) OR instr(key, :w) LIMIT 1"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def working_path(store_path: str) -> str:
    """The working-memory file that goes with a record store's SQLite file."""
    return store_path if store_path in ("", ":memory:") else f"{store_path}-working"


def _us(when: datetime) -> int:
    return (when - _EPOCH) // _MICRO


def _at(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def _slot(scope: WorkingScope, **more: object) -> tuple[str, dict[str, Any]]:
    """The scope's condition, rendered by the scope predicate (``OwnerSlot``: exactly
    this tenant, user, agent and ``session:<id>`` / ``task:<id>``), and its parameters
    with ``more`` added."""
    slot = OwnerSlot(scope.tenant_id, scope.user_id, scope.agent_id or NO_AGENT, scope.scope)
    text, params = slot.sql(_TABLE)
    return text, {**params, **more}


def _subject(tenant_id: str, user_id: str) -> tuple[str, dict[str, Any]]:
    """Every item of one user of one tenant, rendered by the scope predicate."""
    return Subject(tenant_id, user_id).sql(_TABLE)


_LABEL = "working memory: "  # starts the message of a SQLite error here


class SQLiteWorking:
    """``WorkingStore`` on a SQLite file (the embedded default)."""

    def __init__(self, path: str, config: WorkingConfig | None = None,
                 busy_timeout_ms: int = 5000, synchronous: str = "FULL") -> None:  # fmt: skip
        """``synchronous``: the store's level (``SQLiteConfig.synchronous``), so an
        acknowledged working-memory write or erasure is as durable as the store's."""
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.config = config or WorkingConfig()
        self.path = path
        self._busy_ms = busy_timeout_ms  # the bound on waiting for the file's write lock
        self._lock = threading.Lock()
        self._next_purge = 0
        # Counted before connecting: erasure scans read its files (``held_files``), and
        # a scan's descriptor closed after SQLite took its locks would drop them.
        self._held = path != ":memory:"
        self._holder = held_files.hold(path) if self._held else 0
        try:
            self._connect(synchronous.upper())
        except BaseException:
            if self._held:
                self._held = False
                held_files.release(path, self._holder)
            raise

    def _connect(self, synchronous: str) -> None:
        """Open ``_conn``, set its pragmas and migrate the schema; a failed open (a
        pragma, a migration, a lock never freed) keeps no connection."""
        try:
            self._conn = conn = sqlite3.connect(self.path, isolation_level=None,
                                                check_same_thread=False)  # fmt: skip
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open working memory at {self.path!r}: {exc}") from exc
        try:
            self._configure(conn, synchronous)
            self._migrate()
        except BaseException:
            conn.close()
            raise

    def _configure(self, conn: sqlite3.Connection, synchronous: str) -> None:
        """The pragmas, tried again while another connection's lock refuses them (a
        WAL being reset refuses at once, without the busy handler); past the bound,
        ``Unavailable``."""

        def pragmas() -> None:  # not busy_timeout: ``retrying`` cuts it to the time left
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("PRAGMA secure_delete = ON")

        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_ms)}")  # takes no lock
            busy.retrying(pragmas, conn, self.path, "opening working memory", self._busy_ms)
        except Unavailable:
            raise
        except StoreError as exc:
            raise StoreError(f"cannot open working memory at {self.path!r}: "
                             f"{exc.__cause__}") from exc.__cause__  # fmt: skip

    def _migrate(self) -> None:
        """Apply the pending entries of ``MIGRATIONS`` in one transaction."""
        with self._write() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS working_migrations "
                         "(name TEXT PRIMARY KEY, at TEXT)")  # fmt: skip
            done = {row[0] for row in conn.execute("SELECT name FROM working_migrations")}
            for name, script in MIGRATIONS:
                if name in done:
                    continue
                try:
                    for statement in (part for part in script.split(";") if part.strip()):
                        conn.execute(statement)
                except sqlite3.Error as exc:
                    raise MigrationError(f"working migration {name} failed: {exc}") from exc
                conn.execute("INSERT INTO working_migrations VALUES (?, datetime('now'))", (name,))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: concurrent writers queue, none
        reads a count another is about to change)."""
        with self._lock:
            busy.retrying(lambda: self._conn.execute("BEGIN IMMEDIATE"), self._conn, self.path,
                          "a working-memory write", self._busy_ms)  # fmt: skip
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise busy.failure(exc, self.path, "a working-memory write",
                                       self._busy_ms, _LABEL) from exc  # fmt: skip
                raise

    def _read(self, sql: str, params: dict[str, Any]) -> list[tuple[str, str, int, int]]:
        """One read, tried again while a lock refuses it at once (a WAL being reset by
        another connection), within the busy bound."""
        with self._lock:
            try:
                rows: list[tuple[str, str, int, int]] = busy.retrying(
                    lambda: self._conn.execute(sql, params).fetchall(), self._conn, self.path,
                    "a working-memory read", self._busy_ms)  # fmt: skip
                return rows
            except Unavailable:
                raise
            except StoreError as exc:
                raise StoreError(f"{_LABEL}{exc}") from exc.__cause__

    def _purge(self, conn: sqlite3.Connection, scope: WorkingScope, now_us: int) -> None:
        """Delete the scope's expired items, and now and then every scope's."""
        cond, params = _slot(scope, now=now_us)
        conn.execute(f"DELETE FROM working_items WHERE {cond} AND expires_at <= :now", params)
        if now_us >= self._next_purge:
            conn.execute("DELETE FROM working_items WHERE expires_at <= :now", {"now": now_us})
            self._next_purge = now_us + int(self.config.purge_interval_seconds * 1_000_000)

    def put(self, scope: WorkingScope, key: str, value: str, ttl: timedelta,
            now: datetime) -> WorkingItem:  # fmt: skip
        """Set ``key`` until ``now + ttl``; refused when the scope is full."""
        now_us, end_us = _us(now), _us(now + ttl)
        with self._write() as conn:
            self._purge(conn, scope, now_us)
            cond, params = _slot(scope, key=key, value=value, set_at=now_us, expires_at=end_us)
            exists = conn.execute(f"SELECT 1 FROM working_items WHERE {cond} AND key = :key",
                                  params).fetchone()  # fmt: skip
            if exists is None:
                (count,) = conn.execute(f"SELECT count(*) FROM working_items WHERE {cond}",
                                        params).fetchone()  # fmt: skip
                if count >= self.config.max_items:
                    raise InvalidArgument(
                        f"this {scope.kind}'s working memory holds {count} items, the limit; "
                        "delete or clear some first"
                    )
            conn.execute(_UPSERT, params)
        return WorkingItem(key, json.loads(value), _at(now_us), _at(end_us), scope)

    def fetch(self, scope: WorkingScope, key: str, now: datetime) -> WorkingItem | None:
        """The item under ``key`` if it is live at ``now``."""
        cond, params = _slot(scope, key=key, now=_us(now))
        rows = self._read(f"SELECT key, value, set_at, expires_at FROM working_items WHERE "
                          f"{cond} AND key = :key AND expires_at > :now", params)  # fmt: skip
        return _item(rows[0], scope) if rows else None

    def items(self, scope: WorkingScope, now: datetime) -> list[WorkingItem]:
        """The scope's live items, most recently set first (then by key)."""
        cond, params = _slot(scope, now=_us(now))
        rows = self._read(f"SELECT key, value, set_at, expires_at FROM working_items WHERE "
                          f"{cond} AND expires_at > :now ORDER BY set_at DESC, key",
                          params)  # fmt: skip
        return [_item(row, scope) for row in rows]

    def remove(self, scope: WorkingScope, key: str, now: datetime) -> bool:
        """Delete ``key``; True when it was live."""
        with self._write() as conn:
            cond, params = _slot(scope, key=key)
            cursor = conn.execute(
                f"DELETE FROM working_items WHERE {cond} AND key = :key RETURNING expires_at",
                params,
            )
            return any(end > _us(now) for (end,) in cursor.fetchall())

    def clear(self, scope: WorkingScope, now: datetime) -> int:
        """Delete the scope's items; the number that were live."""
        with self._write() as conn:
            cond, params = _slot(scope)
            cursor = conn.execute(f"DELETE FROM working_items WHERE {cond} RETURNING expires_at",
                                  params)  # fmt: skip
            return sum(1 for (end,) in cursor.fetchall() if end > _us(now))

    def erase_subject(self, tenant_id: str, user_id: str) -> int:
        """Delete every item of one user of one tenant (every agent, session and task),
        then move the WAL's pages into the zeroed file and truncate it."""
        with self._write() as conn:
            cond, params = _subject(tenant_id, user_id)
            cursor = conn.execute(f"DELETE FROM working_items WHERE {cond}", params)
            erased = cursor.rowcount
        self._checkpoint()
        return erased

    def _checkpoint(self, attempts: int = 5) -> None:
        """``wal_checkpoint(TRUNCATE)``, retried while another connection reads;
        ``StoreError`` when the WAL could not be emptied (it may hold erased bytes)."""
        if self.path in ("", ":memory:"):
            return
        for attempt in range(attempts):
            with self._lock:
                busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy == 0:
                return
            time.sleep(0.01 * (attempt + 1))
        raise StoreError(
            f"working memory: the WAL of {self.path!r} could not be checkpointed "
            "after an erasure; run erase_subject again when readers are idle"
        )

    def scrub(self, strings: Sequence[str], erased: bool) -> Scrub:
        """Checkpoint the WAL and look for ``strings`` (as written and as JSON escapes
        them) in this file, its WAL and shared memory; a text a live item holds is
        not residue (an agent may keep what a forgotten memory said)."""
        escaped = [json.dumps(text, ensure_ascii=False)[1:-1] for text in strings]
        wanted = erasure.windows([*strings, *escaped])
        if self.path in ("", ":memory:"):
            return Scrub((), (), wanted.strings, wanted.short)

        def still_held(window: str) -> bool:
            return bool(self._read(_HOLDING, {"w": window}))

        return erasure.scrub(self._conn, self._lock, self.path, still_held, wanted, "working ")

    def subject_residue(self, tenant_id: str, user_id: str) -> int:
        """Rows of that user still in the table, expired or not."""
        with self._lock:
            cond, params = _subject(tenant_id, user_id)
            (count,) = self._conn.execute(
                f"SELECT count(*) FROM working_items WHERE {cond}", params
            ).fetchone()
        return int(count)

    def close(self) -> None:
        """Close the connection; the working memory is unusable afterwards."""
        with self._lock:
            self._conn.close()
            if self._held:
                self._held = False
                held_files.release(self.path, self._holder)


def _item(row: tuple[str, str, int, int], scope: WorkingScope) -> WorkingItem:
    key, value, set_at, expires_at = row
    return WorkingItem(key, json.loads(value), _at(set_at), _at(expires_at), scope)
