"""Property: any history survives the export file into a fresh store, and twice is once.

Random histories of adds, supersedes (a new value through ``remember``),
corrections, retractions, expiries and retention running out (the clock moves
on), written by an agent and by the user through no agent, are exported with
``export_jsonl``, imported with ``import_jsonl`` into a fresh store of the same
backend (SQLite, PostgreSQL), and exported again: the same contents, statuses,
version chains, provenance and agent binding, ids remapped. A second import of
the same file changes nothing. The histories it once found broken are pinned in
``test_export_round_trips.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from export_kit import READER, USER, round_trip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import Conflict, Engram, FrozenClock

WRITERS = (READER, USER)
SCOPES = ("user", "project:p1")


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


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(operations, min_size=3, max_size=20))  # fmt: skip
def test_any_history_round_trips_through_the_export_file(
    open_fresh: Callable[..., Engram], ops: list[Op]
) -> None:
    def build(source: Engram, clock: FrozenClock) -> None:
        for n, op in enumerate(ops):
            _apply(source, clock, op, n)

    round_trip(open_fresh, build)
