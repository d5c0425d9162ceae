"""Score retrieval runs on LoCoMo and report them as tables and a chart.

A retrieval system answers each question with dia_ids, best first, and says
whether it abstained. This module turns those outcomes into LoCoMo's
"Recall Accuracy (R@k)" and reports it; it never runs a retriever itself.

Definitions (question-weighted means, as in the official scorer):

* **Turn-level R@k** of a question: the fraction of its gold dia_ids found
  among the first k retrieved ids (a repeated id still takes up a place). When a
  system retrieves memories that stand for several turns (consolidation
  summaries, ``RetrievalOutcome.items``), the first k items count, each with all
  its turns.
* **Session-level R@k** of a question: the fraction of its gold sessions
  (sessions of the gold turns) that hold at least one of the first k
  retrieved *turns*. It asks "would the top k turns have led us to the right
  sessions?", with the same k as the turn level.
* A group's value is the mean over its questions, each category 1-4 apart and
  all of 1-4 together (``"overall"``, weighted by question, not by category).
  Questions whose evidence is empty after normalisation are left out of recall
  (the official code counts them as 1) and counted as ``no_evidence``.
* Category 5 (adversarial) is not scored for recall: its evidence is the turn
  the trick is built from. Its score is the share of questions abstained on.
  The share of categories 1-4 abstained on is reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from engram.errors import InvalidArgument
from engram.eval.locomo import LocomoConversation, LocomoQuestion

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "ADVERSARIAL",
    "ANSWERABLE",
    "CATEGORY_NAMES",
    "GROUPS",
    "OVERALL",
    "GroupCounts",
    "LocomoScores",
    "RecallTable",
    "RetrievalOutcome",
    "cell",
    "check_ks",
    "markdown_table",
    "mean",
    "percent",
    "recall_fraction",
    "render_table",
    "score_locomo",
    "write_chart",
]

CATEGORY_NAMES: Final[Mapping[int, str]] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ANSWERABLE: Final = (1, 2, 3, 4)
ADVERSARIAL: Final = 5
OVERALL: Final = "overall"
GROUPS: Final = ("1", "2", "3", "4", OVERALL)
"""Keys of the recall tables: categories 1-4, then all four together."""


@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    """What a system returned for one question: dia_ids best first, and abstention.

    ``items``, when given, are the retrieved memories best first, each with the
    turns it stands for (an episode: its turn; a consolidation summary: the turns of
    its episodes); R@k then reads the turns of the first k *items*. None: each id
    is one item."""

    ids: tuple[str, ...]
    abstained: bool
    items: tuple[tuple[str, ...], ...] | None = None

    def top(self, k: int) -> tuple[str, ...]:
        """The turns of the first ``k`` retrieved items."""
        if self.items is None:
            return self.ids[:k]
        return tuple(dia for item in self.items[:k] for dia in item)


@dataclass(frozen=True, slots=True)
class GroupCounts:
    """How many questions a group holds and how many entered its metric.

    ``scored`` counts questions in the recall mean (categories 1-4) or in the
    abstention share (category 5); ``no_evidence`` those left out of recall
    because no evidence id survived normalisation.
    """

    questions: int
    scored: int
    no_evidence: int


RecallTable = Mapping[str, Mapping[int, float | None]]
"""Group (``GROUPS``) -> k -> mean recall, ``None`` when the group is empty."""


@dataclass(frozen=True, slots=True)
class LocomoScores:
    """Scores of one system. Recall maps group -> k -> mean, ``None`` if no questions.

    Count keys are ``"1"``-``"5"`` and ``"overall"`` (categories 1-4).
    """

    ks: tuple[int, ...]
    turn_recall: RecallTable
    session_recall: RecallTable
    adversarial_abstention: float | None
    answerable_abstention: float | None
    counts: Mapping[str, GroupCounts]

    def to_dict(self) -> dict[str, object]:
        """Return plain JSON-ready data; recall keys read ``"R@10"``."""
        return {
            "ks": list(self.ks),
            "turn_recall": _recall_dict(self.turn_recall),
            "session_recall": _recall_dict(self.session_recall),
            "adversarial_abstention": self.adversarial_abstention,
            "answerable_abstention": self.answerable_abstention,
            "counts": {group: asdict(c) for group, c in self.counts.items()},
        }


@dataclass(frozen=True, slots=True)
class _QuestionScore:
    """One question's result; recall tuples follow ``ks``, ``None`` if not scored."""

    category: int
    turn: tuple[float, ...] | None
    session: tuple[float, ...] | None
    abstained: bool


