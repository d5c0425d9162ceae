"""Score retrieval on BEAM: evidence recall@k per question type, and abstention.

Definitions (question-weighted means, as for LoCoMo in ``metrics``):

* **R@k** of a question: the share of its distinct gold message ids found among
  the first k ids a system returned for it. Gold ids that are not messages of
  the chat stay in the denominator: they count as misses.
* A type's value is the mean over its questions with gold ids; ``overall`` is
  the mean over every such question of every type but abstention (weighted by
  question, not by type). Questions without gold ids are left out of recall and
  counted as ``no_gold``.
* **Abstention** questions have no gold ids (nothing in the chat supports an
  answer). Their score is the share a system answered with nothing (it
  abstained, as Engram does when no candidate clears its relevance floor); the
  share of questions with gold ids answered with nothing is reported beside it.

A system answers each question once per k (Engram is asked with a budget of k
items each time), so outcomes are keyed by question and then by k; a system
whose ranking does not depend on k answers with the prefixes of one list
(``prefixes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Final

from engram.errors import InvalidArgument
from engram.eval.beam import ABSTENTION, BeamChat, BeamQuestion
from engram.eval.metrics import (
    RetrievalOutcome,
    cell,
    check_ks,
    mean,
    percent,
    recall_fraction,
    render_table,
)

__all__ = [
    "OVERALL",
    "TYPES",
    "BeamOutcomes",
    "BeamScores",
    "TypeCounts",
    "beam_markdown",
    "prefixes",
    "score_beam",
]

TYPES: Final = (
    "abstention", "contradiction_resolution", "event_ordering", "information_extraction",
    "instruction_following", "knowledge_update", "multi_session_reasoning",
    "preference_following", "summarization", "temporal_reasoning",
)  # fmt: skip
"""BEAM's ten question types, in the order of its files."""
OVERALL: Final = "overall"

BeamOutcomes = Mapping[tuple[str, str, int], Mapping[int, RetrievalOutcome]]
"""Question key (chat, type, index) -> k -> what the system returned when asked for k."""


@dataclass(frozen=True, slots=True)
class TypeCounts:
    """How many questions a type holds, how many entered recall, and its gold ids.

    ``unknown_gold`` counts gold ids that are not messages of their chat.
    """

    questions: int
    scored: int
    no_gold: int
    gold_ids: int
    unknown_gold: int


@dataclass(frozen=True, slots=True)
class BeamScores:
    """One system's scores: recall maps type or ``overall`` -> k -> mean or ``None``."""

    ks: tuple[int, ...]
    recall: Mapping[str, Mapping[int, float | None]]
    abstention: Mapping[int, float | None]
    answerable_abstention: Mapping[int, float | None]
    counts: Mapping[str, TypeCounts]

    def to_dict(self) -> dict[str, object]:
        """Return plain JSON-ready data; recall keys read ``"R@10"``."""

        def by_k(row: Mapping[int, float | None]) -> dict[str, float | None]:
            return {f"R@{k}": value for k, value in row.items()}

        return {
            "ks": list(self.ks),
            "recall": {group: by_k(row) for group, row in self.recall.items()},
            "abstention": by_k(self.abstention),
            "answerable_abstention": by_k(self.answerable_abstention),
            "counts": {group: asdict(c) for group, c in self.counts.items()},
        }


@dataclass(frozen=True, slots=True)
class _Scored:
    """One question's result; ``recall`` follows ``ks``, ``None`` when not scored."""

    type: str
    recall: tuple[float, ...] | None
    empty: tuple[bool, ...]
    gold: int
    unknown: int


def prefixes(ids: Sequence[str], ks: Iterable[int]) -> dict[int, RetrievalOutcome]:
    """Answer every k with the first k of one ranked list, never abstaining."""
    return {k: RetrievalOutcome(tuple(ids[:k]), abstained=False) for k in ks}


def score_beam(
    chats: Iterable[BeamChat], outcomes: BeamOutcomes, ks: Sequence[int] = (5, 10, 25)
) -> BeamScores:
    """Score outcomes for every question of ``chats``; extra keys are ignored.

    Raises ``InvalidArgument`` for a missing question or k, a returned id that
    is not a message of its chat, or ``ks`` that are not distinct positive ints.
    """
    checked = check_ks(ks)
    scored = [
        _score(question, chat.message_ids(), outcomes, checked)
        for chat in chats
        for question in chat.questions
    ]
    types = [*TYPES, *sorted({s.type for s in scored} - set(TYPES))]
    width = len(checked)
    recall = {t: _recall_row((s for s in scored if s.type == t), width) for t in types}
    recall[OVERALL] = _recall_row((s for s in scored if s.type != ABSTENTION), width)
    return BeamScores(
        ks=checked,
        recall={group: dict(zip(checked, row, strict=True)) for group, row in recall.items()},
        abstention=_empty_share(scored, checked, abstention=True),
        answerable_abstention=_empty_share(scored, checked, abstention=False),
        counts=_counts(scored, types),
    )


