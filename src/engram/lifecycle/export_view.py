"""Export: a subject's stored versions as the rows an export holds.

Each row is ``Record.to_dict`` of a version as callers see it at the export
(``as_seen``), so what the import restores is what a read showed: past its
retention a version is expired, and a contest one side of which has lapsed is
over (the slot's next write would store both as uncontested).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from engram.types import Record, as_seen

__all__ = ["export_rows"]


def export_rows(records: Iterable[Record], now: datetime) -> list[dict[str, Any]]:
    """JSON-friendly rows of every given record as seen at ``now`` (``as_seen``): past
    its retention a version is expired, and a contested pair one side of which has
    lapsed so is no longer contested (both links cleared, as the next write to the
    slot stores it), so an import does not restore a contest that is over."""
    stored = list(records)
    seen = [as_seen(record, now) for record in stored]
    lapsed = {r.id for r, s in zip(stored, seen, strict=True) if r.status != s.status}
    partners = {r.id: r.contested_with for r in stored}
    return [_settled(record, lapsed, partners).to_dict() for record in seen]


def _settled(record: Record, lapsed: set[str], partners: Mapping[str, str | None]) -> Record:
    other = record.contested_with
    if other is None or partners.get(other) != record.id:
        return record  # no pair (a disputed version names the one it disputes)
    return record.replace(contested_with=None) if lapsed & {record.id, other} else record
