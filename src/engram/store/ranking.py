"""In-memory rankings and the status check that turns them into candidate hits.

The vector and lexical engines rank ids in memory, but status changes (a newer
version supersedes, a fact is retracted), so only the database can say which
ranked ids are still in a status the request accepts. ``alive_top`` reads the
first ``limit`` ranked ids in one statement that checks status and returns what
the caller needs (the records themselves, for recall), which is the whole cost
when every one survives. When some do not, it deepens the ranking fourfold at a
time and checks each deeper ranking in one cheap statement (ids only), then
reads only the survivors it chose: a few statements however many ranked ids
are dead, and no row is read that is not returned.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
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
    limit: int,
    ranking: Ranking,
    read: Callable[[list[str]], Mapping[str, T]],
    check: Callable[[list[str]], Collection[str]] | None = None,
) -> list[tuple[T, float]]:
    """The best ``limit`` ids of ``ranking`` that survive, as ``read`` maps them (the
    id itself, or its record), best first.

    ``read(ids)`` maps the surviving ids among ``ids``; ``check(ids)`` only names
    them, more cheaply (default: ``read``). A deeper ranking may reorder its
    prefix (int8 shortlists), so the answer follows the deepest one consulted. A
    record that dies between its check and its read (a concurrent retraction)
    is replaced by the next survivor, so the answer is short only when fewer
    than ``limit`` ranked ids survive.
    """
    if limit <= 0:
        return []
    first = ranking.top(min(ranking.size, limit))
    answers: dict[str, T | None] = dict.fromkeys((i for i, _ in first), None)
    answers.update(read([i for i, _ in first]))
    if len(first) >= ranking.size or all(answers[i] is not None for i, _ in first):
        return [(kept, score) for i, score in first if (kept := answers[i]) is not None]
    checker = check or read
    survivors: set[str] = set()
    wanted, best, deepen = limit, first, True
    while True:
        if deepen:
            wanted *= 4
            best = ranking.top(min(ranking.size, wanted))
            unseen = [i for i, _ in best if i not in answers and i not in survivors]
            alive = set(checker(unseen)) if unseen else set()
            survivors.update(alive)
            answers.update((i, None) for i in unseen if i not in alive)
        chosen = [(i, s) for i, s in best if i in survivors or answers.get(i) is not None]
        deepen = len(chosen) < limit and len(best) < ranking.size
        if deepen:
            continue  # too few survive
        chosen = chosen[:limit]
        unread = [i for i, _ in chosen if i not in answers]
        found = read(unread) if unread else {}
        for i in unread:
            answers[i] = found.get(i)
            survivors.discard(i)
        if all(i in found for i in unread):
            return [(kept, score) for i, score in chosen if (kept := answers[i]) is not None]
        # a record died between the check and the read: choose again, at this depth
        # first (each pass rules out at least one id, so this ends)
