"""docs/defaults.md states the default type policies the code uses."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from engram.config import SweepConfig, default_types

DOC = Path(__file__).resolve().parents[2] / "docs" / "defaults.md"


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = [c.strip("`") for c in cells[1:]]
    return rows


def test_the_type_table_matches_the_configuration() -> None:
    rows = _rows()
    types = default_types()
    assert set(rows) == set(types)
    for name, policy in types.items():
        stated = policy.stated_retention or policy.retention
        half = "none" if policy.half_life_days is None else f"{policy.half_life_days:g}"
        expected = [policy.tier.value, policy.retention.value, stated.value, half,
                    str(policy.quota), policy.section]  # fmt: skip
        assert rows[name] == expected, name


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return f"`{value}`"
    if isinstance(value, frozenset):
        return "`{" + ", ".join(f'"{v}"' for v in sorted(value)) + "}`"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_sweep_table_matches_the_configuration() -> None:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`SweepConfig."):
            rows[cells[0].strip("`").split(".", 1)[1]] = cells[1]
    defaults = SweepConfig()
    assert set(rows) == {f.name for f in dataclasses.fields(SweepConfig)}
    for name, shown in rows.items():
        assert shown == _shown(getattr(defaults, name)), name
