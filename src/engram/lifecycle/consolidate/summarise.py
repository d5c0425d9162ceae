"""Summarisers: a group of episodes in, the text of one summary out.

``ExtractiveSummariser`` (the default) is deterministic and offline: it keeps
sentences of the episodes themselves, never words of its own beyond a dated
header. Sentences that state a decision, an outcome, an error, a date or a
stated preference come first (in that order of need when the summary is full);
the room left goes to the sentences most typical of the group (their words
recur in its other episodes). Kept sentences appear in their original order
under their speaker's label ("Melanie: ..."). An LLM summariser
(``engram.lifecycle.consolidate.llm``) can replace it; either one's text is a
proposal that meets the write policy like any other.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from engram.store.lexicon import stem_set
from engram.types import Record
from engram.write.propose import split_sentences

__all__ = ["CATEGORIES", "ExtractiveSummariser", "Summariser", "categories", "date_phrase"]

_I = re.IGNORECASE
# What a summary must keep, most needed first (the order trimming respects).
CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "error",
        re.compile(
            r"\b(?:errors?|exceptions?|fail(?:s|ed|ing|ure|ures)?|bugs?|crash(?:ed|es|ing)?"
            r"|broke|broken|time[ds]? ?out|traceback|regression|outage|incident)\b",
            _I,
        ),
    ),
    (
        "decision",
        re.compile(
            r"\b(?:decid(?:e|ed|es|ing)|decision|agreed|chose|chosen|settled on|going with"
            r"|we(?:'ll| will| are going to)|let's|switch(?:ed)? to|opted|plan(?:ned|ning)? to)\b",
            _I,
        ),
    ),
    (
        "outcome",
        re.compile(
            r"\b(?:succe(?:ss|ssful|ssfully|eded|eds)|worked|works now|passed|fixed|resolved"
            r"|solved|completed|finished|shipped|deployed|released|merged|won|got (?:a|an|the|my)"
            r"|result(?:s|ed)?|turned out)\b",
            _I,
        ),
    ),
    (
        "preference",
        re.compile(
            r"\b(?:I|we) (?:really |also |still )?(?:prefer|like|love|enjoy|hate|dislike|adore)\b"
            r"|\bmy (?:favou?rite|preference)\b|\b(?:always|never)\b"
            r"|\bI'?m (?:a (?:big )?fan|into)\b",
            _I,
        ),
    ),
    (
        "date",
        re.compile(
            r"\b(?:january|february|march|april|june|july|august|september|october|november"
            r"|december|(?:\d{1,2} may|may \d{1,2})|monday|tuesday"
            r"|wednesday|thursday|friday|saturday|sunday|yesterday|today|tomorrow|tonight"
            r"|(?:last|next|this) (?:week|weekend|month|year|summer|winter|spring|fall|autumn)"
            r"|\d+ (?:days?|weeks?|months?|years?) ago)\b|\b\d{4}-\d{2}-\d{2}\b|\b(?:19|20)\d{2}\b"
            r"|\b\d{1,2}(?::\d{2})? ?[ap]\.?m\b",
            _I,
        ),
    ),
)
_PRIORITY = {name: len(CATEGORIES) - rank for rank, (name, _) in enumerate(CATEGORIES)}
_SPEAKER = re.compile(r"([^\W\d_][\w.' -]{0,39}?): ")


@runtime_checkable
class Summariser(Protocol):
    """Writes the text of one summary from a group of episodes (oldest first)."""

    confidence: float  # how far its text can be trusted, times the episodes' own

    def summarise(self, episodes: Sequence[Record], limit: int) -> str:
        """The summary text, at most ``limit`` characters; raises ``EngramError``
        when it cannot make one (the group is then left for the next run)."""
        ...


def categories(sentence: str) -> frozenset[str]:
    """Which of ``CATEGORIES`` a sentence states."""
    return frozenset(name for name, pattern in CATEGORIES if pattern.search(sentence))


def _day(moment: datetime) -> str:
    return f"{moment.day} {moment:%B} {moment.year}"


def _time(moment: datetime) -> str:
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment:%M} {'am' if moment.hour < 12 else 'pm'}"


def date_phrase(start: datetime, end: datetime) -> str:
    """When a group happened (UTC): "8 May 2023, 1:56 pm to 2:30 pm", or with both
    dates when it spans days. The times also keep two groups of the same text on one
    day apart (the write path would confirm the first instead of adding the second)."""
    first, last = _day(start), _day(end)
    if first == last:
        span = _time(start) if _time(start) == _time(end) else f"{_time(start)} to {_time(end)}"
        return f"{first}, {span}"
    return f"{first}, {_time(start)} to {last}, {_time(end)}"


@dataclass(frozen=True, slots=True)
class _Sentence:
    position: int
    episode: int
    speaker: str
    text: str
    priority: int
    typical: float


def _sentences(episodes: Sequence[Record]) -> list[_Sentence]:
    """Every sentence of the group with its label, priority and typicality."""
    parsed: list[tuple[int, str, str]] = []
    for index, record in enumerate(episodes):
        label = _SPEAKER.match(record.content)
        body = record.content[label.end() :] if label else record.content
        speaker = label.group(1) if label else ""
        parsed += [(index, speaker, s) for s in split_sentences(body)]
    spread = Counter(stem for index in range(len(episodes))
                     for stem in stem_set(episodes[index].content))  # fmt: skip
    out = []
    for position, (index, speaker, text) in enumerate(parsed):
        stems = stem_set(text)
        typical = sum(spread[s] for s in stems) / (len(stems) or 1)
        priority = max((_PRIORITY[name] for name in categories(text)), default=0)
        out.append(_Sentence(position, index, speaker, text, priority, typical))
    return out


def _cut(text: str, room: int) -> str:
    """``text`` within ``room`` characters, cut at a word with an ellipsis."""
    if len(text) <= room:
        return text
    cut = text[: max(room - 1, 0)]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip() + "…"


def _render(header: str, chosen: Sequence[_Sentence]) -> str:
    """The header, then one line per run of sentences from the same episode."""
    lines: list[str] = [header]
    last = -1
    for sentence in sorted(chosen, key=lambda s: s.position):
        if sentence.episode == last:
            lines[-1] += " " + sentence.text
            continue
        lines.append(f"{sentence.speaker}: {sentence.text}" if sentence.speaker
                     else sentence.text)  # fmt: skip
        last = sentence.episode
    return "\n".join(lines)


class ExtractiveSummariser:
    """The deterministic default: the group's own sentences, the necessary ones first."""

    confidence = 1.0  # every kept sentence is the episodes' own text

    def summarise(self, episodes: Sequence[Record], limit: int) -> str:
        """The summary text, at most ``limit`` characters (module docstring)."""
        if not episodes:
            return ""
        count = len(episodes)
        header = (f"{date_phrase(episodes[0].observed_at, episodes[-1].observed_at)}"
                  f" ({count} episode{'s' if count > 1 else ''}):")  # fmt: skip
        ranked = sorted(_sentences(episodes), key=lambda s: (-s.priority, -s.typical, s.position))
        chosen: list[_Sentence] = []
        for sentence in ranked:
            trial = _render(header, [*chosen, sentence])
            if len(trial) <= limit:
                chosen.append(sentence)
        if not chosen and ranked:  # the best sentence alone is too long: cut it
            first = ranked[0]
            room = limit - len(_render(header, [dataclasses.replace(first, text="")]))
            chosen = [dataclasses.replace(first, text=_cut(first.text, room))]
        return _render(header, chosen)
