"""Reading a SQLite database's files without dropping this process's locks on them.

SQLite arbitrates between processes with POSIX advisory locks, and a POSIX lock
belongs to the process and the file, not to a descriptor: closing *any*
descriptor of a file drops every lock this process holds on it, including those
of its open SQLite connections (https://sqlite.org/howtocorrupt.html, 2.2). The
erasure check reads the database, its ``-wal`` and ``-shm`` (``erasure.present``);
had it opened and closed them per scan, the store's WAL read marks and its
shared lock on ``-shm`` would vanish while it kept using them, and another
process's checkpoint or WAL restart would overwrite frames a reader here still
needed: lost acknowledged writes and "database disk image is malformed"
(``tests/reliability/test_concur_workload.py`` found it).

So each SQLite store (``hold`` when it opens, ``release`` after it closed its
connections) counts as a user of its database here, and a descriptor this module
opens on one of the database's files stays open until the last user in this
process has closed. Reads use ``os.pread`` on it: ``mmap`` would duplicate the
descriptor and close the duplicate. A file of no open store (a PostgreSQL
relation file) is read through a descriptor closed at once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["chunks", "hold", "release"]

_lock = threading.Lock()


@dataclass
class _Database:
    """One database's users in this process and the descriptors held for it."""

    users: int = 0
    fds: dict[str, int] = field(default_factory=dict)  # file path -> descriptor
    stale: list[int] = field(default_factory=list)  # of files replaced since they opened


_databases: dict[str, _Database] = {}


def _name(path: str) -> str:
    return os.path.realpath(path)


def hold(database: str) -> None:
    """Count one more open SQLite store of the database file at ``database``."""
    with _lock:
        _databases.setdefault(_name(database), _Database()).users += 1


def release(database: str) -> None:
    """Count one store fewer (call after closing its SQLite connections); the last
    closes the descriptors held for the database's files."""
    with _lock:
        name = _name(database)
        entry = _databases.get(name)
        if entry is None:
            return
        entry.users -= 1
        if entry.users > 0:
            return
        del _databases[name]
    for fd in [*entry.fds.values(), *entry.stale]:
        os.close(fd)


def _held_fd(entry: _Database, path: str) -> int:
    """A descriptor of the file now at ``path``, opened once and kept (with ``_lock``)."""
    fd = entry.fds.get(path)
    if fd is not None:
        now, held = os.stat(path), os.fstat(fd)
        if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        entry.stale.append(fd)  # another file now: this one may still be locked here
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    entry.fds[path] = fd
    return fd


def chunks(path: str, database: str | None, size: int, overlap: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` blocks of the file at ``path``: ``size`` bytes each plus the
    next ``overlap`` (so a pattern up to ``overlap + 1`` bytes long is whole in one).
    ``database`` names the SQLite database the file belongs to (the file itself, its
    ``-wal`` or ``-shm``); while a store of it is open here the descriptor stays
    open. A missing file yields nothing."""
    transient = False
    try:
        with _lock:
            entry = None if database is None else _databases.get(_name(database))
            if entry is not None and entry.users > 0:
                fd = _held_fd(entry, path)
            else:
                fd, transient = os.open(path, os.O_RDONLY | os.O_CLOEXEC), True
    except FileNotFoundError:
        return
    try:
        end = os.fstat(fd).st_size
        for start in range(0, end, size):
            yield start, os.pread(fd, min(size + overlap, end - start), start)
    finally:
        if transient:
            os.close(fd)
