"""A failure in the middle of a write leaves the store exactly as it was.

A tracer raises on the N-th statement of a kind (the audit insert, the
``UPDATE records`` of a supersede, the vector insert, the COMMIT...). Every
observable part of the store must then equal its state before the call: the
exported records of every subject, the audit chain, the vectors and the FTS
index; on a file store also the whole database dump, on PostgreSQL every row of
every table. The store must stay usable. The faults name SQLite's statements;
``PG_STATEMENTS`` says which PostgreSQL statement plays each part.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest
from tests import probes

from backends import table_rows
from engram import Context, Engram, Status
from engram.scope import resolve
from engram.store.predicate import Subject, Visibility

ALL = tuple(status.value for status in Status)
WORDS = ("cache", "deploy", "backup", "rota", "kafka", "batch")


class InjectedFault(Exception):
    """The failure the tracer injects."""


@dataclass
class FailOn:
    """A tracer that raises on the ``nth`` statement starting with ``prefix``."""

    prefix: str
    nth: int = 1
    seen: int = 0

    def __call__(self, sql: str, params: Mapping[str, Any]) -> None:
        if sql.lstrip().startswith(self.prefix):
            self.seen += 1
            if self.seen == self.nth:
                raise InjectedFault(f"{self.prefix} #{self.nth}")


def _readers(ctx: Context) -> list[Context]:
    return [ctx, dataclasses.replace(ctx, user_id="u2")]


def snapshot(mem: Engram, ctx: Context) -> dict[str, Any]:
    """Everything a caller or an auditor can observe, plus the raw file when there is one."""
    state: dict[str, Any] = {"audit": mem.audit_verify(), "model": mem.store.vector_model()}
    for reader in _readers(ctx):
        vis = Visibility.of(resolve(reader))
        query = mem.embedder.embed([" ".join(WORDS)])[0]
        key = reader.user_id
        state[f"export:{key}"] = mem.export(reader)
        state[f"audit:{key}"] = mem.store.audit_entries(Subject("acme", str(reader.user_id)))
        state[f"vector:{key}"] = sorted(
            probes.vector(mem.store, vis, query, mem.embedder.model_id, ALL, 10_000)
        )
        state[f"fts:{key}"] = sorted(probes.lexical(mem.store, vis, " ".join(WORDS), ALL, 10_000))
    if _on_postgres(mem):
        state["dump"] = {table: sorted(map(repr, table_rows(mem.store, table)))
                         for table in PG_TABLES}  # fmt: skip
    path = getattr(mem.store, "path", ":memory:")
    if path != ":memory:":
        with closing(sqlite3.connect(path)) as conn:
            state["dump"] = list(conn.iterdump())
    return state


def _items(n: int, user: str = "u1") -> list[dict[str, Any]]:
    return [{"content": f"{user} fact {i}: the {WORDS[i % len(WORDS)]} runs at {i}h."}
            for i in range(n)]  # fmt: skip


def _seed(mem: Engram, ctx: Context) -> dict[str, str]:
    """A store with history, a contested pair and a second user."""
    ids = {}
    w = mem.remember(ctx, "The cache TTL is 60 seconds.", key="cache.ttl", value=60)
    assert w.record is not None
    ids["keyed"] = w.record.id
    for n, value in enumerate(("kafka", "pulsar")):
        w = mem.remember(ctx, f"The batch queue is {value}.", key="queue", value=value,
                         authority="tool_observation", confidence=0.5)  # fmt: skip
        assert w.record is not None
        ids[f"contest{n}"] = w.record.id
    w = mem.remember(ctx, "Backups run nightly.")
    assert w.record is not None
    ids["plain"] = w.record.id
    mem.remember(ctx, "Summary: backups are nightly.", type="summary",
                 source={"kind": "consolidation", "derived_from": [ids["plain"]]})  # fmt: skip
    mem.remember_many(dataclasses.replace(ctx, user_id="u2"), _items(5, "u2"))
    return ids


Op = Callable[[Engram, Context, dict[str, str]], object]
OPS: dict[str, Op] = {
    "remember": lambda m, c, ids: m.remember(c, "The deploy window is Friday."),
    "supersede": lambda m, c, ids: m.remember(c, "The cache TTL is 90 seconds.", key="cache.ttl",
                                              value=90),
    "contest-confirm": lambda m, c, ids: m.remember(c, "The batch queue is kafka.", key="queue",
                                                    value="kafka"),
    "remember_many": lambda m, c, ids: m.remember_many(c, _items(50)),
    "correct": lambda m, c, ids: m.correct(c, ids["keyed"], "The cache TTL is 30 s.", value=30),
    "correct-contested": lambda m, c, ids: m.correct(c, ids["contest0"], "Queue is NATS."),
    "retract": lambda m, c, ids: m.retract(c, ids["plain"]),
    "retract-contested": lambda m, c, ids: m.retract(c, ids["contest1"]),
    "expire": lambda m, c, ids: m.expire(c, ids["keyed"]),
    "forget": lambda m, c, ids: m.forget(c, ids["plain"]),
    "erase_subject": lambda m, c, ids: m.erase_subject("acme", "u2"),
    "import_records": lambda m, c, ids: m.import_records(
        dataclasses.replace(c, user_id="u2"), [*m.export(c), *_rows(m, c)]
    ),
    "rebuild_index": lambda m, c, ids: m.rebuild_index(),
}  # fmt: skip


def _rows(mem: Engram, ctx: Context) -> list[dict[str, Any]]:
    template = mem.export(ctx)[0]
    return [{**template, "id": f"x{i}", "content": item["content"], "key": None, "value": None,
             "supersedes": None, "superseded_by": None, "contested_with": None}
            for i, item in enumerate(_items(45))]  # fmt: skip


FAULTS = [
    ("remember", "INSERT INTO records", 1),
    ("remember", "INSERT OR REPLACE INTO vectors", 1),
    ("remember", "INSERT INTO audit", 1),
    ("remember", "COMMIT", 1),
    ("supersede", "UPDATE records", 1),
    ("supersede", "INSERT INTO audit", 1),
    ("contest-confirm", "UPDATE records", 2),
    ("remember_many", "INSERT INTO records", 30),
    ("remember_many", "INSERT OR REPLACE INTO vectors", 30),
    ("remember_many", "INSERT INTO audit", 30),
    ("remember_many", "COMMIT", 1),
    ("correct", "INSERT INTO records", 1),
    ("correct", "UPDATE records", 1),
    ("correct", "INSERT INTO audit", 1),
    ("correct-contested", "UPDATE records", 2),
    ("retract", "UPDATE records", 1),
    ("retract", "INSERT INTO audit", 1),
    ("retract-contested", "UPDATE records", 2),
    ("expire", "INSERT INTO audit", 1),
    ("forget", "DELETE FROM records", 1),
    ("forget", "INSERT INTO audit", 1),
    ("forget", "COMMIT", 1),
    ("erase_subject", "DELETE FROM traces", 1),
    ("erase_subject", "INSERT INTO audit", 1),
    ("import_records", "INSERT INTO records", 30),
    ("import_records", "INSERT OR REPLACE INTO vectors", 30),
    ("import_records", "INSERT INTO audit", 1),
    ("import_records", "COMMIT", 1),
    ("rebuild_index", "INSERT OR REPLACE INTO vectors", 3),
]


PG_TABLES = ("records", "forgotten", "audit", "audit_heads", "audit_subjects", "traces",
             "engram_meta", "tombstones", "tombstone_keys", "cache_generations")  # fmt: skip
_PG_AUDIT = "WITH head AS (UPDATE audit_heads"
# SQLite's statement -> PostgreSQL's (None: PostgreSQL has no such statement). A
# vector is a column of the records row there, so the record's INSERT carries it,
# and a rebuild writes vectors with one UPDATE per record.
PG_STATEMENTS: dict[tuple[str, str], str | None] = {
    ("rebuild_index", "INSERT OR REPLACE INTO vectors"): "UPDATE records",
    ("*", "INSERT OR REPLACE INTO vectors"): None,
    ("*", "INSERT INTO audit"): _PG_AUDIT,
    ("*", "DELETE FROM records"): "WITH gone AS (DELETE FROM records",
}


def _on_postgres(mem: Engram) -> bool:
    return type(mem.store).__name__ == "PostgresStore"


# PostgreSQL inserts a transaction's audit entries with one statement before COMMIT,
# and a ``remember_many`` chunk without passages its records with one multi-row
# INSERT (``write.bulk``), so each of those fails for the whole chunk there.
PG_NTH = {("remember_many", "INSERT INTO audit"): 1, ("remember_many", "INSERT INTO records"): 1}


def _nth(mem: Engram, op: str, prefix: str, nth: int) -> int:
    """Which of the statements to fail on ``mem``'s backend."""
    return PG_NTH.get((op, prefix), nth) if _on_postgres(mem) else nth


