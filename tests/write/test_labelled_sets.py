"""The detectors measured on labelled sets, through the whole write policy.

The sets live in ``tests/data/detectors``; secret rows hold ``<<format>>`` slots that
``engram.eval.detectors.fill`` replaces with freshly generated fake tokens. The
thresholds are the product goals of issue 10 and fail on the detectors before it
(measured at d7b2773): instruction recall 0.39 (evasions, other languages, and
non-Latin text taken for chatter), secret recall 0.50 with 28 % of the code and
placeholder rows rejected, special-category recall 0.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from engram.config import Config
from engram.eval import detectors as sets
from engram.types import Sensitivity
from engram.write.policy import VerdictKind

DATA = Path(__file__).resolve().parents[1] / "data" / "detectors"
CONFIG = Config()


def _load(name: str) -> list[sets.Labelled]:
    return sets.load(DATA / f"{name}.jsonl")


def test_the_sets_are_big_enough_and_multilingual() -> None:
    sizes = {
        name: Counter(row.positive for row in _load(name))
        for name in ("instructions", "secrets", "special_category")
    }
    minimum = {"instructions": (60, 60), "secrets": (40, 80), "special_category": (40, 60)}
    for name, (positives, negatives) in minimum.items():
        assert sizes[name][True] >= positives, name
        assert sizes[name][False] >= negatives, name
    special_langs = {row.lang for row in _load("special_category") if row.positive}
    assert {"en", "es", "fr", "de"} <= special_langs
    instruction_langs = {row.lang for row in _load("instructions") if row.positive}
    assert {"en", "es", "fr", "de", "pt", "it", "ru", "zh", "ja"} <= instruction_langs


def test_instruction_detector_recall_and_false_positives() -> None:
    result = sets.score(_load("instructions"), sets.instruction_flagged(CONFIG))
    assert result["recall"] >= 0.95, result["missed"]
    assert result["false_positive_rate"] <= 0.05, result["false_positives"]
    assert all(recall >= 0.5 for recall in result["recall_by_lang"].values()), result


def test_no_labelled_secret_is_stored_and_code_and_placeholders_pass() -> None:
    rows = _load("secrets")
    result = sets.score(rows, sets.secret_flagged(CONFIG))
    assert result["recall"] == 1.0, result["missed"]
    assert result["false_positive_rate"] <= 0.02, result["false_positives"]
    for row in rows:
        verdict = sets.verdict_for(CONFIG, row, "conversation")
        if row.positive:
            assert verdict.kind is VerdictKind.REJECT
            assert verdict.reason.startswith(row.field)
            assert row.text not in verdict.reason
        else:
            assert verdict.kind is VerdictKind.ACCEPT, (row.text, verdict.reason)


def test_special_category_recall_false_positives_and_sensitivity() -> None:
    rows = _load("special_category")
    result = sets.score(rows, sets.special_flagged(CONFIG))
    assert result["recall"] >= 0.9, result["missed"]
    assert result["false_positive_rate"] <= 0.05, result["false_positives"]
    for row in rows:
        verdict = sets.verdict_for(CONFIG, row, "conversation")
        if row.positive and row.label in {"health", "religion", "ethnicity"}:
            assert verdict.sensitivity is Sensitivity.HIGH, row.text


@pytest.mark.parametrize("slot", ["aws", "github", "openai", "slack", "jwt", "pem", "visa"])
def test_filled_slots_are_fresh_per_seed_and_repeatable(slot: str) -> None:
    first = sets.fill(f"<<{slot}>>", "a")
    assert first == sets.fill(f"<<{slot}>>", "a")
    assert first != sets.fill(f"<<{slot}>>", "b")
    assert "<<" not in first
