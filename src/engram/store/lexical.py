"""Content words of a text: the stopword list and query terms.

Stopwords are dropped because they score the least; ``lexicon`` tokenises with
the same list, and the rerank's speaker matching uses ``terms``.
"""

from __future__ import annotations

from engram.scripts import WORD

__all__ = ["STOPWORDS", "terms"]

_MAX_TERMS = 24

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
    """Lowercased content words of ``text`` (with their combining marks: a Hindi
    name is one word, not its fragments), deduplicated, in order, capped."""
    seen: dict[str, None] = {}
    for word in WORD.findall(text.lower()):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)[:_MAX_TERMS]
