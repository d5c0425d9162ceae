"""Physical erasure checks for a SQLite file: checkpoint, then look for the bytes.

After an erasure commits, ``secure_delete`` has zeroed the freed cells and pages
(``SQLiteStore._configure``), but the WAL still holds the pages as they were
before the delete until a checkpoint copies them back and truncates it. Here:

* ``checkpoint`` runs ``PRAGMA wal_checkpoint(TRUNCATE)``, retrying while a
  reader holds an old snapshot (a read statement in progress); it reports
  whether the WAL really was emptied;
* ``windows`` turns each erased string (content, key, serialised value,
  ``source.ref``) into byte windows of whole characters: the first and the last
  32 bytes (all of a shorter string). Strings under 8 bytes are not scanned:
  "03:00" or "vim" occur everywhere and would prove nothing. A window rather
  than the whole string, because a long text is split across overflow pages;
* ``present`` finds which windows occur anywhere in a file (the database, its
  ``-wal`` and ``-shm``), with a vectorised 8-byte anchor pass and an exact
  comparison at each candidate offset, so one pass serves thousands of windows.

A window found in the file is a residue unless a surviving record still holds
that text (the store checks); the receipt lists what was scanned.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engram.store import held_files

__all__ = [
    "MIN_BYTES", "Scrub", "Windows", "checkpoint", "merged", "present", "scrub", "windows",
]  # fmt: skip

MIN_BYTES = 8
_WIDTH = 32
_ANCHOR = 8
_CHUNK = 1 << 24
_HASH_BITS = 22
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FIND_UP_TO = 24  # fewer windows than this: one C-speed find per window is faster


@dataclass(frozen=True, slots=True)
class Windows:
    """The byte windows of a set of erased strings, and how many strings were too
    short to scan."""

    windows: frozenset[bytes]
    strings: int
    short: int


@dataclass(frozen=True, slots=True)
class Scrub:
    """What the physical pass checked (names), which checks failed, how many erased
    strings were scanned for and how many were too short to scan."""

    checked: tuple[str, ...]
    failed: tuple[str, ...]
    scanned: int
    short: int


def _head(text: str) -> bytes:
    out = b""
    for ch in text:
        encoded = ch.encode()
        if len(out) + len(encoded) > _WIDTH:
            break
        out += encoded
    return out


def windows(strings: Iterable[str | None]) -> Windows:
    """The windows to scan for: the first and last ``_WIDTH`` bytes of each string
    of at least ``MIN_BYTES`` bytes, cut at character boundaries."""
    found: set[bytes] = set()
    scanned = short = 0
    for text in {s for s in strings if s}:
        if len(text.encode()) < MIN_BYTES:
            short += 1
            continue
        scanned += 1
        found.add(_head(text))
        found.add(_tail(text))
    return Windows(frozenset(w for w in found if len(w) >= MIN_BYTES), scanned, short)


def _tail(text: str) -> bytes:
    out = b""
    for ch in reversed(text):
        encoded = ch.encode()
        if len(out) + len(encoded) > _WIDTH:
            break
        out = encoded + out
    return out


def checkpoint(conn: sqlite3.Connection, attempts: int = 5) -> bool:
    """``wal_checkpoint(TRUNCATE)`` until it completes (True) or ``attempts`` pass."""
    for attempt in range(attempts):
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy == 0:
            return True
        time.sleep(0.01 * (attempt + 1))
    return False


def present(path: str, wanted: Iterable[bytes], database: str | None = None) -> set[bytes]:
    """Which of ``wanted`` occur in the file at ``path`` (none if it is missing or empty).

    ``database``: the SQLite database ``path`` belongs to (itself, its ``-wal`` or
    ``-shm``), read through a descriptor ``held_files`` keeps open while a store of
    it is open here: closing one would drop this process's SQLite locks on it."""
    targets = [w for w in wanted if len(w) >= _ANCHOR]
    if not targets or not os.path.exists(path) or os.path.getsize(path) == 0:
        return set()
    by_anchor: dict[int, list[bytes]] = {}
    for w in targets:
        by_anchor.setdefault(int.from_bytes(w[:_ANCHOR], "little"), []).append(w)
    keys = np.array(sorted(by_anchor), dtype=np.uint64)
    found: set[bytes] = set()
    for _, block in held_files.chunks(path, database, _CHUNK, _WIDTH + _ANCHOR):
        if len(targets) <= _FIND_UP_TO:
            found |= {w for w in targets if w not in found and block.find(w) >= 0}
        else:
            found |= _scan(block, keys, by_anchor, found)
    return found


