"""Coverage: a summary and the episodes it came from are never counted twice.

A consolidation summary (``source.kind`` consolidation) names its episodes in
``source.derived_from``. When the budget stage selects one of a linked pair
(a summary and one of its episodes), the other is left out of the block, so
one recall does not spend two items and their tokens on the same events: the
budget picks the better first (by its marginal relevance), and the trace lists
the other under ``rejections["covered_by"]`` with a merge entry naming the item
kept (``by: derived_from``).
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.recall.model import Candidate
from engram.types import SourceKind

__all__ = ["Coverage"]


class Coverage:
    """The summary-episode links within one pool of candidates (by position)."""

    def __init__(self, pool: Sequence[Candidate]) -> None:
        where = {cand.id: i for i, cand in enumerate(pool)}
        self._links: dict[int, set[int]] = {}
        for i, cand in enumerate(pool):
            if cand.record.source.kind != SourceKind.CONSOLIDATION:
                continue
            for source in cand.record.source.derived_from:
                j = where.get(source)
                if j is not None and j != i:
                    self._links.setdefault(i, set()).add(j)
                    self._links.setdefault(j, set()).add(i)
        self.left_out: dict[int, int] = {}  # position left out -> position selected

    def chose(self, index: int) -> list[int]:
        """Record a selection; the positions it covers (or that cover it), now left out."""
        gone = [j for j in sorted(self._links.get(index, ())) if j not in self.left_out]
        for j in gone:
            self.left_out[j] = index
        return gone
