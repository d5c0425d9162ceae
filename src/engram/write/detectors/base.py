"""The machinery every detector shares: findings, rules, the scan, and redaction.

A rule is a kind, a compiled pattern and a locator that turns a match into a span or
rejects it (a value test, a checksum). Detectors are tuples of rules run in priority
order; a later rule never reports a span that overlaps an earlier finding.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from engram.write.detectors.keywords import Vocabulary, Words, casekey, could_match, needed

__all__ = [
    "Category",
    "Finding",
    "Locate",
    "Rule",
    "Span",
    "group",
    "longest_valid_prefix",
    "redact",
    "rule",
    "scan",
]

Category = Literal["secret", "personal"]
Span = tuple[int, int]
Locate = Callable[[re.Match[str]], Span | None]


@dataclass(frozen=True, slots=True)
class Finding:
    """One detected span: ``text[start:end]`` is a ``kind`` of secret or personal data."""

    category: Category
    kind: str
    start: int
    end: int


# A rule: the finding's kind, its pattern, and how a match becomes a span (or is rejected).
Rule = tuple[str, re.Pattern[str], Locate]


def group(*names: int | str, valid: Callable[[str], bool] | None = None) -> Locate:
    """Locate the first of ``names`` (default: the whole match) that took part, if valid."""

    def locate(match: re.Match[str]) -> Span | None:
        name = next((n for n in names or (0,) if match.group(n) is not None), None)
        if name is None or not match.group(name) or (valid and not valid(match.group(name))):
            return None
        return match.span(name)

    return locate


def rule(kind: str, pattern: str, locate: Locate | None = None, flags: int = 0) -> Rule:
    """A rule from pattern text; by default the whole match is the finding."""
    return kind, re.compile(pattern, flags), locate or group()


def longest_valid_prefix(check: Callable[[str], bool], min_chars: int) -> Locate:
    """Locate the longest prefix of separated chunks whose compact form passes ``check``.

    A greedy pattern overruns a card number followed by an expiry date; trimming recovers it.
    """

    def locate(match: re.Match[str]) -> Span | None:
        chunks = list(re.finditer(r"[^ -]+", match.group(0)))
        for count in range(len(chunks), 0, -1):
            end = chunks[count - 1].end()
            compact = re.sub(r"[ -]", "", match.group(0)[:end])
            if len(compact) >= min_chars and check(compact):
                return match.start(), match.start() + end
        return None

    return locate


# Per rule tuple (kept alive here, so its id is not reused): each pattern's guard words
# and the vocabulary that finds them all in one pass (``keywords``). Only tuples are
# remembered: a list may change after its first scan, so its guards are read anew.
_GUARDS: dict[int, tuple[Sequence[Rule], tuple[Words, ...], Vocabulary]] = {}


def _guards(rules: Sequence[Rule]) -> tuple[tuple[Words, ...], Vocabulary]:
    """The guard words of each rule's pattern and their vocabulary, read once per tuple
    (every call for another sequence, which may have changed since)."""
    entry = _GUARDS.get(id(rules)) if isinstance(rules, tuple) else None
    if entry is None or entry[0] is not rules:
        words = tuple(needed(pattern) for _, pattern, _ in rules)
        entry = (rules, words, Vocabulary(words))
        if isinstance(rules, tuple):
            _GUARDS[id(rules)] = entry
    return entry[1], entry[2]


def scan(rules: Sequence[Rule], category: Category, text: str) -> list[Finding]:
    """Run rules in priority order; a span overlapping an earlier finding is dropped.

    A rule none of whose keyword guard words the text holds cannot match and is skipped
    without a search (``keywords``): the findings are the same, sooner.
    """
    kept: list[Finding] = []
    guards, vocabulary = _guards(rules)
    present = vocabulary.present(casekey(text))
    for (kind, pattern, locate), words in zip(rules, guards, strict=True):
        if not could_match(words, present):
            continue
        for match in pattern.finditer(text):
            span = locate(match)
            if span is None or any(span[0] < k.end and k.start < span[1] for k in kept):
                continue
            kept.append(Finding(category, kind, span[0], span[1]))
    return sorted(kept, key=lambda f: (f.start, f.end))


def redact(text: str, findings: Sequence[Finding]) -> str:
    """Replace each finding's span with ``[REDACTED:<kind>]``.

    Why: sharing and logging need the memory without the sensitive part. Overlapping
    spans merge under the kind of the one that starts first, so no part of any finding
    survives; spans are clipped to the text.
    """
    pieces: list[str] = []
    cursor = 0
    for finding in sorted(findings, key=lambda f: (f.start, -f.end)):
        start, end = max(finding.start, 0), min(finding.end, len(text))
        if end <= max(start, cursor):
            continue  # empty, outside the text, or inside the previous span
        if start >= cursor:
            pieces += [text[cursor:start], f"[REDACTED:{finding.kind}]"]
        cursor = end
    return "".join(pieces) + text[cursor:]