def score_locomo(
    conversations: Iterable[LocomoConversation],
    outcomes: Mapping[tuple[str, int], RetrievalOutcome],
    ks: Sequence[int] = (5, 10, 25),
) -> LocomoScores:
    """Score outcomes keyed by ``(conversation_id, question index)``.

    Every question of every conversation needs an outcome; extra keys are
    ignored, so one mapping can be scored on a subset of conversations.
    Raises ``InvalidArgument`` for a missing outcome, a retrieved or gold id
    that is not a turn of its conversation, or ``ks`` that are not distinct
    positive integers.
    """
    checked_ks = check_ks(ks)
    scores = [
        _score_question(conversation, question, outcomes, checked_ks)
        for conversation in conversations
        for question in conversation.questions
    ]
    return LocomoScores(
        ks=checked_ks,
        turn_recall=_recall_table(scores, checked_ks, turn=True),
        session_recall=_recall_table(scores, checked_ks, turn=False),
        adversarial_abstention=_abstention(scores, (ADVERSARIAL,)),
        answerable_abstention=_abstention(scores, ANSWERABLE),
        counts=_counts(scores),
    )


def markdown_table(results: Mapping[str, LocomoScores]) -> str:
    """Compare systems in Markdown: turn recall, session recall, abstention, counts.

    Rows are systems (in mapping order); recall columns are every k of any
    system per group, as percentages, ``n/a`` where a system lacks the value.
    Raises ``InvalidArgument`` when ``results`` is empty.
    """
    if not results:
        raise InvalidArgument("markdown_table needs at least one system")
    ks = sorted({k for scores in results.values() for k in scores.ks})
    sections = [
        _recall_section("Turn-level recall (%)", results, ks, turn=True),
        _recall_section("Session-level recall (%)", results, ks, turn=False),
        _abstention_section(results),
        _counts_section(results),
    ]
    return "\n\n".join(sections) + "\n"


