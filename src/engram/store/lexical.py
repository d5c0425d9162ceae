"""Query text -> a safe FTS5 MATCH expression.

Each term is quoted, so user text can never inject FTS5 syntax; stopwords are
dropped because they cost the most (longest doclists) and score the least.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "STOPWORDS", "match_all", "match_expression", "prune_common", "quote", "rank_window", "stem",
    "terms",
]  # fmt: skip

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_TERMS = 24
_SUFFIX = re.compile(r"(ing|edly|ed|ies|es|s|ly)$")
KEEP_TERMS = 2  # pruning never leaves fewer terms than this

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could did didn do does doesn doing
    don down during each few for from further had has have having he her here hers herself
    him himself his how i if in into is isn it its itself just let me more most my myself
    no nor not now of off on once only or other ought our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t d ll m re ve
    also get got really like okay ok yeah yes hey hi oh well much many still even ever
    """.split()
)


def terms(text: str) -> list[str]:
    """Lowercased content words of ``text``, deduplicated, in order, capped."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)[:_MAX_TERMS]


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A deliberately light stemmer (cached per word: a vocabulary is far smaller
    than the texts built from it)."""
    if len(word) <= 4:
        return word
    return _SUFFIX.sub("", word) or word


def quote(word: str) -> str:
    """One FTS5 string token, quoted so it is never read as syntax."""
    return '"' + word.replace('"', '""') + '"'


def match_expression(words: list[str]) -> str | None:
    """An OR of quoted terms over the ``content`` column, or None if there are none."""
    if not words:
        return None
    return "content : (" + " OR ".join(quote(word) for word in words) + ")"


def prune_common(counts: dict[str, int], cap: int, keep: int = KEEP_TERMS) -> list[str]:
    """Drop terms matching more than ``cap`` documents (low IDF, long doclists),
    keeping at least the ``keep`` rarest so a query of common words still matches."""
    present = {word: count for word, count in counts.items() if count > 0}
    rare = [word for word, count in present.items() if count <= cap]
    if len(rare) >= min(keep, len(present)):
        return rare
    return sorted(present, key=lambda word: present[word])[:keep]


def rank_window(counts: dict[str, int], kept: list[str], cap: int, window: int) -> int | None:
    """How many matches of an OR over ``kept`` BM25 ranks, newest first.

    None (every match) when all kept terms are rare: their doclists bound the cost.
    When pruning had to keep a common term (fewer than ``KEEP_TERMS`` rare ones),
    the query is unselective: it ranks the rare terms' matches plus ``window``.
    """
    if all(counts.get(word, cap + 1) <= cap for word in kept):
        return None
    return window + sum(count for word in kept if (count := counts.get(word, 0)) <= cap)


def match_all(words: list[str]) -> str | None:
    """An AND of quoted terms over the ``content`` column, or None if there are none."""
    if not words:
        return None
    return "content : (" + " AND ".join(quote(word) for word in words) + ")"
