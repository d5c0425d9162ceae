"""An erasure's scan of the SQLite files keeps this process's SQLite locks.

POSIX locks belong to a process and a file: closing any descriptor of the file
drops them all. The physical erasure check reads the database, ``-wal`` and
``-shm``; when it opened and closed them, the store's shared lock on ``-shm`` (and
its WAL read marks) vanished while it kept using them, and the concurrent
workload (``test_concur_workload.py``) then lost acknowledged writes and read
"database disk image is malformed". Here the locks are read from
``/proc/locks`` before and after a ``forget`` and an ``erase_subject``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests.conftest import OpenMem

from engram import Context
from engram.store import erasure, held_files

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads the process's locks from /proc/locks")  # fmt: skip


def _locks(path: str) -> list[str]:
    """The POSIX locks this process holds on the file at ``path``."""
    inode, pid = os.stat(path).st_ino, str(os.getpid())
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if fields[1] == "POSIX" and fields[4] == pid and fields[5].endswith(f":{inode}"):
            held.append(" ".join(fields[3:]))
    return held


def test_forget_and_erasure_keep_the_stores_locks_on_its_files(
    tmp_path: Path, open_mem: OpenMem, ctx: Context
) -> None:
    path = str(tmp_path / "locks.db")
    mem = open_mem(f"sqlite:///{path}")
    ids = [mem.remember(ctx, f"Locker {n} holds the cobalt harbor key.").record for n in range(3)]
    mem.recall(ctx, "cobalt harbor key")  # a read connection too
    before = _locks(path + "-shm")
    assert before, "an open WAL store holds a shared lock on its -shm file"
    receipt = mem.forget(ctx, ids[0].id)  # type: ignore[union-attr]
    assert receipt.checked, receipt  # the physical pass ran (it reads the three files)
    assert _locks(path + "-shm") == before
    mem.erase_subject(ctx.tenant_id, str(ctx.user_id))
    assert _locks(path + "-shm") == before
    assert mem.list(ctx, status=None) == []


def test_a_scan_reads_every_byte_through_a_held_descriptor(tmp_path: Path,
                                                           open_mem: OpenMem) -> None:  # fmt: skip
    path = str(tmp_path / "scan.db")
    mem = open_mem(f"sqlite:///{path}")
    mem.remember(Context(tenant_id="t", user_id="u"), "Needle sentence for the scan test.")
    before = [_locks(path + suffix) for suffix in ("", "-shm")]
    files = [path + suffix for suffix in ("", "-wal", "-shm")]  # the text is in the WAL yet
    wanted = [b"Needle sentence", b"absent needle!"]
    found = set().union(*(erasure.present(f, wanted, database=path) for f in files))
    assert found == {b"Needle sentence"}
    assert [_locks(path + suffix) for suffix in ("", "-shm")] == before
    mem.close()
    assert sum(len(b) for _, b in held_files.chunks(path, path, 4096, 0)) == os.path.getsize(path)
