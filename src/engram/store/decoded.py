"""Records decoded from ``records`` rows, kept by the whole row.

A recall reads about 170 rows (key, lexical, vector and context channels), many
of them the same from one recall to the next (the keyed records of the key
channel come back for every request), and decoding one costs more than reading
it. ``DecodedRows`` keeps the record decoded from each row it saw, looked up by
the row itself: every column value, so a record that changed in any way (an
access count, a status, a new version) is a different row and is decoded
afresh, and a cached record is exactly what ``record_from_values`` would build
from the row just read. Records are immutable; one whose ``value`` is a JSON
object or array (mutable) is never shared, each read decodes its own.

The cache holds at most two generations of ``per_generation`` rows (an entry of
the current generation stays; one found in the previous moves to the current;
when the current is full it becomes the previous). A forget or an erasure drops
it whole (``clear``), like the in-memory partitions, so no copy of an erased
text outlives the deletion in this process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engram.store.rows import record_from_values
from engram.types import Record

__all__ = ["DecodedRows"]

Row = tuple[Any, ...]


class DecodedRows:
    """Decoded records by row, in two bounded generations (see the module notes)."""

    def __init__(self, per_generation: int = 4096) -> None:
        self._size = per_generation
        self._current: dict[Row, Record] = {}
        self._previous: dict[Row, Record] = {}

    def records(self, rows: Iterable[Row]) -> list[Record]:
        """The record of each row, in order (cached or decoded now)."""
        current = self._current
        return [current.get(row) or self._decode(row) for row in rows]

    def _decode(self, row: Row) -> Record:
        record = self._previous.get(row)
        if record is None:
            record = record_from_values(row)
            if isinstance(record.value, (dict, list)):
                return record  # mutable: never shared between readers
        if len(self._current) >= self._size:
            self._previous, self._current = self._current, {}
        self._current[row] = record
        return record

    def holds(self, tenant_id: str) -> bool:
        """Whether a record of the tenant is kept."""
        return any(row[1] == tenant_id for gen in (self._current, self._previous)
                   for row in list(gen))  # fmt: skip

    def clear(self) -> None:
        """Drop every kept record."""
        self._current, self._previous = {}, {}

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)
