"""Tombstones: what was forgotten or erased is not brought back by a replay.

After ``forget`` or ``erase_subject``, a NON-explicit proposal of the same
normalised content for the same owner (``observe``'s proposer, an import, a
consolidation's summary, a tool observation) is refused with the reason code
``tombstoned``; the user stating it again explicitly (``remember``) writes it and
lifts the tombstone. Tombstones hold keyed digests only, never text, and after an
erasure never the user's id. On every backend.
"""

from __future__ import annotations

import dataclasses
import json

from tests.backends import table_rows

from engram import Context, Engram, Turn
from engram.store.predicate import Subject, Tenant
from engram.store.tombstones import ERASED
from engram.types import Operation

STATED = "I prefer to get the deploy report by email every Monday."
VARIANT = "  i PREFER to get the deploy report by email   every Monday "  # same normalised form


def _turns(text: str) -> list[Turn]:
    return [Turn(role="user", text=text)]


def _observed(mem: Engram, ctx: Context, text: str) -> list[str]:
    return [r.operation.value + ":" + r.reason for r in mem.observe(ctx, _turns(text))]


def _codes(mem: Engram, ctx: Context) -> list[str]:
    rows = mem.store.audit_entries(Subject(ctx.tenant_id, ctx.user_id))
    return [f"{row['operation']}:{row['reason']}" for row in rows]


def test_a_replay_after_forget_is_refused_until_the_user_says_it_again(
    mem: Engram, ctx: Context
) -> None:
    first = mem.observe(ctx, _turns(STATED))
    assert [r.operation for r in first] == [Operation.ADD]
    record = first[0].record
    assert record is not None
    exported = mem.export(ctx)

    receipt = mem.forget(ctx, record.id)

    assert receipt.verified
    assert receipt.tombstones == 1
    again = mem.observe(ctx, _turns(VARIANT))
    assert [(r.operation, r.record) for r in again] == [(Operation.REJECT, None)]
    assert "forgotten or erased" in again[0].reason
    as_tool = mem.remember(ctx, record.content, authority="tool_observation")  # as stored
    assert as_tool.operation == Operation.REJECT
    summary = mem.remember(ctx, record.content, source={"kind": "consolidation"})
    assert summary.operation == Operation.REJECT
    report = mem.import_records(ctx, exported)
    assert report.imported == 0
    assert "tombstoned" in report.skipped[0][1]
    assert mem.list(ctx) == []
    assert "REJECT:tombstoned" in _codes(mem, ctx)

    said = mem.remember(ctx, record.content)  # the user states it again, explicitly

    assert said.operation == Operation.ADD
    assert said.record is not None
    assert "LIFT:tombstone_lifted" in _codes(mem, ctx)
    assert mem.observe(ctx, _turns(STATED))[0].operation != Operation.REJECT
    assert mem.store.tombstoned(Tenant(ctx.tenant_id), ctx.user_id, [record.content_hash]) == set()


def test_a_tombstone_binds_to_its_owner_only(mem: Engram, ctx: Context) -> None:
    record = mem.observe(ctx, _turns(STATED))[0].record
    assert record is not None
    mem.forget(ctx, record.id)
    colleague = dataclasses.replace(ctx, user_id="u2")
    other_tenant = dataclasses.replace(ctx, tenant_id="globex")
    for other in (colleague, other_tenant):
        assert mem.observe(other, _turns(STATED))[0].operation == Operation.ADD


def test_correcting_into_forgotten_content_is_the_user_saying_it(mem: Engram, ctx: Context) -> None:
    old = mem.remember(ctx, "The report goes out on Fridays.", key="report.day").record
    assert old is not None
    gone = mem.remember(ctx, "The report goes out on Mondays.", key="report.alt").record
    assert gone is not None
    mem.forget(ctx, gone.id)
    fixed = mem.correct(ctx, old.id, "The report goes out on Mondays.")
    assert fixed.operation == Operation.SUPERSEDE
    assert "LIFT:tombstone_lifted" in _codes(mem, ctx)


def test_an_erased_subject_is_refused_a_replay_and_named_nowhere(mem: Engram, ctx: Context) -> None:
    victim = dataclasses.replace(ctx, user_id="patient-5521")
    forgotten = mem.observe(victim, _turns("I prefer the night shift on weekends."))[0].record
    kept = mem.observe(victim, _turns(STATED))[0].record
    assert forgotten is not None
    assert kept is not None
    mem.forget(victim, forgotten.id)  # a tombstone naming the user, before the erasure
    colleague = dataclasses.replace(ctx, user_id="u2")
    mem.observe(colleague, _turns(STATED))

    receipt = mem.erase_subject(victim.tenant_id, victim.user_id)

    assert receipt.verified, receipt.failed
    assert receipt.counts["tombstone rows"] == 0
    assert receipt.counts["tombstones"] == 0
    rows = table_rows(mem.store, "tombstones")
    assert rows
    assert {row["user_id"] for row in rows} <= {ERASED}
    dumped = json.dumps([{k: str(v) for k, v in row.items()} for row in rows])
    assert victim.user_id not in dumped
    assert "night shift" not in dumped
    assert "deploy" not in dumped
    for text in ("I prefer the night shift on weekends.", STATED):  # the replay
        assert mem.observe(victim, _turns(text))[0].operation == Operation.REJECT
    assert mem.observe(colleague, _turns(STATED))[0].operation == Operation.CONFIRM
    assert mem.remember(victim, kept.content).operation == Operation.ADD  # stated: lifted
    assert mem.observe(victim, _turns(STATED))[0].operation != Operation.REJECT


def test_long_content_is_tombstoned_passage_by_passage(mem: Engram, ctx: Context) -> None:
    text = "\n\n".join(f"Section {i}: " + "the incident timeline was reconstructed. " * 40
                       for i in range(16))  # fmt: skip
    written = mem.remember(ctx, text, authority="tool_observation")
    assert len(written.passages) > 2
    assert written.record is not None
    receipt = mem.forget(ctx, written.record.id)
    assert receipt.tombstones == len(written.passages)
    replay = mem.remember(ctx, text, authority="tool_observation")
    assert replay.operation == Operation.REJECT
    assert replay.passages == []
    assert mem.remember(ctx, text).operation == Operation.ADD