def _statement(mem: Engram, op: str, prefix: str) -> str:
    """The prefix of the statement to fail on ``mem``'s backend (skip when none)."""
    if not _on_postgres(mem):
        return prefix
    for key in ((op, prefix), ("*", prefix)):
        if key in PG_STATEMENTS:
            mapped = PG_STATEMENTS[key]
            if mapped is None:
                pytest.skip(f"PostgreSQL sends no {prefix!r}: the vector is a column of the "
                            "records row, whose INSERT the other faults fail")  # fmt: skip
            return mapped
    return prefix


@pytest.mark.parametrize(("op", "prefix", "nth"), FAULTS)
def test_a_failure_mid_write_leaves_the_store_unchanged(
    mem: Engram, ctx: Context, op: str, prefix: str, nth: int
) -> None:
    nth = _nth(mem, op, prefix, nth)
    prefix = _statement(mem, op, prefix)
    ids = _seed(mem, ctx)
    before = snapshot(mem, ctx)
    fault = FailOn(prefix, nth)
    mem.store.tracer = fault
    try:
        with pytest.raises(InjectedFault):
            OPS[op](mem, ctx, ids)
    finally:
        mem.store.tracer = None
    assert fault.seen == nth, f"the call emitted only {fault.seen} {prefix!r} statements"
    assert snapshot(mem, ctx) == before
    # the store is still usable, and the operation succeeds when nothing fails
    OPS[op](mem, ctx, ids)
    assert mem.audit_verify().ok
    if op != "rebuild_index":  # a rebuild changes derived data only, and is not audited
        assert mem.audit_verify().entries > before["audit"].entries


def test_without_a_fault_every_operation_changes_the_store(mem: Engram, ctx: Context) -> None:
    """Guards the test above: each operation does change what ``snapshot`` sees.

    (A rebuild with the same embedder reproduces the same index; a rebuild cut short
    would lose vectors, which ``snapshot`` sees.)
    """
    for op in OPS.keys() - {"rebuild_index"}:
        ids = _seed(mem, dataclasses.replace(ctx, agent_id=f"agent-{op}"))
        seeded = dataclasses.replace(ctx, agent_id=f"agent-{op}")
        before = snapshot(mem, seeded)
        OPS[op](mem, seeded, ids)
        assert snapshot(mem, seeded) != before, op
