"""Lock contention on a SQLite file: bounded waiting, then a clear ``Unavailable``.

SQLite admits one writer at a time per file. A connection that wants the write
lock (``BEGIN IMMEDIATE``) while another process or connection holds it waits in
SQLite's busy handler for up to ``sqlite.busy_timeout_ms``. Some refusals come
back at once, without the handler (a WAL snapshot that moved, a WAL being
recovered or reset by another connection), so ``retrying`` tries again with
capped, jittered exponential backoff until the same bound has passed in all.
After the bound the caller gets ``Unavailable`` naming the file, how long it
waited and what to do, never ``sqlite3.OperationalError: database is locked``;
nothing was written. ``failure`` words any other SQLite error of a statement
the same way (a lock error there is ``Unavailable`` too).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from engram.errors import StoreError, Unavailable

__all__ = ["failure", "is_busy", "locked", "retrying"]

T = TypeVar("T")
_FIRST_S = 0.002  # the first pause between attempts; doubled each time
_MAX_S = 0.1  # the longest pause


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite refusing a lock another connection holds."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text


def locked(path: str, doing: str, waited_s: float, bound_ms: int) -> Unavailable:
    """The error for a lock still held after the bound."""
    return Unavailable(
        f"the SQLite database {path!r} stayed locked by another connection while {doing} "
        f"waited {waited_s * 1000:.0f} ms (sqlite.busy_timeout_ms = {bound_ms}); nothing was "
        f"written. Another process or thread holds a long write transaction on the file (a "
        f"bulk import, an index rebuild, a VACUUM): retry later, or raise "
        f"sqlite.busy_timeout_ms"
    )


def failure(exc: sqlite3.Error, path: str, doing: str, bound_ms: int,
            label: str = "") -> StoreError:  # fmt: skip
    """The engram error for a failed statement: ``Unavailable`` for a lock (SQLite's
    handler already waited), ``StoreError`` otherwise (``label`` starts its message)."""
    if is_busy(exc):
        return locked(path, doing, bound_ms / 1000, bound_ms)
    return StoreError(f"{label}SQLite error: {exc}")


def retrying(
    attempt: Callable[[], T], conn: sqlite3.Connection, path: str, doing: str, bound_ms: int,
) -> T:  # fmt: skip
    """``attempt()``, tried again while SQLite reports a lock, until ``bound_ms`` has
    passed since the first try; then ``Unavailable``. Before a retry the busy
    handler of ``conn`` is cut to the time left, so the whole wait stays within
    the bound; it is restored afterwards. Other SQLite errors are ``StoreError``."""
    start, pause, shortened = time.monotonic(), _FIRST_S, False
    try:
        while True:
            try:
                return attempt()
            except sqlite3.Error as exc:
                if not is_busy(exc):
                    raise StoreError(f"SQLite error: {exc}") from exc
                left = bound_ms / 1000 - (time.monotonic() - start)
                if left <= 0:
                    raise locked(path, doing, time.monotonic() - start, bound_ms) from None
            time.sleep(min(pause * (0.5 + random.random()), left))
            pause = min(pause * 2, _MAX_S)
            left = bound_ms / 1000 - (time.monotonic() - start)
            conn.execute(f"PRAGMA busy_timeout = {max(0, int(left * 1000))}")
            shortened = True
    finally:
        if shortened:
            conn.execute(f"PRAGMA busy_timeout = {int(bound_ms)}")
