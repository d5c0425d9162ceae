"""Property: any history survives the export file into a fresh store, and twice is once.

Random histories of adds, supersedes (a new value through ``remember``),
corrections, retractions, expiries and retention running out (the clock moves
on) are exported with ``export_jsonl``, imported with ``import_jsonl`` into a
fresh store of the same backend (SQLite, PostgreSQL), and exported again: the
same contents, statuses, version chains and provenance, ids remapped. A second
import of the same file changes nothing.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import Conflict, Context, Engram, FrozenClock

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
READER = Context(tenant_id="acme", user_id="u1", agent_id="coder", project_id="p1")
WRITERS = (READER, Context(tenant_id="acme", user_id="u1", project_id="p1"))
SCOPES = ("user", "project:p1")
KEPT = ("content", "status", "version", "type", "tier", "key", "value", "authority",
        "confidence", "scope", "agent_id", "valid_from", "valid_to", "observed_at",
        "created_at", "expires_at", "sensitivity", "retention", "importance",
        "private")  # fmt: skip
LINKS = ("supersedes", "superseded_by", "contested_with")


@dataclass(frozen=True)
class Remember:
    writer: int
    scope: str
    key: str | None
    value: int
    authority: str
    confidence: float
    retention: str | None


@dataclass(frozen=True)
class Change:
    kind: str  # correct, retract, expire
    target: int


@dataclass(frozen=True)
class Wait:
    hours: int


Op = Remember | Change | Wait
operations = st.one_of(
    st.builds(Remember, writer=st.integers(0, 1), scope=st.sampled_from(SCOPES),
              key=st.sampled_from((None, "deploy.region", "db.engine")),
              value=st.integers(0, 3),
              authority=st.sampled_from(("explicit_user", "tool_observation", "model_inference")),
              confidence=st.sampled_from((0.5, 0.9, 1.0)),
              retention=st.sampled_from((None, "session", "short_term"))),
    st.builds(Change, kind=st.sampled_from(("correct", "retract", "expire")),
              target=st.integers(0, 100)),
    st.builds(Wait, hours=st.sampled_from((1, 30, 24 * 8))),
)  # fmt: skip


def _apply(mem: Engram, clock: FrozenClock, op: Op, n: int) -> None:
    if isinstance(op, Wait):
        clock.advance(hours=op.hours)
        return
    if isinstance(op, Remember):
        text = f"Setting {op.key or 'note'} {n} is option {op.value}."
        mem.remember(WRITERS[op.writer], text, type="fact", scope=op.scope, key=op.key,
                     value=None if op.key is None else op.value, authority=op.authority,
                     confidence=op.confidence, retention=op.retention)  # fmt: skip
        return
    live = mem.list(READER, status=["active", "disputed"], limit=1_000)
    if not live:
        return
    target = live[op.target % len(live)]
    try:
        if op.kind == "correct":
            mem.correct(READER, target.id, f"Corrected setting {n}.", value=None)
        elif op.kind == "retract":
            mem.retract(READER, target.id)
        else:
            mem.expire(READER, target.id)
    except Conflict:  # a version the list showed that a sibling's correction replaced
        pass
    clock.advance(minutes=1)


def _comparable(rows: list[dict[str, Any]], ids: dict[str, str]) -> list[tuple[Any, ...]]:
    """Each row's kept fields, links and provenance, with ids through ``ids``."""
    out = []
    for row in rows:
        links = tuple(ids.get(row[name], row[name]) if row[name] else None for name in LINKS)
        source = row["source"]
        derived = tuple(ids.get(i, i) for i in source["derived_from"])
        out.append((ids.get(row["id"], row["id"]), *(row[name] for name in KEPT), *links,
                    source["kind"], source["ref"], derived))  # fmt: skip
    return sorted(out, key=repr)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(operations, min_size=3, max_size=20))  # fmt: skip
def test_any_history_round_trips_through_the_export_file(
    open_fresh: Callable[..., Engram], ops: list[Op]
) -> None:
    clock = FrozenClock(T0)
    with open_fresh(clock=clock) as source:
        for n, op in enumerate(ops):
            _apply(source, clock, op, n)
        rows = source.export(READER)
        exported = io.StringIO()
        source.export_jsonl(READER, exported)
    with open_fresh(clock=FrozenClock(clock.now())) as target:
        report = target.import_jsonl(READER, io.StringIO(exported.getvalue()))
        ids = {new: old for old, new in report.id_map.items()}
        after = target.export(READER)
        assert len(report.id_map) == len(rows) == len(after)
        assert _comparable(after, ids) == _comparable(rows, {})
        again = target.import_jsonl(READER, io.StringIO(exported.getvalue()))
        assert again.imported == 0
        assert target.export(READER) == after
        assert target.audit_verify().ok
