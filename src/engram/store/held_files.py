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

So each SQLite store counts as a user of its database here: it calls ``hold``
*before* it connects and ``release`` after it closed its connections (or failed to
open), so no connection of this process has a lock on the files while ``users``
is 0. A descriptor this module opens on one of the database's files stays open
until there is no user and no scan in progress (``chunks`` pins the entry while
it reads), and it is closed under ``_lock``, the lock ``hold`` takes: a store
opening meanwhile either counts before the close (nothing closes) or connects
after it. Reads use ``os.pread`` on it: ``mmap`` would duplicate the descriptor
and close the duplicate. A file of no SQLite database (a PostgreSQL relation
file, ``database=None``) is read through a descriptor closed at once.

A forked child holds none of its parent's POSIX locks (they are not inherited)
and must not use the SQLite connections it inherited; it starts with a fresh
lock and an empty registry (``_after_fork_in_child``).
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
    """One database's users and scans in this process and the descriptors held for it."""

    users: int = 0
    scans: int = 0  # ``chunks`` reading a held descriptor now (its close waits for them)
    fds: dict[str, int] = field(default_factory=dict)  # file path -> descriptor
    stale: list[int] = field(default_factory=list)  # of files replaced since they opened


_databases: dict[str, _Database] = {}


def _name(path: str) -> str:
    return os.path.realpath(path)


def hold(database: str) -> int:
    """Count one more SQLite store of the database file at ``database``; call it
    before the store connects, so a scan's descriptor is never closed under it.
    Returns the token to give ``release``: this process's id."""
    with _lock:
        _databases.setdefault(_name(database), _Database()).users += 1
    return os.getpid()


def release(database: str, token: int) -> None:
    """Count one store fewer (call after closing its SQLite connections); the last
    closes the descriptors held for the database's files, unless a scan is reading
    them (then the scan's end closes them). A store held before a ``fork()`` and
    closed in the child (``token`` is the parent's id) counts nothing: the child's
    registry started empty, and its own stores must keep their descriptors."""
    if token != os.getpid():
        return
    with _lock:
        name = _name(database)
        entry = _databases.get(name)
        if entry is None:
            return
        entry.users -= 1
        _close_if_unused(name, entry)


def _close_if_unused(name: str, entry: _Database) -> None:
    """With ``_lock`` held: forget the entry and close its descriptors once it has
    no user and no scan (under the lock, so no ``hold`` and connect slips between)."""
    if entry.users > 0 or entry.scans > 0:
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


def _blocks(fd: int, size: int, overlap: int) -> Iterator[tuple[int, bytes]]:
    end = os.fstat(fd).st_size
    for start in range(0, end, size):
        yield start, os.pread(fd, min(size + overlap, end - start), start)


def chunks(path: str, database: str | None, size: int, overlap: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` blocks of the file at ``path``: ``size`` bytes each plus the
    next ``overlap`` (so a pattern up to ``overlap + 1`` bytes long is whole in one).
    ``database`` names the SQLite database the file belongs to (the file itself, its
    ``-wal`` or ``-shm``): the descriptor is held in its entry, pinned while this
    reads, and stays open while a store of it is open here. A missing file yields
    nothing."""
    if database is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            yield from _blocks(fd, size, overlap)
        finally:
            os.close(fd)
        return
    name = _name(database)
    with _lock:
        entry = _databases.setdefault(name, _Database())
        try:
            fd = _held_fd(entry, path)
        except FileNotFoundError:
            _close_if_unused(name, entry)
            return
        entry.scans += 1
    try:
        yield from _blocks(fd, size, overlap)
    finally:
        with _lock:
            entry.scans -= 1
            if _databases.get(name) is entry:
                _close_if_unused(name, entry)


def _after_fork_in_child() -> None:
    """A forked child inherits the registry and ``_lock`` in whatever state the
    forking thread saw (another thread may have held it): it gets a fresh lock and
    an empty registry. The inherited descriptors stay open (a scan suspended in the
    forking thread may still read one); the child holds none of the parent's POSIX
    locks (fork does not copy them), so nothing it closes could drop the parent's."""
    global _lock, _databases
    _lock, _databases = threading.Lock(), {}


os.register_at_fork(after_in_child=_after_fork_in_child)
