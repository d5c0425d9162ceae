"""A working-memory file that fails to open keeps no connection to it.

A pragma or the migration can fail as the file opens (a table of another shape,
another connection's lock held past the wait); the half-open connection was then
left to the garbage collector, holding a descriptor (and its locks) meanwhile.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest
from tests.descriptors import open_descriptors as _fds

from engram.errors import MigrationError, Unavailable
from engram.store import held_files
from engram.working.sqlite import SQLiteWorking

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="counts descriptors under /proc/self/fd")  # fmt: skip


def test_a_failed_migration_closes_the_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "clash.db-working")
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE working_items (x)")  # the migration's table, another shape
    other.close()
    with pytest.raises(MigrationError) as failure:
        SQLiteWorking(path)
    assert failure.value  # the traceback (and the half-open object) is still alive here
    assert _fds(path) == 0
    assert os.path.realpath(path) not in held_files._databases


def test_a_lock_held_past_the_wait_closes_the_connection(tmp_path: Path) -> None:
    path = str(tmp_path / "busy.db-working")
    SQLiteWorking(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the migration's write transaction waits for it
    with pytest.raises(Unavailable) as failure:
        SQLiteWorking(path, busy_timeout_ms=50)
    other.close()  # SQLite defers closing a descriptor while another connection holds a lock
    assert failure.value  # the traceback (and the half-open object) is still alive here
    assert _fds(path) == 0
    assert os.path.realpath(path) not in held_files._databases


class _RefusesJournalModeOnce:
    """A real connection whose first ``journal_mode`` is refused at once, as SQLite
    refuses it (without its busy handler) while another connection resets the WAL."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.refused = conn, False
        self.sent: list[str] = []

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        self.sent.append(sql)
        if "journal_mode" in sql and not self.refused:
            self.refused = True
            raise sqlite3.OperationalError("database is locked")
        return self.conn.execute(sql, *args)


def test_an_open_refused_at_once_is_tried_again_within_the_bound(tmp_path: Path) -> None:
    """The pragmas are asked again after an immediate refusal, and the retry waits at
    most what is left of ``busy_timeout_ms``, not the whole bound once more."""
    working = SQLiteWorking(str(tmp_path / "w.db-working"), busy_timeout_ms=5000)
    try:
        proxy = _RefusesJournalModeOnce(sqlite3.connect(str(tmp_path / "x.db")))
        working._configure(proxy, "FULL")  # type: ignore[arg-type]
        journal = [i for i, sql in enumerate(proxy.sent) if "journal_mode" in sql]
        assert len(journal) == 2  # refused, then asked again
        timeouts = [sql for sql in proxy.sent[: journal[1]] if "busy_timeout" in sql]
        assert timeouts[-1] != "PRAGMA busy_timeout = 5000", proxy.sent
        proxy.conn.close()
    finally:
        working.close()
