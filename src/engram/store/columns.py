"""The owner columns of an in-memory partition, and the visibility mask over them.

Vector partitions and lexical partitions both hold one row per record of a
(tenant, user) partition. Which rows a caller may read depends only on the
record's user, scope and agent, which never change after the write, so each
partition keeps them as int32 codes (``vocab``) and ``Visibility.row_mask``
turns a caller into a few vectorised comparisons: the same predicate the SQL
queries apply, evaluated in numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engram.store.predicate import Visibility

__all__ = ["OwnerColumns", "grow"]

Owner = tuple[str, str, str, str]  # record id, user, scope, agent


def grow(arrays: object, names: Sequence[str], size: int, needed: int) -> None:
    """Make the arrays ``names`` of ``arrays`` hold ``needed`` rows, keeping the first
    ``size``: capacity doubles (at least 64), so appends cost amortised O(1). Old
    arrays are replaced, never resized, so a reader holding one stays valid."""
    first = getattr(arrays, names[0])
    if needed <= first.shape[0]:
        return
    capacity = max(needed, 2 * first.shape[0], 64)
    for name in names:
        old = getattr(arrays, name)
        grown = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
        grown[:size] = old[:size]
        setattr(arrays, name, grown)


class OwnerColumns:
    """Record ids and owner codes by row, growing geometrically, with the last
    caller's mask kept until the rows change (a delete replaces the partition)."""

    def __init__(self) -> None:
        self.size = 0
        self.ids: list[str] = []
        self.vocab: dict[str, int] = {}
        self.users = np.zeros(0, dtype=np.int32)
        self.scopes = np.zeros(0, dtype=np.int32)
        self.agents = np.zeros(0, dtype=np.int32)
        self._visible: tuple[Visibility, int, NDArray[np.bool_], NDArray[np.intp]] | None = None

    def _code(self, value: str) -> int:
        return self.vocab.setdefault(value, len(self.vocab))

    def append(self, owners: Sequence[Owner]) -> None:
        """Add rows after the last one."""
        start, needed = self.size, self.size + len(owners)
        grow(self, ("users", "scopes", "agents"), start, needed)
        self.users[start:needed] = [self._code(owner[1]) for owner in owners]
        self.scopes[start:needed] = [self._code(owner[2]) for owner in owners]
        self.agents[start:needed] = [self._code(owner[3]) for owner in owners]
        self.ids.extend(owner[0] for owner in owners)
        self.size = needed

    def visible(
        self, vis: Visibility, size: int | None = None
    ) -> tuple[NDArray[np.bool_], NDArray[np.intp]]:
        """The mask of the first ``size`` rows (default: all) that ``vis`` may read,
        and their row numbers. A caller that also reads other arrays passes the
        size it read once: another thread may append meanwhile."""
        n, kept = self.size if size is None else size, self._visible
        if kept is not None and kept[0] == vis and kept[1] == n:
            return kept[2], kept[3]
        mask = vis.row_mask(self.vocab, self.users[:n], self.scopes[:n], self.agents[:n])
        rows = np.flatnonzero(mask)
        self._visible = (vis, n, mask, rows)
        return mask, rows
