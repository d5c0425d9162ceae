"""Keyword guards: literal words every match of a pattern contains, to skip a futile search.

Python's ``re`` tries every alternative of a pattern at every position of the text, so
a detector's many patterns cost time on every memory although almost none can match.
``needed`` reads a pattern's parse tree and returns words of which every possible
match contains at least one (``ignore`` or ``disregard`` or ... for ``\\b(?:ignore
|disregard...)\\b``), or None when no such word is certain. A ``Vocabulary``
finds all the words of a detector's patterns in one pass over ``casekey(text)``; a
pattern none of whose words is present cannot match, so skipping it changes no answer
and no finding, only the time taken.

Soundness rests on two facts, both checked by ``tests/write/test_detector_keywords.py``:
a word is only built from ASCII literals that must appear consecutively in the match,
and ``casekey`` maps every character ``re.IGNORECASE`` equates with an ASCII letter
(``K``, ``ſ``, ``ı``, ``İ`` ...) to that letter in lower case, one character for one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from re import _parser  # type: ignore[attr-defined]
from typing import Any

__all__ = ["Vocabulary", "Words", "casekey", "could_match", "needed"]

# Words one of which every match of a pattern holds; None: not known (always searched).
Words = frozenset[str] | None

# Characters ``re.IGNORECASE`` equates with an ASCII letter but ``str.lower`` does not
# lower to it (dotted and dotless i, long s); every other one lowers to the letter.
_CASE_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})


def casekey(text: str) -> str:
    """The text lowered as ``re.IGNORECASE`` compares letters, one character for one."""
    return text.translate(_CASE_FOLD).lower()


def _trie(words: Iterable[str]) -> str:
    """A regex matching, at a position, the longest of ``words`` that starts there."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def render(node: dict[str, Any]) -> str:
        longer = [re.escape(char) + render(child) for char, child in sorted(node.items()) if char]
        if not longer:
            return ""
        body = "|".join(longer)
        return f"(?:{body}|)" if "" in node else (body if len(longer) == 1 else f"(?:{body})")

    return render(root)


class Vocabulary:
    """The guard words of many patterns, found in a text by one pass over its ``casekey``.

    The pass finds, at every position, the longest word starting there; every shorter
    word starting there is a prefix of it, so adding the word's vocabulary prefixes
    gives exactly the set of words the text holds.
    """

    def __init__(self, guards: Iterable[Words]) -> None:
        words = sorted(set().union(*(g for g in guards if g is not None)))
        self._finder = re.compile(f"(?=({_trie(words)}))") if words else None
        self._prefixes = {w: frozenset(p for p in words if w.startswith(p)) for w in words}

    def present(self, key: str) -> frozenset[str]:
        """The words of the vocabulary that occur in the text whose ``casekey`` is ``key``."""
        if self._finder is None:
            return frozenset()
        found = set(self._finder.findall(key))
        found.discard("")
        return frozenset().union(*(self._prefixes[word] for word in found))


def could_match(words: Words, present: frozenset[str]) -> bool:
    """Whether a pattern guarded by ``words`` can match a text holding ``present``."""
    return words is None or not words.isdisjoint(present)


def _best(candidates: list[frozenset[str]]) -> Words:
    """The most selective word set: the longest shortest word, then the fewest words."""
    if not candidates:
        return None
    return max(candidates, key=lambda words: (min(map(len, words)), -len(words)))


def _node(op: str, arg: Any) -> Words:
    """The words one of which every match of one parse-tree node holds, if known."""
    if op == "SUBPATTERN":
        return _sequence(arg[3])
    if op == "ATOMIC_GROUP":
        return _sequence(arg)
    if op == "BRANCH":
        words: set[str] = set()
        for alternative in arg[1]:
            found = _sequence(alternative)
            if found is None:
                return None
            words |= found
        return frozenset(words)
    if op in _REPEATS and arg[0] >= 1:
        return _sequence(arg[2])
    return None  # classes, anchors, lookarounds, optional parts, references: no word


def _sequence(items: Iterable[tuple[Any, Any]]) -> Words:
    """Words for a sequence: a run of ASCII literals, or the best guard of one element."""
    candidates: list[frozenset[str]] = []
    run: list[str] = []
    for op, arg in items:
        if str(op) == "LITERAL" and arg < 128:
            run.append(chr(arg).lower())
            continue
        if run:
            candidates.append(frozenset({"".join(run)}))
            run = []
        found = _node(str(op), arg)
        if found:
            candidates.append(found)
    if run:
        candidates.append(frozenset({"".join(run)}))
    return _best(candidates)


def needed(pattern: re.Pattern[str]) -> Words:
    """Words (``casekey`` form) one of which every match of ``pattern`` contains, or None."""
    return _sequence(_parser.parse(pattern.pattern, pattern.flags))
