"""LoCoMo before and after consolidation: item-level scoring and the three stages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.eval.locomo import LocomoConversation, LocomoQuestion, LocomoTurn
from engram.eval.locomo_consolidated import STAGES, run_consolidated
from engram.eval.metrics import RetrievalOutcome, score_locomo

START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
TALK = (
    ("Ann", "I adopted a grey kitten called Pepper last weekend."),
    ("Bob", "Pepper is a lovely name for a kitten!"),
    ("Ann", "We decided to paint the kitchen yellow in June."),
    ("Bob", "Yellow will make the kitchen feel warm."),
)


def _conversation(sample_id: str) -> LocomoConversation:
    turns = tuple(
        LocomoTurn(sample_id, f"D{s}:{t}", s, t, who, f"{text} (session {s})", None,
                   START + timedelta(days=10 * (s - 1)))
        for s in (1, 2) for t, (who, text) in enumerate(TALK, start=1)
    )  # fmt: skip
    questions = (
        LocomoQuestion(sample_id, 0, "What is the name of Ann's kitten?", "Pepper",
                       ("D1:1",), 4, None),
        LocomoQuestion(sample_id, 1, "Which colour will the kitchen be painted?", "yellow",
                       ("D2:3",), 4, None),
    )  # fmt: skip
    return LocomoConversation(sample_id, ("Ann", "Bob"), turns, questions)


def test_an_item_standing_for_several_turns_counts_them_all() -> None:
    conv = _conversation("c1")
    outcomes = {
        ("c1", 0): RetrievalOutcome(("D1:2", "D1:1"), False, (("D1:2", "D1:1"),)),
        ("c1", 1): RetrievalOutcome(("D1:1", "D2:3"), False, (("D1:1",), ("D2:3",))),
    }
    scores = score_locomo([conv], outcomes, ks=(1, 2))
    assert scores.turn_recall["overall"] == pytest.approx({1: 0.5, 2: 1.0})


def test_the_three_stages_are_scored_on_one_store() -> None:
    run = run_consolidated([_conversation("c1"), _conversation("c2")], embedder="hashing",
                           ks=(1, 5))  # fmt: skip
    assert list(run.scores) == list(STAGES)
    assert run.consolidation["groups"] == run.consolidation["summaries"] == 4
    for stage in STAGES:
        assert run.scores[stage].turn_recall["overall"][5] == pytest.approx(1.0), stage
    assert run.tokens["summaries"] > 0
    assert run.to_dict()["turns"] == 16