def _scan(
    data: bytes, keys: NDArray[np.uint64], by_anchor: dict[int, list[bytes]], known: set[bytes]
) -> set[bytes]:
    """The windows of ``by_anchor`` (not in ``known``) that occur in one block."""
    found: set[bytes] = set()
    for at in _candidates(np.frombuffer(data, dtype=np.uint8), keys):
        anchor = int.from_bytes(data[at : at + _ANCHOR], "little")
        for w in by_anchor.get(anchor, ()):
            if w not in found and w not in known and data[at : at + len(w)] == w:
                found.add(w)
    return found


def _candidates(block: NDArray[np.uint8], keys: NDArray[np.uint64]) -> Sequence[int]:
    """Offsets in ``block`` where an 8-byte anchor of ``keys`` starts: eight strided
    views of little-endian words, each filtered through a hashed bitmap of the
    anchors (one multiply and one gather per word), the few survivors then matched
    exactly by binary search."""
    table = np.zeros(1 << _HASH_BITS, dtype=np.bool_)
    table[_hash(keys)] = True
    offsets: list[int] = []
    for shift in range(_ANCHOR):
        count = (block.size - shift) // _ANCHOR
        if count <= 0:
            continue
        words = np.frombuffer(block[shift : shift + count * _ANCHOR].tobytes(), "<u8")
        maybe = np.flatnonzero(table[_hash(words)])
        if maybe.size:
            found = words[maybe]
            where = np.minimum(np.searchsorted(keys, found), keys.size - 1)
            exact = maybe[keys[where] == found]
            offsets.extend((exact * _ANCHOR + shift).tolist())
    return offsets


def _hash(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Fibonacci hashing of 64-bit words down to ``_HASH_BITS`` bits."""
    return (words * _GOLDEN) >> np.uint64(64 - _HASH_BITS)


_FILES = (("", "database file bytes"), ("-wal", "wal bytes"), ("-shm", "shm bytes"))


def scrub(
    conn: sqlite3.Connection, lock: AbstractContextManager[object], path: str,
    still_held: Callable[[str], bool], wanted: Windows, label: str = "",
) -> Scrub:  # fmt: skip
    """Empty the WAL, then look for ``wanted`` in the database, WAL and shared-memory
    files. A window that no surviving record explains (``still_held``) in the
    database file (e.g. a freed cell written before ``secure_delete`` was on)
    triggers one ``VACUUM`` and a second look. ``label`` starts every check's name
    (``"working "`` for the working-memory file)."""
    with lock:
        emptied = checkpoint(conn)
        conn.execute("PRAGMA shrink_memory")  # the page cache held the deleted rows
    residue = _residue(path, still_held, wanted.windows)
    if residue:
        with lock:
            with contextlib.suppress(sqlite3.Error):  # else the residue stays, and is reported
                conn.execute("VACUUM")
            emptied = checkpoint(conn)
        residue = _residue(path, still_held, wanted.windows)
    checked = tuple(label + name for name in ("wal checkpoint", *(n for _, n in _FILES)))
    failed: tuple[str, ...] = () if emptied else (label + "wal checkpoint",)
    failed += tuple(sorted(label + name for name in residue))
    return Scrub(checked, failed, wanted.strings, wanted.short)


def merged(first: Scrub, second: Scrub) -> Scrub:
    """Two physical passes (the store's files, then working memory's) as one."""
    return Scrub(first.checked + second.checked, first.failed + second.failed,
                 max(first.scanned, second.scanned), max(first.short, second.short))  # fmt: skip


def _residue(path: str, still_held: Callable[[str], bool], wanted: frozenset[bytes]) -> set[str]:
    """Names of the files holding a window that no surviving record explains."""
    dirty = set()
    for suffix, name in _FILES:
        found = present(path + suffix, wanted, database=path)
        if any(not still_held(w.decode()) for w in found):
            dirty.add(name)
    return dirty
