"""docs/defaults.md states the consolidation defaults the code uses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from engram.config import ConsolidationConfig, RecallConfig, ScoreWeights

DOC = Path(__file__).resolve().parents[2] / "docs" / "defaults.md"


def _rows() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith(("ConsolidationConfig.", "RecallConfig.outcome",
                                                     "ScoreWeights.outcome")):  # fmt: skip
            rows[cells[0]] = cells[1].replace("`", "")
    return rows


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def test_the_consolidation_table_matches_the_configuration() -> None:
    rows = _rows()
    expected = {f"ConsolidationConfig.{f.name}": _shown(getattr(ConsolidationConfig(), f.name))
                for f in dataclasses.fields(ConsolidationConfig)}  # fmt: skip
    expected["RecallConfig.outcome_prior"] = _shown(RecallConfig().outcome_prior)
    expected["ScoreWeights.outcome"] = _shown(ScoreWeights().outcome)
    assert rows == expected
