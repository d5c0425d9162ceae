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
import signal
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from tests.conftest import T0, OpenMem
from tests.descriptors import open_descriptors as _fds

from engram import Context
from engram.store import erasure, held_files
from engram.working.base import WorkingScope
from engram.working.sqlite import SQLiteWorking

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


def _in_child(path: str) -> int:
    """The forked child's checks: an empty registry and a lock it can take."""
    signal.alarm(5)  # a lock inherited held would hang the child: SIGALRM ends it
    assert held_files._databases == {}, held_files._databases
    token = held_files.hold(path)
    assert sum(len(b) for _, b in held_files.chunks(path, path, 4096, 0)) == os.path.getsize(path)
    held_files.release(path, token)
    assert held_files._databases == {}
    return 0


def test_a_forked_child_gets_a_fresh_lock_and_an_empty_registry(tmp_path: Path) -> None:
    path = str(tmp_path / "fork.db")
    Path(path).write_bytes(b"x" * 5000)
    token = held_files.hold(path)
    list(held_files.chunks(path, path, 4096, 0))  # a held descriptor the child inherits
    try:
        with held_files._lock:  # another thread holds it as this one forks
            pid = os.fork()
            if pid == 0:
                try:
                    code = _in_child(path)
                except BaseException:
                    code = 1
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        held_files.release(path, token)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _fds(path) == 0


def _close_inherited_in_child(path: str, token: int) -> int:
    """A store held before the fork closes in the child: the child's own store of
    the file keeps its count and its scan descriptors."""
    mine = held_files.hold(path)
    list(held_files.chunks(path, path, 4096, 0))
    held_files.release(path, token)  # the parent's store, closed by the child
    entry = held_files._databases.get(os.path.realpath(path))
    assert entry is not None
    assert entry.users == 1
    assert entry.fds
    held_files.release(path, mine)
    return 0


def test_a_store_from_before_a_fork_closed_in_the_child_counts_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "inherited.db")
    Path(path).write_bytes(b"y" * 5000)
    token = held_files.hold(path)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                code = _close_inherited_in_child(path, token)
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        held_files.release(path, token)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_store_opening_as_the_last_other_closes_keeps_its_locks(
    tmp_path: Path, open_mem: OpenMem, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last store of a file closes (and with it the scan's descriptors) while
    another opens: had the new one connected before it counted (``hold``), closing
    the descriptors dropped the locks its connection had just taken."""
    path = str(tmp_path / "reopen.db")
    first = open_mem(f"sqlite:///{path}")
    first.remember(ctx, "The amber lighthouse keeps the spare key.")
    assert erasure.present(path + "-shm", [b"absent needle!"], database=path) == set()
    real_hold, closed = held_files.hold, []

    def hold_as_the_first_closes(database: str) -> int:
        if os.path.realpath(database) == os.path.realpath(path) and not closed:
            closed.append(first.close())  # the other thread's close, at the worst moment
        return real_hold(database)

    monkeypatch.setattr(held_files, "hold", hold_as_the_first_closes)
    second = open_mem(f"sqlite:///{path}")
    assert closed
    assert _locks(path + "-shm"), "the open store lost its lock on -shm"
    assert second.recall(ctx, "amber lighthouse").items


def test_a_store_closed_during_a_scan_waits_for_the_scan(tmp_path: Path,
                                                         open_mem: OpenMem) -> None:  # fmt: skip
    path = str(tmp_path / "pinned.db")
    mem = open_mem(f"sqlite:///{path}")
    mem.remember(Context(tenant_id="t", user_id="u"), "Pinned sentence for the scan test.")
    size = os.path.getsize(path)
    assert size > 1024
    scan = held_files.chunks(path, path, 1024, 0)
    first = next(scan)
    mem.close()  # its descriptor must stay open until the scan ends
    rest = list(scan)  # no OSError from a closed descriptor (nor a reused one's bytes)
    assert sum(len(b) for _, b in [first, *rest]) == size
    assert _fds(path) == 0, "the scan's end closes the descriptor the store no longer needs"


_HOUR = timedelta(hours=1)


def _cycle(path: str, scope: WorkingScope, errors: list[BaseException], rounds: int) -> None:
    """Open a store on ``path``, write, scan its files, check its lock, close; again."""
    try:
        for n in range(rounds):
            working = SQLiteWorking(path, busy_timeout_ms=10_000)
            try:
                working.put(scope, f"k{n}", '"Racing sentence for the scan."', _HOUR, T0)
                working.scrub(["Racing sentence for the scan."], erased=False)
                assert _locks(path + "-shm"), "an open store lost its lock on -shm"
            finally:
                working.close()
    except BaseException as exc:  # an OSError, a lost lock: the test reports it
        errors.append(exc)


def test_stores_opening_and_closing_during_scans_keep_their_locks(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db-working")
    scope = WorkingScope("t", "u", None, "session", "s")
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_cycle, args=(path, scope, errors, 40)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert _fds(path) == 0
    assert _fds(path + "-shm") == 0