def _score(
    question: BeamQuestion, known: frozenset[int], outcomes: BeamOutcomes, ks: tuple[int, ...]
) -> _Scored:
    """Score one question at every k."""
    answers = outcomes.get(question.key)
    missing = [k for k in ks if answers is None or k not in answers]
    if answers is None or missing:
        raise InvalidArgument(f"no retrieval outcome for question {question.key!r} at k={missing}")
    names = {str(i) for i in known}
    for k in ks:
        stray = [i for i in answers[k].ids if i not in names]
        if stray:
            raise InvalidArgument(f"question {question.key!r}: {stray[0]!r} is not a message")
    empty = tuple(answers[k].abstained or not answers[k].ids for k in ks)
    unknown = sum(1 for i in question.gold if i not in known)
    if question.type == ABSTENTION or not question.gold:
        return _Scored(question.type, None, empty, len(question.gold), unknown)
    gold = [str(i) for i in question.gold]
    recall = tuple(recall_fraction(gold, answers[k].ids[:k]) for k in ks)
    return _Scored(question.type, recall, empty, len(question.gold), unknown)


def _recall_row(scored: Iterable[_Scored], width: int) -> list[float | None]:
    """Mean recall at each of ``width`` ks over the scored questions given."""
    rows = [s.recall for s in scored if s.recall is not None]
    return [mean(row[i] for row in rows) for i in range(width)]


def _empty_share(
    scored: Sequence[_Scored], ks: tuple[int, ...], *, abstention: bool
) -> dict[int, float | None]:
    """Share answered with nothing, per k: abstention questions, or those with gold."""
    if abstention:
        members = [s for s in scored if s.type == ABSTENTION]
    else:
        members = [s for s in scored if s.recall is not None]
    return {k: mean(float(s.empty[i]) for s in members) for i, k in enumerate(ks)}


def _counts(scored: Sequence[_Scored], types: Sequence[str]) -> dict[str, TypeCounts]:
    """Count questions, scored questions and gold ids per type and overall."""
    groups = {t: [s for s in scored if s.type == t] for t in types}
    groups[OVERALL] = [s for s in scored if s.type != ABSTENTION]
    return {
        group: TypeCounts(
            questions=len(members),
            scored=sum(1 for s in members if s.recall is not None),
            no_gold=sum(1 for s in members if s.recall is None),
            gold_ids=sum(s.gold for s in members),
            unknown_gold=sum(s.unknown for s in members),
        )
        for group, members in groups.items()
    }


def beam_markdown(results: Mapping[str, BeamScores]) -> str:
    """Compare systems in Markdown: recall per type and k, abstention, counts.

    Recall rows are question types (then ``overall``), columns each system at
    each k, as percentages, ``n/a`` where a type has no scored question.
    Raises ``InvalidArgument`` when ``results`` is empty.
    """
    if not results:
        raise InvalidArgument("beam_markdown needs at least one system")
    first = next(iter(results.values()))
    sections = [
        _recall_section(results, first),
        _abstention_section(results),
        _counts_section(first),
    ]
    return "\n\n".join(sections) + "\n"


def _recall_section(results: Mapping[str, BeamScores], first: BeamScores) -> str:
    """One row per type and overall; a column per system and k."""
    ks = sorted({k for scores in results.values() for k in scores.ks})
    headers = ["type", *(f"{name} R@{k}" for name in results for k in ks)]
    rows = [
        [group, *(cell(percent(s.recall.get(group, {}).get(k))) for s in results.values()
                  for k in ks)]
        for group in first.recall
        if group != ABSTENTION
    ]  # fmt: skip
    return "### Evidence recall (%)\n\n" + render_table(headers, rows)


def _abstention_section(results: Mapping[str, BeamScores]) -> str:
    """Answered with nothing (%): abstention questions (right) and the rest (wrong)."""
    ks = sorted({k for scores in results.values() for k in scores.ks})
    headers = ["system", *(f"abstention, empty @{k}" for k in ks),
               *(f"with gold ids, empty @{k}" for k in ks)]  # fmt: skip
    rows = [
        [name, *(cell(percent(s.abstention.get(k))) for k in ks),
         *(cell(percent(s.answerable_abstention.get(k))) for k in ks)]
        for name, s in results.items()
    ]  # fmt: skip
    return "### Answered with nothing (%)\n\n" + render_table(headers, rows)


def _counts_section(scores: BeamScores) -> str:
    """Questions and gold ids per type (the same for every system)."""
    headers = ["type", "questions", "scored", "no gold ids", "gold ids", "gold ids not in chat"]
    rows = [
        [group, str(c.questions), str(c.scored), str(c.no_gold), str(c.gold_ids),
         str(c.unknown_gold)]
        for group, c in scores.counts.items()
    ]  # fmt: skip
    return "### Questions scored\n\n" + render_table(headers, rows)