def write_chart(results: Mapping[str, LocomoScores], path: str | Path, *, k: int = 10) -> Path:
    """Write a PNG bar chart of turn-level R@k per category, one bar per system.

    matplotlib is imported here, through its Agg canvas and without pyplot, so
    this module imports without it and no global backend is changed. Raises
    ``InvalidArgument`` when ``results`` is empty or a system lacks ``k``, and
    ``ImportError`` when matplotlib is not installed.
    """
    if not results:
        raise InvalidArgument("write_chart needs at least one system")
    lacking = [name for name, scores in results.items() if k not in scores.ks]
    if lacking:
        raise InvalidArgument(f"no R@{k} for system(s) {lacking!r}")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("write_chart needs matplotlib: pip install matplotlib") from exc
    figure = Figure(figsize=(2 + 1.6 * len(GROUPS), 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    _draw_bars(figure.add_subplot(), results, k)
    target = Path(path)
    figure.savefig(target, format="png", dpi=150)
    return target


def _draw_bars(axes: Axes, results: Mapping[str, LocomoScores], k: int) -> None:
    """Draw one group of bars per category, one bar per system, labelled in %."""
    width = 0.8 / len(results)
    for position, (name, scores) in enumerate(results.items()):
        values = [percent(scores.turn_recall[group].get(k)) for group in GROUPS]
        xs = [group + position * width for group in range(len(GROUPS))]
        heights = [math.nan if v is None else v for v in values]
        bars = axes.bar(xs, heights, width, label=name)
        labels = ["" if v is None else f"{v:.1f}" for v in values]
        axes.bar_label(bars, labels=labels, fontsize=7)
    axes.set_xticks([g + width * (len(results) - 1) / 2 for g in range(len(GROUPS))])
    axes.set_xticklabels([_group_label(group) for group in GROUPS])
    axes.set_ylim(0, 105)
    axes.set_ylabel(f"turn-level R@{k} (%)")
    axes.set_title(f"LoCoMo evidence recall, turn-level R@{k}")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    """Return ``ks`` as a tuple after checking they are distinct positive ints."""
    checked = tuple(ks)
    valid = all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in checked)
    if not checked or not valid or len(set(checked)) != len(checked):
        raise InvalidArgument(f"ks must be distinct positive integers, got {ks!r}")
    return checked


def _score_question(
    conversation: LocomoConversation,
    question: LocomoQuestion,
    outcomes: Mapping[tuple[str, int], RetrievalOutcome],
    ks: tuple[int, ...],
) -> _QuestionScore:
    """Score one question against its outcome."""
    key = (conversation.sample_id, question.index)
    outcome = outcomes.get(key)
    if outcome is None:
        raise InvalidArgument(f"no retrieval outcome for question {key!r}")
    if question.category not in CATEGORY_NAMES:
        raise InvalidArgument(f"question {key!r} has unknown category {question.category}")
    _sessions(conversation, outcome.ids, key)  # every retrieved id is a turn
    gold = _sessions(conversation, question.evidence, key)
    if question.category == ADVERSARIAL or not gold:
        return _QuestionScore(question.category, None, None, outcome.abstained)
    turn = tuple(recall_fraction(question.evidence, outcome.top(k)) for k in ks)
    session = tuple(recall_fraction(gold, _sessions(conversation, outcome.top(k), key))
                    for k in ks)  # fmt: skip
    return _QuestionScore(question.category, turn, session, outcome.abstained)


def _sessions(
    conversation: LocomoConversation, ids: Sequence[str], key: tuple[str, int]
) -> list[int]:
    """Return the session of each id, in order; raise for an unknown id."""
    try:
        return [conversation.session_of(dia_id) for dia_id in ids]
    except LookupError as exc:
        raise InvalidArgument(f"question {key!r}: {exc}") from None


def recall_fraction(gold: Iterable[object], retrieved: Iterable[object]) -> float:
    """Return the fraction of distinct gold items found in ``retrieved``."""
    wanted = set(gold)
    return len(wanted.intersection(retrieved)) / len(wanted)


def _recall_table(
    scores: Sequence[_QuestionScore], ks: tuple[int, ...], *, turn: bool
) -> dict[str, dict[int, float | None]]:
    """Average turn or session recall per group, for every k."""
    table: dict[str, dict[int, float | None]] = {}
    for group in GROUPS:
        categories = ANSWERABLE if group == OVERALL else (int(group),)
        rows = [
            values
            for s in scores
            if s.category in categories and (values := s.turn if turn else s.session) is not None
        ]
        table[group] = {k: mean(row[i] for row in rows) for i, k in enumerate(ks)}
    return table


def _abstention(scores: Sequence[_QuestionScore], categories: tuple[int, ...]) -> float | None:
    """Return the share of questions in ``categories`` that were abstained on."""
    return mean(float(s.abstained) for s in scores if s.category in categories)


def _counts(scores: Sequence[_QuestionScore]) -> dict[str, GroupCounts]:
    """Count questions per category 1-5 and over 1-4 (``"overall"``)."""
    counts: dict[str, GroupCounts] = {}
    for group in (*GROUPS[:-1], str(ADVERSARIAL), OVERALL):
        categories = ANSWERABLE if group == OVERALL else (int(group),)
        members = [s for s in scores if s.category in categories]
        scored = sum(1 for s in members if s.turn is not None or s.category == ADVERSARIAL)
        counts[group] = GroupCounts(len(members), scored, len(members) - scored)
    return counts


def mean(values: Iterable[float]) -> float | None:
    """Return the arithmetic mean, or ``None`` for no values."""
    collected = list(values)
    return math.fsum(collected) / len(collected) if collected else None


def _recall_dict(recall: RecallTable) -> dict[str, dict[str, float | None]]:
    """Return a recall table with ``"R@k"`` string keys."""
    return {group: {f"R@{k}": v for k, v in row.items()} for group, row in recall.items()}


def _recall_section(
    title: str, results: Mapping[str, LocomoScores], ks: Sequence[int], *, turn: bool
) -> str:
    """Return one Markdown recall table: a column per group and k."""
    headers = [f"{_group_label(group)} R@{k}" for group in GROUPS for k in ks]
    rows = []
    for name, scores in results.items():
        recall = scores.turn_recall if turn else scores.session_recall
        cells = [cell(percent(recall[group].get(k))) for group in GROUPS for k in ks]
        rows.append([name, *cells])
    return f"### {title}\n\n" + render_table(["system", *headers], rows)


def _abstention_section(results: Mapping[str, LocomoScores]) -> str:
    """Return the abstention table: adversarial (right) and answerable (wrong)."""
    headers = ["system", "adversarial (5) abstained", "answerable (1-4) abstained"]
    rows = [
        [
            name,
            cell(percent(scores.adversarial_abstention)),
            cell(percent(scores.answerable_abstention)),
        ]
        for name, scores in results.items()
    ]
    return "### Abstention (%)\n\n" + render_table(headers, rows)


def _counts_section(results: Mapping[str, LocomoScores]) -> str:
    """Return the number of questions each system was scored on."""
    groups = (*GROUPS, str(ADVERSARIAL))
    headers = ["system", *(_group_label(group) for group in groups), "no evidence"]
    rows = [
        [
            name,
            *(str(scores.counts[group].scored) for group in groups),
            str(scores.counts[OVERALL].no_evidence),
        ]
        for name, scores in results.items()
    ]
    return "### Questions scored\n\n" + render_table(headers, rows)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Render a Markdown table; the first column left-aligned, the rest right."""
    escaped = [[cell.replace("|", "\\|") for cell in row] for row in [headers, *rows]]
    rule = ["---", *("---:" for _ in headers[1:])]
    lines = [escaped[0], rule, *escaped[1:]]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def _group_label(group: str) -> str:
    """Return a column label such as ``"multi-hop (1)"`` or ``"overall (1-4)"``."""
    if group == OVERALL:
        return "overall (1-4)"
    return f"{CATEGORY_NAMES[int(group)]} ({group})"


def percent(value: float | None) -> float | None:
    """Return a share as a percentage, keeping ``None``."""
    return None if value is None else 100 * value


def cell(value: float | None) -> str:
    """Format a percentage with one decimal, or ``n/a``."""
    return "n/a" if value is None else f"{value:.1f}"
