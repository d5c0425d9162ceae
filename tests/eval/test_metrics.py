"""LoCoMo scoring: hand-computed recall, abstention, counts, and the reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.errors import InvalidArgument
from engram.eval.locomo import (
    LocomoConversation,
    LocomoQuestion,
    LocomoTurn,
    load_locomo,
)
from engram.eval.metrics import (
    GroupCounts,
    LocomoScores,
    RetrievalOutcome,
    markdown_table,
    score_locomo,
    write_chart,
)

REPO = Path(__file__).resolve().parents[2]
DEV_FILE = Path(os.environ.get("ENGRAM_LOCOMO", REPO / "../shared/data/locomo/locomo10_dev.json"))
KS = (1, 2, 4)
WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _conversation(
    sample_id: str, sessions: list[int], questions: list[tuple[int, tuple[str, ...]]]
) -> LocomoConversation:
    """Build a conversation: ``sessions[i]`` turns in session i+1; (category, evidence)."""
    turns = tuple(
        LocomoTurn(sample_id, f"D{s}:{t}", s, t, "Ann", f"s{s}t{t}", None, WHEN)
        for s, count in enumerate(sessions, start=1)
        for t in range(1, count + 1)
    )
    qa = tuple(
        LocomoQuestion(sample_id, i, f"q{i}", "a", evidence, category, None)
        for i, (category, evidence) in enumerate(questions)
    )
    return LocomoConversation(sample_id, ("Ann", "Bob"), turns, qa)


def _outcome(*ids: str, abstained: bool = False) -> RetrievalOutcome:
    return RetrievalOutcome(ids, abstained)


C1 = _conversation(
    "c1",
    [3, 2, 2],
    [
        (1, ("D1:1", "D2:1")),
        (1, ("D3:2",)),
        (2, ("D1:3", "D1:2", "D2:2")),
        (3, ()),
        (4, ("D2:2",)),
        (5, ("D1:1",)),
    ],
)
C2 = _conversation("c2", [2], [(5, ("D1:1",)), (4, ("D1:1",))])
OUTCOMES = {
    ("c1", 0): _outcome("D1:2", "D1:1", "D3:1", "D2:1", "D2:2"),
    ("c1", 1): _outcome("D3:1", "D1:1"),
    ("c1", 2): _outcome("D1:3"),
    ("c1", 3): _outcome("D1:1", abstained=True),
    ("c1", 4): _outcome("D2:2", "D2:2", "D1:1", abstained=True),
    ("c1", 5): _outcome(abstained=True),
    ("c2", 0): _outcome("D1:1"),
    ("c2", 1): _outcome(),
}


def _assert_table(
    actual: Mapping[str, Mapping[int, float | None]],
    expected: Mapping[str, Mapping[int, float | None]],
) -> None:
    """Compare two recall tables group by group, floats approximately."""
    assert actual.keys() == expected.keys()
    for group, row in expected.items():
        assert actual[group] == pytest.approx(row), group


@pytest.fixture
def scores() -> LocomoScores:
    return score_locomo([C1, C2], OUTCOMES, ks=KS)


def test_turn_recall_by_hand(scores: LocomoScores) -> None:
    expected: dict[str, dict[int, float | None]] = {
        "1": {1: 0.0, 2: 0.25, 4: 0.5},  # (0, .5, 1) and (0, 0, 0)
        "2": {1: 1 / 3, 2: 1 / 3, 4: 1 / 3},
        "3": {1: None, 2: None, 4: None},  # its one question has no evidence
        "4": {1: 0.5, 2: 0.5, 4: 0.5},  # a duplicate id uses up a slot
        "overall": {1: 4 / 15, 2: 11 / 30, 4: 7 / 15},  # by question, not category
    }
    _assert_table(scores.turn_recall, expected)


def test_session_recall_by_hand(scores: LocomoScores) -> None:
    expected: dict[str, dict[int, float | None]] = {
        "1": {1: 0.75, 2: 0.75, 4: 1.0},  # (.5, .5, 1) and (1, 1, 1)
        "2": {1: 0.5, 2: 0.5, 4: 0.5},
        "3": {1: None, 2: None, 4: None},
        "4": {1: 0.5, 2: 0.5, 4: 0.5},
        "overall": {1: 0.6, 2: 0.6, 4: 0.7},
    }
    _assert_table(scores.session_recall, expected)


def test_abstention_and_counts(scores: LocomoScores) -> None:
    assert scores.adversarial_abstention == 0.5
    assert scores.answerable_abstention == pytest.approx(2 / 6)
    assert scores.counts == {
        "1": GroupCounts(2, 2, 0),
        "2": GroupCounts(1, 1, 0),
        "3": GroupCounts(1, 0, 1),
        "4": GroupCounts(2, 2, 0),
        "5": GroupCounts(2, 2, 0),
        "overall": GroupCounts(6, 5, 1),
    }


def test_extra_outcomes_are_ignored() -> None:
    only_c2 = score_locomo([C2], OUTCOMES, ks=KS)
    assert only_c2.turn_recall["overall"] == {1: 0.0, 2: 0.0, 4: 0.0}
    assert only_c2.turn_recall["1"] == {1: None, 2: None, 4: None}
    assert only_c2.adversarial_abstention == 0.0


def test_no_conversations_gives_empty_scores() -> None:
    empty = score_locomo([], {}, ks=(5,))
    assert empty.turn_recall["overall"] == {5: None}
    assert empty.adversarial_abstention is None
    assert empty.counts["overall"] == GroupCounts(0, 0, 0)


def test_missing_outcome_raises() -> None:
    partial = {k: v for k, v in OUTCOMES.items() if k != ("c1", 2)}
    with pytest.raises(InvalidArgument, match=r"no retrieval outcome for question \('c1', 2\)"):
        score_locomo([C1], partial)


def test_unknown_retrieved_id_raises() -> None:
    wrong = OUTCOMES | {("c2", 1): _outcome("D1:1", "D7:1")}
    with pytest.raises(InvalidArgument, match=r"\('c2', 1\): c2 has no turn 'D7:1'"):
        score_locomo([C2], wrong)


@pytest.mark.parametrize("ks", [(), (0,), (5, 5), (True,), (-1, 3)])
def test_bad_ks_raise(ks: tuple[int, ...]) -> None:
    with pytest.raises(InvalidArgument, match="ks must be distinct positive integers"):
        score_locomo([C1], OUTCOMES, ks=ks)


@given(
    gold=st.lists(st.sampled_from([t.dia_id for t in C1.turns]), min_size=1, unique=True),
    ranked=st.permutations([t.dia_id for t in C1.turns]),
    cut=st.integers(min_value=0, max_value=7),
)
def test_recall_is_bounded_and_grows_with_k(gold: list[str], ranked: list[str], cut: int) -> None:
    conversation = _conversation("p", [3, 2, 2], [(1, tuple(gold))])
    outcome = {("p", 0): RetrievalOutcome(tuple(ranked[:cut]), abstained=False)}
    result = score_locomo([conversation], outcome, ks=(1, 2, 3, 5, 7))
    for table in (result.turn_recall, result.session_recall):
        values = [v for v in table["1"].values() if v is not None]
        assert values == sorted(values)
        assert all(0.0 <= v <= 1.0 for v in values)
    if cut == 7:
        assert result.turn_recall["1"][7] == result.session_recall["1"][7] == 1.0


def test_to_dict_is_json_ready(scores: LocomoScores) -> None:
    data = json.loads(json.dumps(scores.to_dict()))
    assert data["ks"] == [1, 2, 4]
    assert data["turn_recall"]["1"] == {"R@1": 0.0, "R@2": 0.25, "R@4": 0.5}
    assert data["turn_recall"]["3"]["R@4"] is None
    assert data["session_recall"]["overall"]["R@4"] == pytest.approx(0.7)
    assert data["counts"]["3"] == {"questions": 1, "scored": 0, "no_evidence": 1}
    assert data["adversarial_abstention"] == 0.5


def test_markdown_table(scores: LocomoScores) -> None:
    other = score_locomo([C1, C2], OUTCOMES, ks=(1, 2))
    table = markdown_table({"bm25": scores, "a|b": other})
    lines = table.splitlines()
    turn_header = lines[lines.index("### Turn-level recall (%)") + 2]
    assert turn_header.startswith("| system | multi-hop (1) R@1 | multi-hop (1) R@2 |")
    assert turn_header.endswith("| overall (1-4) R@4 |")
    assert "| bm25 | 0.0 | 25.0 | 50.0 | 33.3 | 33.3 | 33.3 | n/a | n/a | n/a |" in table
    assert "| a\\|b | 0.0 | 25.0 | n/a | 33.3 | 33.3 | n/a |" in table
    assert "| bm25 | 75.0 | 75.0 | 100.0 | 50.0 |" in table  # session level
    assert "| bm25 | 50.0 | 33.3 |" in table  # abstention
    assert "| bm25 | 2 | 1 | 0 | 2 | 5 | 2 | 1 |" in table  # counts
    assert [line for line in lines if line.startswith("### ")] == [
        "### Turn-level recall (%)",
        "### Session-level recall (%)",
        "### Abstention (%)",
        "### Questions scored",
    ]


def test_markdown_table_needs_a_system() -> None:
    with pytest.raises(InvalidArgument):
        markdown_table({})


def test_write_chart(tmp_path: Path, scores: LocomoScores) -> None:
    pytest.importorskip("matplotlib")
    target = write_chart({"bm25": scores, "dense": scores}, tmp_path / "r10.png", k=2)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_write_chart_needs_k(tmp_path: Path, scores: LocomoScores) -> None:
    with pytest.raises(InvalidArgument, match=r"no R@10 for system\(s\) \['bm25'\]"):
        write_chart({"bm25": scores}, tmp_path / "r10.png")


def test_metrics_import_without_matplotlib() -> None:
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None  # any import of it now fails\n"
        "from engram.eval import metrics\n"
        "scores = metrics.score_locomo([], {}, ks=(10,))\n"
        "try:\n"
        "    metrics.write_chart({'x': scores}, 'never-written.png')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    env = os.environ | {"PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "write_chart needs matplotlib" in result.stdout


@pytest.fixture(scope="module")
def real() -> list[LocomoConversation]:
    """The LoCoMo file named by ENGRAM_LOCOMO, else the dev split beside the repo."""
    if not DEV_FILE.is_file():
        pytest.skip(f"LoCoMo data not found at {DEV_FILE} (set ENGRAM_LOCOMO)")
    return load_locomo(DEV_FILE)


def test_oracle_on_real_data(real: list[LocomoConversation]) -> None:
    outcomes = {
        (c.sample_id, q.index): RetrievalOutcome(q.evidence, abstained=q.category == 5)
        for c in real
        for q in c.questions
    }
    result = score_locomo(real, outcomes)
    assert result.turn_recall["overall"][25] == 1.0  # no question has over 25 ids
    assert result.session_recall["overall"][25] == 1.0
    assert result.adversarial_abstention == 1.0
    assert result.answerable_abstention == 0.0
    if len(real) == 5:
        scored = {g: result.counts[g].scored for g in ("1", "2", "3", "4", "5", "overall")}
        assert scored == {
            "1": 142,
            "2": 156,
            "3": 44,
            "4": 418,
            "5": 237,
            "overall": 760,
        }
        assert result.counts["overall"].no_evidence == 2
