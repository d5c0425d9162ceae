"""What the export round-trip tests share: a comparable view of exported rows, and
one round trip through the export file into a fresh store of the same backend."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram import Context, Engram, FrozenClock
from engram.lifecycle.transfer import ImportReport

__all__ = ["KEPT", "READER", "T0", "USER", "RoundTrip", "comparable", "round_trip"]

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
READER = Context(tenant_id="acme", user_id="u1", agent_id="coder", project_id="p1")
USER = Context(tenant_id="acme", user_id="u1", project_id="p1")  # the user, through no agent
KEPT = ("content", "status", "version", "type", "tier", "key", "value", "authority",
        "confidence", "scope", "agent_id", "valid_from", "valid_to", "observed_at",
        "created_at", "expires_at", "sensitivity", "retention", "importance",
        "private")  # fmt: skip
LINKS = ("supersedes", "superseded_by", "contested_with")
Rows = list[dict[str, Any]]


def comparable(rows: Rows, ids: Mapping[str, str]) -> list[tuple[Any, ...]]:
    """Each row's kept fields, links and provenance, with ids through ``ids``."""
    out = []
    for row in rows:
        links = tuple(ids.get(row[name], row[name]) if row[name] else None for name in LINKS)
        source = row["source"]
        derived = tuple(ids.get(i, i) for i in source["derived_from"])
        out.append((ids.get(row["id"], row["id"]), *(row[name] for name in KEPT), *links,
                    source["kind"], source["ref"], derived))  # fmt: skip
    return sorted(out, key=repr)


@dataclass(frozen=True)
class RoundTrip:
    """The source's export, the import's report and the target's export, with the
    target's ids mapped back to the source's (``original``)."""

    rows: Rows
    report: ImportReport
    after: Rows

    def original(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The source row the target's ``row`` was imported from."""
        back = {new: old for old, new in self.report.id_map.items()}
        return next(r for r in self.rows if r["id"] == back[row["id"]])


def round_trip(
    open_fresh: Callable[..., Engram], build: Callable[[Engram, FrozenClock], None]
) -> RoundTrip:
    """``build`` a history in a fresh store, export it to a file and import that into
    another fresh store, later on the clock; asserts the import kept every row as it
    was (ids remapped) and that a second import changes nothing."""
    clock = FrozenClock(T0)
    with open_fresh(clock=clock) as source:
        build(source, clock)
        rows = source.export(READER)
        exported = io.StringIO()
        source.export_jsonl(READER, exported)
    with open_fresh(clock=FrozenClock(clock.now())) as target:
        report = target.import_jsonl(READER, io.StringIO(exported.getvalue()))
        after = target.export(READER)
        assert len(report.id_map) == len(rows) == len(after)
        back = {new: old for old, new in report.id_map.items()}
        assert comparable(after, back) == comparable(rows, {})
        again = target.import_jsonl(READER, io.StringIO(exported.getvalue()))
        assert again.imported == 0
        assert target.export(READER) == after
        assert target.audit_verify().ok
    return RoundTrip(rows, report, after)
