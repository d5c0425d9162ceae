"""In-memory rankings and the status check that turns them into candidate hits.

The vector and lexical engines rank ids in memory, but status changes (a newer
version supersedes, a fact expires), so only the database can say which ranked
ids are still in a status the request accepts. ``alive_top`` asks it about as
few ids as it can: the first ``limit`` in rank order, then only as many more as
failed, deepening the ranking when it runs out. Asked for records rather than
ids, that one query both checks status and reads the rows: the read path needs
the records anyway, so the usual case costs one statement per channel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Ranking", "alive_top"]

T = TypeVar("T")
Hit = tuple[str, float]


@dataclass(frozen=True, slots=True)
class Ranking:
    """Ids best first, status unchecked: ``top(k)`` gives the best ``k`` of ``size``."""

    top: Callable[[int], list[Hit]]
    size: int

    @classmethod
    def of(cls, hits: Sequence[Hit]) -> Ranking:
        """A ranking that is already a list (an engine that ranks in SQL)."""
        listed = list(hits)
        return cls(lambda k: listed[:k], len(listed))


def alive_top(
    limit: int, ranking: Ranking, alive: Callable[[list[str]], Mapping[str, T]]
) -> list[tuple[T, float]]:
    """The best ``limit`` ids of ``ranking`` that ``alive`` keeps, as what it maps
    them to (the id itself, or its record), best first.

    ``alive`` is asked only about ids it has not seen, and only as many as are
    still missing, so when every ranked id survives it runs once on exactly
    ``limit`` ids. When the ranking runs short it is deepened fourfold; a deeper
    ranking may reorder its prefix (int8 shortlists), so each pass walks it
    from the start, reusing earlier answers.
    """
    answers: dict[str, T | None] = {}
    wanted = limit
    while True:
        best = ranking.top(min(ranking.size, wanted))
        hits: list[tuple[T, float]] = []
        walked = 0
        while len(hits) < limit and walked < len(best):
            batch = best[walked : walked + limit - len(hits)]
            walked += len(batch)
            unseen = [i for i, _ in batch if i not in answers]
            if unseen:
                found = alive(unseen)
                answers.update((i, found.get(i)) for i in unseen)
            hits.extend((kept, score) for i, score in batch if (kept := answers[i]) is not None)
        if len(hits) >= limit or len(best) >= ranking.size:
            return hits
        wanted *= 4
