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
