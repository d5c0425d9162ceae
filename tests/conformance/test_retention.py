"""Retention is one honest state: past it, a memory reads as expired everywhere.

Explicit preferences, profile facts, constraints and rules are permanent until
changed; other memories are kept for their type's retention counted from the
last write, confirmation or recall.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from tests.conftest import OpenMem

from engram import Budget, Context, Engram, FrozenClock, Retention, Status
from engram.scope import resolve
from engram.store.contract import Touch
from engram.store.predicate import Visibility

BIG = Budget(max_items=10, max_tokens=10_000)


def _mem(store_url: str, open_mem: OpenMem, clock: FrozenClock) -> Engram:
    return open_mem(store_url, clock=clock)


@pytest.mark.parametrize("type_name", ["preference", "profile", "constraint", "rule"])
def test_what_the_user_states_is_kept_until_changed(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context, type_name: str
) -> None:
    mem = _mem(store_url, open_mem, clock)
    written = mem.remember(ctx, "Always answer in British English spelling.", type=type_name)
    assert written.record is not None
    assert written.record.retention == Retention.PERMANENT
    assert written.record.expires_at is None
    clock.advance(days=3 * 365)
    assert mem.get(ctx, written.record.id).status == Status.ACTIVE
    result = mem.recall(ctx, "Which spelling should answers use, British English?", budget=BIG)
    assert written.record.id in result.ids


def test_an_inferred_preference_expires_and_reads_as_expired_everywhere(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    mem = _mem(store_url, open_mem, clock)
    written = mem.remember(ctx, "Seems to like jazz playlists while coding.", type="preference",
                           authority="model_inference", confidence=0.6)  # fmt: skip
    assert written.record is not None
    record_id = written.record.id
    assert written.record.retention == Retention.LONG_TERM
    clock.advance(days=366)
    assert mem.get(ctx, record_id).status == Status.EXPIRED
    assert record_id not in {r.id for r in mem.list(ctx)}  # status="active" by default
    assert record_id in {r.id for r in mem.list(ctx, status="expired")}
    assert record_id in {r.id for r in mem.list(ctx, status=None)}
    assert {row["id"]: row["status"] for row in mem.export(ctx)}[record_id] == "expired"
    assert [r.status for r in mem.history(ctx, record_id)] == [Status.EXPIRED]
    result = mem.recall(ctx, "What music does the user like while coding? jazz", budget=BIG)
    assert record_id not in result.ids


def test_episodes_last_a_year_from_their_last_recall(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    mem = _mem(store_url, open_mem, clock)
    kept = mem.remember(ctx, "We debugged the flaky Kafka consumer rebalancing together.",
                        type="episode")  # fmt: skip
    clock.advance(days=2)  # not the same conversation: no context link between them
    left = mem.remember(ctx, "We picked a font pairing for the landing page.", type="episode")
    assert kept.record is not None
    assert left.record is not None
    clock.advance(days=298)
    result = mem.recall(ctx, "the flaky Kafka consumer rebalancing", budget=BIG)
    assert kept.record.id in result.ids
    assert left.record.id not in result.ids
    mem.flush()
    clock.advance(days=200)  # about 500 days after writing, 200 after the recall
    assert mem.get(ctx, kept.record.id).status == Status.ACTIVE
    assert mem.get(ctx, left.record.id).status == Status.EXPIRED
    assert kept.record.id in mem.recall(ctx, "Kafka consumer rebalancing", budget=BIG).ids


def test_recalls_close_together_renew_retention_once(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    """An access moves the expiry only when that gains more than a hundredth of the
    period (``store.renewal``; 3.65 days of an episode's year): a recall a day after
    the last renewal leaves it, one a week later restarts it, on every backend."""
    mem = _mem(store_url, open_mem, clock)
    text = "We traced the checkout latency spike to a cold connection pool."
    written = mem.remember(ctx, text, type="episode")
    assert written.record is not None
    assert written.record.expires_at is not None
    record_id, year = written.record.id, timedelta(days=365)

    def recalled_at(days: float) -> datetime:
        moment = clock.advance(days=days)
        assert record_id in mem.recall(ctx, "checkout latency spike", budget=BIG).ids
        mem.flush()
        return moment

    first = recalled_at(100)
    assert mem.get(ctx, record_id).expires_at == first + year
    recalled_at(1)  # gains a day: under the step
    assert mem.get(ctx, record_id).expires_at == first + year
    later = recalled_at(7)
    record = mem.get(ctx, record_id)
    assert record.expires_at == later + year
    assert record.access_count == 3  # every access still counts


def test_one_flush_of_several_recalls_counts_each_and_renews_from_the_latest(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    """Recalls queued together (two callers of the same user, another session) are
    written by one flush (``store.accesses``): every recall counts, the access time is
    the latest, and retention restarts as if each were written in turn (the access
    a week on renews it, the one half a day after that is within the step)."""
    mem = _mem(store_url, open_mem, clock)
    text = "We traced the checkout latency spike to a cold connection pool."
    written = mem.remember(ctx, text, type="episode")
    assert written.record is not None
    record_id, year = written.record.id, timedelta(days=365)
    elsewhere = dataclasses.replace(ctx, session_id="s2")
    moments = []
    for caller, days in ((ctx, 100), (elsewhere, 1), (ctx, 7), (elsewhere, 0.5)):
        moments.append(clock.advance(days=days))
        assert record_id in mem.recall(caller, "checkout latency spike", budget=BIG).ids
    mem.flush()
    record = mem.get(ctx, record_id)
    assert record.access_count == 4
    assert record.last_accessed_at == moments[-1]
    assert record.expires_at == moments[2] + year


def test_a_touch_counts_only_what_its_visibility_may_read(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    """The store applies a touch under its caller's predicate: another tenant's or
    user's touch naming a record (with one of its own) leaves the record as it was."""
    mem = _mem(store_url, open_mem, clock)
    mine = mem.remember(ctx, "The deploy window is Tuesday morning.", type="episode").record
    theirs = mem.remember(dataclasses.replace(ctx, user_id="u2"), "Lunch is at noon.",
                          type="episode").record  # fmt: skip
    assert mine is not None
    assert theirs is not None
    later = clock.advance(days=30)
    for other in (
        dataclasses.replace(ctx, tenant_id="globex"),
        dataclasses.replace(ctx, user_id="u2"),
    ):
        vis = Visibility.of(resolve(other))
        mem.store.apply([Touch(vis, (mine.id, theirs.id), later), Touch(vis, (mine.id,), later)])
    assert mem.get(ctx, mine.id) == mine
    touched = mem.get(dataclasses.replace(ctx, user_id="u2"), theirs.id)
    assert touched.access_count == 1  # the second touch did not name it
    assert touched.last_accessed_at == later


def test_a_confirmation_restarts_retention(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    mem = _mem(store_url, open_mem, clock)
    text = "We agreed the staging cluster is rebuilt every Sunday."
    first = mem.remember(ctx, text, type="episode")
    assert first.record is not None
    clock.advance(days=360)
    again = mem.remember(ctx, text, type="episode")
    assert again.operation == "CONFIRM"
    clock.advance(days=30)
    assert mem.get(ctx, first.record.id).status == Status.ACTIVE
    clock.advance(days=400)
    assert mem.get(ctx, first.record.id).status == Status.EXPIRED


def test_an_explicit_retention_still_wins(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    mem = _mem(store_url, open_mem, clock)
    written = mem.remember(ctx, "Prefers the dark theme this week.", type="preference",
                           retention="short_term")  # fmt: skip
    assert written.record is not None
    clock.advance(days=8)
    assert mem.get(ctx, written.record.id).status == Status.EXPIRED


def _freeze_fact(mem: Engram, ctx: Context, value: str) -> str:
    written = mem.remember(ctx, f"The deploy freeze ends on {value}.", type="fact",
                           key="deploy.freeze", value=value, retention="short_term")  # fmt: skip
    assert written.record is not None
    return written.record.id


def test_an_expired_version_no_longer_decides_a_new_write(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    mem = _mem(store_url, open_mem, clock)
    old = _freeze_fact(mem, ctx, "Friday")
    clock.advance(days=8)
    assert mem.get(ctx, old).status == Status.EXPIRED
    seen = mem.remember(ctx, "The CI tool reports the deploy freeze ends on Monday.",
                        type="fact", key="deploy.freeze", value="Monday",
                        source={"kind": "tool"})  # fmt: skip
    assert seen.operation == "ADD"  # not DISPUTEd by a version that reads as expired
    assert seen.record is not None
    result = mem.recall(ctx, "When does the deploy freeze end?", budget=BIG)
    assert seen.record.id in result.ids
    assert mem.get(ctx, old).status == Status.EXPIRED
    assert mem.audit_verify().ok


def test_restating_an_expired_memory_never_revives_it(
    store_url: str, open_mem: OpenMem, clock: FrozenClock, ctx: Context
) -> None:
    mem = _mem(store_url, open_mem, clock)
    old = _freeze_fact(mem, ctx, "Friday")
    keyless = mem.remember(ctx, "We rebuilt the staging cluster on Sunday.", type="episode",
                           retention="short_term")  # fmt: skip
    assert keyless.record is not None
    clock.advance(days=8)
    again = _freeze_fact(mem, ctx, "Friday")
    repeated = mem.remember(ctx, "We rebuilt the staging cluster on Sunday.", type="episode",
                            retention="short_term")  # fmt: skip
    assert again != old
    assert repeated.record is not None
    assert repeated.record.id != keyless.record.id
    assert mem.get(ctx, old).status == Status.EXPIRED
    assert mem.get(ctx, keyless.record.id).status == Status.EXPIRED
    assert [r.id for r in mem.list(ctx, type="fact")] == [again]
