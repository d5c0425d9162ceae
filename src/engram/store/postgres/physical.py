"""What an erasure can show about PostgreSQL's files, and the rewrite that empties them.

A deleted row stays in its heap page until ``VACUUM`` prunes it, and even then
PostgreSQL does not zero the freed space: the text of a deleted row stays in the
relation file (and its words in the GIN index) until the page is rewritten
(measured: after ``erase_subject`` and ``VACUUM`` the heap and the GIN index still
held the erased words; after ``VACUUM FULL`` neither did). So ``scrub``:

1. runs ``VACUUM`` on the tables an erasure deletes from (check ``vacuum``) and
   reads ``pg_stat_user_tables.n_dead_tup`` (check ``dead tuples``: a dead row
   version that an older snapshot still sees survives ``VACUUM``);
2. when this process can read the server's files (a local server: the data
   directory's ``global/pg_control`` carries the server's system identifier),
   runs ``CHECKPOINT`` and looks for the erased texts' byte windows
   (``store.erasure``) in the heap, TOAST and index files of ``records`` and
   ``traces`` (check ``relation file bytes``); a window a surviving record still
   holds is not residue;
3. rewrites the tables (``VACUUM FULL``, check ``rewrite``) when residue was found
   and ``PostgresConfig.erasure_rewrite`` is ``on_residue``, or always with
   ``always``, then looks again. ``VACUUM FULL`` locks the table for the rewrite
   (readers and writers of every tenant wait): ``never`` leaves the residue
   reported instead. A rewrite that cannot get a table's lock within 5 s (a
   transaction left open elsewhere) gives up and fails ``rewrite``.

Not checked, and not claimed: the WAL (every change is in it until its segment
is recycled and overwritten), archived WAL, base backups and replicas (a replica
applies the deletion, and keeps the same file residue), TOAST values stored
compressed (their bytes differ from the text, so the scan cannot see them: a
rewrite removes them), single words in the GIN index (too common to prove
anything; a rewrite removes them).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psycopg

from engram.store import erasure
from engram.store.erasure import Scrub, Windows
from engram.store.postgres.session import Conn, on

__all__ = ["REWRITE_MODES", "TABLES", "scrub"]

TABLES = ("records", "traces", "forgotten")
_SCANNED = ("records", "traces")
REWRITE_MODES = ("never", "on_residue", "always")
_LOCK_WAIT = "5000"  # milliseconds a rewrite waits for a table's lock
_DEAD = (
    "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
    " WHERE relname = ANY(%(tables)s::text[])"
)
_FILES = (
    "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid IN ("
    " SELECT t.oid FROM pg_class t WHERE t.relname = ANY(%(tables)s::text[])"
    " AND t.relnamespace = 'public'::regnamespace"
    " UNION SELECT t.reltoastrelid FROM pg_class t WHERE t.relname = ANY(%(tables)s::text[])"
    " AND t.relnamespace = 'public'::regnamespace"
    " UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid"
    " WHERE t.relname = ANY(%(tables)s::text[]) AND t.relnamespace = 'public'::regnamespace"
    " UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.reltoastrelid = i.indrelid"
    " WHERE t.relname = ANY(%(tables)s::text[]) AND t.relnamespace = 'public'::regnamespace)"
)
# Deliberately across tenants, as SQLite's ``holding``: a file byte belongs to no
# tenant, and the query returns no record.
_HOLDING = (
    "SELECT 1 FROM records r WHERE strpos(r.content, %(w)s) > 0 OR strpos(r.key, %(w)s) > 0"
    " OR strpos(r.value, %(w)s) > 0 OR strpos(r.source_ref, %(w)s) > 0 LIMIT 1"
)


def scrub(conn: Conn, strings: Sequence[str], rewrite: str) -> Scrub:
    """The passes of the module notes on ``conn`` (autocommit-like: no transaction
    open, no statement timeout)."""
    wanted = erasure.windows(strings)
    checked, failed = ["vacuum", "dead tuples"], []
    if not _vacuumed(conn):
        failed.append("dead tuples")
    if rewrite == "always":
        checked.append("rewrite")
        if not _rewrite(conn):
            failed.append("rewrite")
    datadir = _local_data_directory(conn)
    if datadir is None or not wanted.windows:
        return Scrub(tuple(checked), tuple(failed), wanted.strings, wanted.short)
    checked.append("relation file bytes")
    dirty = _residue(conn, datadir, wanted)
    if dirty and rewrite == "on_residue":
        checked.append("rewrite")
        if not _rewrite(conn):
            failed.append("rewrite")
        dirty = _residue(conn, datadir, wanted)
    if dirty:
        failed.append("relation file bytes")
    return Scrub(tuple(checked), tuple(failed), wanted.strings, wanted.short)


def _vacuumed(conn: Conn, attempts: int = 5) -> bool:
    """``VACUUM`` until no dead row version is left (True) or ``attempts`` pass: a
    transaction still running when the deletion committed keeps its rows visible
    to it, so ``VACUUM`` must leave them until it ends."""
    for attempt in range(attempts):
        for table in TABLES:
            conn.execute(f"VACUUM {table}")
        if not int(on(conn, (_DEAD, {"tables": list(TABLES)}))[0][0]):
            return True
        time.sleep(0.02 * (attempt + 1))
    return False


def _rewrite(conn: Conn) -> bool:
    """``VACUUM FULL`` each table; False when one could not get its lock within
    ``_LOCK_WAIT`` (a transaction left open elsewhere: never wait for it forever)."""
    conn.execute("SELECT set_config('lock_timeout', %(t)s, false)", {"t": _LOCK_WAIT})
    try:
        for table in TABLES:
            conn.execute(f"VACUUM FULL {table}")
    except psycopg.errors.LockNotAvailable:
        _reset(conn)
        return False
    finally:
        conn.execute("SELECT set_config('lock_timeout', '0', false)")
    return True


def _local_data_directory(conn: Conn) -> Path | None:
    """The server's data directory when this process can read it and it is this
    server's (same system identifier); None otherwise (not checked)."""
    try:
        directory = Path(str(on(conn, ("SHOW data_directory", {}))[0][0]))
        ident = int(on(conn, ("SELECT system_identifier FROM pg_control_system()", {}))[0][0])
        with open(directory / "global" / "pg_control", "rb") as handle:
            local = int.from_bytes(handle.read(8), "little")
    except (psycopg.Error, OSError, ValueError):  # no privilege, not here: not checked
        _reset(conn)
        return None
    return directory if local == ident and os.access(directory / "base", os.R_OK) else None


def _reset(conn: Conn) -> None:
    """Leave the connection usable after a refused statement."""
    if conn.info.transaction_status.name == "INERROR":
        conn.rollback()


def _residue(conn: Conn, datadir: Path, wanted: Windows) -> bool:
    """Whether a relation file holds a window no surviving record explains."""
    try:
        conn.execute("CHECKPOINT")  # the pages VACUUM changed reach the files
    except psycopg.Error:  # no privilege: the files may lag; residue is then overstated
        _reset(conn)
    for path in _files(conn, datadir):
        for window in erasure.present(str(path), wanted.windows):
            if not on(conn, (_HOLDING, {"w": window.decode()})):
                return True
    return False


def _files(conn: Conn, datadir: Path) -> Iterator[Path]:
    """Every segment of the heap, TOAST and index files of the scanned tables."""
    for (relative,) in on(conn, (_FILES, {"tables": list(_SCANNED)})):
        if relative is None:
            continue
        base = datadir / str(relative)
        segment = re.compile(re.escape(base.name) + r"(\.\d+)?")
        yield from (p for p in base.parent.glob(base.name + "*")
                    if segment.fullmatch(p.name) and p.is_file())  # fmt: skip
