"""Corrections and the write decisions: CONFIRM, SUPERSEDE, DISPUTE, CONTEST (SPEC section 3)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

import engram
from engram import Context, Engram, InvalidArgument, Operation, Record, Status


def _add(mem: Engram, ctx: Context, content: str, **fields: Any) -> Record:
    w = mem.remember(ctx, content, **fields)
    assert w.operation == Operation.ADD, w.reason
    assert w.record is not None
    return w.record


def _active(mem: Engram, ctx: Context) -> list[Record]:
    return mem.list(ctx, status="active")


# -- correct / retract / expire -------------------------------------------------------


def test_correct_supersedes_and_links_both_ways(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    old = _add(mem, ctx, "The API is served from us-east-1.", key="api.region", value="us-east-1")
    clock.advance(days=1)
    w = mem.correct(ctx, old.id, "The API is served from eu-west-1.", value="eu-west-1")
    assert w.operation == Operation.SUPERSEDE
    assert w.superseded == [old.id]
    new = w.record
    assert new is not None
    stale = mem.get(ctx, old.id)
    assert stale.status is Status.SUPERSEDED
    assert stale.superseded_by == new.id
    assert new.supersedes == old.id
    assert stale.valid_to == (new.valid_from or new.observed_at) == clock.now()
    assert (new.status, new.version, new.value, new.key) == (Status.ACTIVE, 2, "eu-west-1",
                                                             "api.region")  # fmt: skip
    assert [r.id for r in _active(mem, ctx)] == [new.id]


def test_history_is_the_chain_oldest_first_from_any_version(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    first = _add(mem, ctx, "Standup is at 9:00.", key="standup.time", value="9:00")
    ids = [first.id]
    for time in ("9:30", "10:00"):
        clock.advance(hours=1)
        w = mem.correct(ctx, ids[-1], f"Standup is at {time}.", value=time)
        assert w.record is not None
        ids.append(w.record.id)
    unrelated = _add(mem, ctx, "Retro is on Fridays.", key="retro.day")
    for anchor in ids:
        chain = mem.history(ctx, anchor)
        assert [r.id for r in chain] == ids
        assert [r.version for r in chain] == [1, 2, 3]
        assert [r.status for r in chain] == [Status.SUPERSEDED, Status.SUPERSEDED, Status.ACTIVE]
    assert [r.id for r in mem.history(ctx, unrelated.id)] == [unrelated.id]


def test_supersede_closes_the_old_version_at_the_new_valid_from(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    start = clock.now() - timedelta(days=30)
    old = _add(mem, ctx, "Lives in Lyon.", type="profile", key="home.city", value="Lyon",
               valid_from=start)  # fmt: skip
    moved = clock.now() + timedelta(days=3)
    w = mem.remember(ctx, "Lives in Paris.", type="profile", key="home.city", value="Paris",
                     valid_from=moved)  # fmt: skip
    assert w.operation == Operation.SUPERSEDE
    assert w.superseded == [old.id]
    assert w.record is not None
    assert mem.get(ctx, old.id).valid_to == moved == w.record.valid_from


@pytest.mark.parametrize(("old_end_days", "closed_days"), [(10, 3), (1, 1)],
                         ids=["ends-after-the-change", "ends-before-the-change"])  # fmt: skip
def test_supersede_closes_the_old_version_at_the_earlier_end(
    mem: Engram, ctx: Context, clock: engram.FrozenClock, old_end_days: int, closed_days: int
) -> None:
    """valid_to becomes min(old valid_to, new valid_from): never extended, never overlapping."""
    now = clock.now()
    old = _add(mem, ctx, "Rate limit is 100 rps.", key="rate.limit", value=100,
               valid_from=now - timedelta(days=30),
               valid_to=now + timedelta(days=old_end_days))  # fmt: skip
    w = mem.remember(ctx, "Rate limit is 200 rps.", key="rate.limit", value=200,
                     valid_from=now + timedelta(days=3))  # fmt: skip
    assert w.operation == Operation.SUPERSEDE
    assert w.superseded == [old.id]
    closed = mem.get(ctx, old.id)
    assert closed.status is Status.SUPERSEDED
    assert closed.valid_to == now + timedelta(days=closed_days)


def test_retract_keeps_history_but_never_lists_as_active(mem: Engram, ctx: Context) -> None:
    r = _add(mem, ctx, "The office is closed on Mondays.")
    w = mem.retract(ctx, r.id, reason="user said it is wrong")
    assert w.operation == Operation.RETRACT
    assert w.record is not None
    assert w.record.status is Status.RETRACTED
    assert _active(mem, ctx) == []
    assert [x.id for x in mem.list(ctx, status=None)] == [r.id]
    assert mem.get(ctx, r.id).status is Status.RETRACTED
    assert [x.status for x in mem.history(ctx, r.id)] == [Status.RETRACTED]
    with pytest.raises(InvalidArgument, match="retracted"):
        mem.retract(ctx, r.id)
    with pytest.raises(InvalidArgument, match="retracted"):
        mem.correct(ctx, r.id, "The office is closed on Sundays.")


def test_expire_ends_validity_now(mem: Engram, ctx: Context, clock: engram.FrozenClock) -> None:
    r = _add(mem, ctx, "Sprint 14 focuses on onboarding.", type="decision")
    clock.advance(days=2)
    w = mem.expire(ctx, r.id)
    assert w.operation == Operation.EXPIRE
    expired = mem.get(ctx, r.id)
    assert expired.status is Status.EXPIRED
    assert expired.valid_to == clock.now()
    assert _active(mem, ctx) == []


def test_a_superseded_version_cannot_be_corrected_again(mem: Engram, ctx: Context) -> None:
    old = _add(mem, ctx, "Uses Postgres 14.", key="db.version", value=14)
    mem.correct(ctx, old.id, "Uses Postgres 16.", value=16)
    before = mem.export(ctx)
    with pytest.raises(InvalidArgument, match="superseded"):
        mem.correct(ctx, old.id, "Uses Postgres 15.", value=15)
    assert mem.export(ctx) == before


# -- write decisions ------------------------------------------------------------------


def test_exact_duplicate_confirms_without_a_new_row(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    r = _add(mem, ctx, "Prefers tabs over spaces.", confidence=0.6)
    clock.advance(hours=1)
    w = mem.remember(ctx, "  prefers TABS over spaces ", confidence=0.9)
    assert w.operation == Operation.CONFIRM
    assert w.record is not None
    assert w.record.id == r.id
    assert w.record.confidence == 0.9
    assert w.record.observed_at == clock.now()
    w = mem.remember(ctx, "Prefers tabs over spaces.", confidence=0.5)
    assert w.operation == Operation.CONFIRM
    assert w.record is not None
    assert w.record.confidence == 0.9
    assert [x.id for x in mem.list(ctx, status=None)] == [r.id]
    assert mem.get(ctx, r.id).confidence == 0.9


def test_same_key_and_value_confirms(mem: Engram, ctx: Context) -> None:
    r = _add(mem, ctx, "Timezone is Europe/Paris.", key="user.timezone", value="Europe/Paris",
             confidence=0.7)  # fmt: skip
    w = mem.remember(ctx, "My timezone: Paris.", key="user.timezone", value="Europe/Paris",
                     confidence=0.95)  # fmt: skip
    assert w.operation == Operation.CONFIRM
    assert w.record is not None
    assert w.record.id == r.id
    assert w.record.confidence == 0.95
    assert len(mem.list(ctx, status=None)) == 1


@pytest.mark.parametrize(
    ("old_authority", "new_authority", "new_confidence"),
    [
        ("explicit_user", "explicit_user", 1.0),
        ("tool_observation", "explicit_user", 0.5),
        ("model_inference", "model_inference", 0.9),
        ("model_inference", "tool_observation", 0.3),
    ],
)
def test_same_key_new_value_with_enough_authority_supersedes(
    mem: Engram, ctx: Context, old_authority: str, new_authority: str, new_confidence: float
) -> None:
    old = _add(mem, ctx, "Backend language is Go.", key="backend.lang", value="Go",
               authority=old_authority, confidence=0.9)  # fmt: skip
    w = mem.remember(ctx, "Backend language is Rust.", key="backend.lang", value="Rust",
                     authority=new_authority, confidence=new_confidence)  # fmt: skip
    assert w.operation == Operation.SUPERSEDE, w.reason
    assert w.superseded == [old.id]
    assert w.record is not None
    assert mem.get(ctx, old.id).status is Status.SUPERSEDED
    assert [r.id for r in _active(mem, ctx)] == [w.record.id]
    assert w.record.supersedes == old.id
    assert w.record.version == 2


def test_model_inference_contradicting_the_user_is_disputed(mem: Engram, ctx: Context) -> None:
    user = _add(mem, ctx, "I am vegetarian.", type="profile", key="diet", value="vegetarian")
    w = mem.remember(ctx, "The user eats meat.", type="profile", key="diet", value="omnivore",
                     authority="model_inference", confidence=0.99)  # fmt: skip
    assert w.operation == Operation.DISPUTE
    assert w.record is not None
    assert w.record.status is Status.DISPUTED
    assert "model_inference" in w.reason
    assert [r.id for r in _active(mem, ctx)] == [user.id]
    assert mem.get(ctx, user.id).status is Status.ACTIVE
    assert [r.id for r in mem.list(ctx, status="disputed")] == [w.record.id]


def _contest(mem: Engram, ctx: Context) -> tuple[Record, Record]:
    a = _add(mem, ctx, "CI runs on GitHub Actions.", key="ci.system", value="gha",
             authority="tool_observation", confidence=0.5)  # fmt: skip
    w = mem.remember(ctx, "CI runs on Buildkite.", key="ci.system", value="buildkite",
                     authority="tool_observation", confidence=0.6)  # fmt: skip
    assert w.operation == Operation.CONTEST, w.reason
    assert w.record is not None
    return mem.get(ctx, a.id), w.record


def test_equal_authority_low_confidence_contradiction_is_contested(
    mem: Engram, ctx: Context
) -> None:
    a, b = _contest(mem, ctx)
    assert a.status is Status.ACTIVE
    assert b.status is Status.ACTIVE
    assert a.contested_with == b.id
    assert b.contested_with == a.id
    assert b.supersedes is None
    assert a.superseded_by is None
    assert {r.id for r in _active(mem, ctx)} == {a.id, b.id}


def test_a_confident_equal_authority_contradiction_is_not_contested(
    mem: Engram, ctx: Context
) -> None:
    _add(mem, ctx, "CI runs on Jenkins.", key="ci.system", value="jenkins",
         authority="tool_observation", confidence=0.5)  # fmt: skip
    w = mem.remember(ctx, "CI runs on CircleCI.", key="ci.system", value="circle",
                     authority="tool_observation", confidence=0.8)  # fmt: skip
    assert w.operation == Operation.SUPERSEDE


def test_a_confirmation_ends_the_contest(mem: Engram, ctx: Context) -> None:
    a, b = _contest(mem, ctx)
    w = mem.remember(ctx, "Yes, CI is Buildkite.", key="ci.system", value="buildkite")
    assert w.operation == Operation.CONFIRM
    assert w.record is not None
    assert w.record.id == b.id
    assert [r.id for r in _active(mem, ctx)] == [b.id]
    assert mem.get(ctx, b.id).contested_with is None
    loser = mem.get(ctx, a.id)
    assert loser.status is Status.SUPERSEDED
    assert loser.contested_with is None


def test_a_correction_ends_the_contest(mem: Engram, ctx: Context) -> None:
    a, b = _contest(mem, ctx)
    w = mem.correct(ctx, a.id, "CI runs on GitLab CI.", value="gitlab")
    assert w.operation == Operation.SUPERSEDE
    assert set(w.superseded) == {a.id, b.id}
    assert w.record is not None
    assert [r.id for r in _active(mem, ctx)] == [w.record.id]
    for old in (a, b):
        stale = mem.get(ctx, old.id)
        assert stale.status is Status.SUPERSEDED
        assert stale.superseded_by == w.record.id
        assert stale.contested_with is None


def test_a_retraction_ends_the_contest(mem: Engram, ctx: Context) -> None:
    a, b = _contest(mem, ctx)
    mem.retract(ctx, a.id)
    assert [r.id for r in _active(mem, ctx)] == [b.id]
    assert mem.get(ctx, b.id).contested_with is None
    assert mem.get(ctx, a.id).status is Status.RETRACTED


def test_a_third_weak_claim_does_not_join_a_contest(mem: Engram, ctx: Context) -> None:
    a, b = _contest(mem, ctx)
    w = mem.remember(ctx, "CI runs on Travis.", key="ci.system", value="travis",
                     authority="tool_observation", confidence=0.4)  # fmt: skip
    assert w.operation == Operation.DISPUTE
    assert {r.id for r in _active(mem, ctx)} == {a.id, b.id}


def test_slots_are_separate_per_scope_and_agent(mem: Engram, ctx: Context) -> None:
    _add(mem, ctx, "Formatter is black.", key="fmt", value="black")
    _add(mem, ctx, "Formatter here is ruff.", key="fmt", value="ruff", scope="repo:r1")
    other_agent = dataclasses.replace(ctx, agent_id="reviewer")
    _add(mem, other_agent, "Formatter is yapf.", key="fmt", value="yapf")
    assert len(_active(mem, ctx)) == 2
    assert len(_active(mem, other_agent)) == 1


@pytest.mark.xfail(
    strict=True,
    reason="BUG: ending a contest links one way only. A CONFIRM marks the loser "
    "superseded_by the winner, but the winner's supersedes stays None (and both are "
    "version 1), so history(winner) omits the loser; a correction of a contested record "
    "sets supersedes to one of the two only, and so does correcting a disputed record "
    "(it also supersedes the active version it disputed) (SPEC section 3: link both ways)",
)
@pytest.mark.parametrize("how", ["confirm", "correct", "correct-disputed"])
def test_ending_a_contest_links_versions_both_ways(mem: Engram, ctx: Context, how: str) -> None:
    if how == "correct-disputed":
        _add(mem, ctx, "CI runs on Jenkins.", key="ci.system", value="jenkins")
        w = mem.remember(ctx, "CI runs on Travis.", key="ci.system", value="travis",
                         authority="model_inference")  # fmt: skip
        assert w.operation == Operation.DISPUTE
        assert w.record is not None
        mem.correct(ctx, w.record.id, "CI runs on Drone.", value="drone")
    else:
        a, _ = _contest(mem, ctx)
        if how == "confirm":
            mem.remember(ctx, "Yes, CI is Buildkite.", key="ci.system", value="buildkite")
        else:
            mem.correct(ctx, a.id, "CI runs on GitLab CI.", value="gitlab")
    records = {r.id: r for r in mem.list(ctx, status=None)}
    for r in records.values():
        if r.superseded_by is not None:
            assert records[r.superseded_by].supersedes == r.id
    for r in records.values():
        assert {x.id for x in mem.history(ctx, r.id)} == set(records)


def test_correcting_a_stale_disputed_record_leaves_one_active_version(
    mem: Engram, ctx: Context
) -> None:
    first = _add(mem, ctx, "Deploy target is Heroku.", key="deploy.target", value="heroku")
    w = mem.remember(ctx, "Deploy target is Fly.", key="deploy.target", value="fly",
                     authority="model_inference")  # fmt: skip
    assert w.operation == Operation.DISPUTE
    assert w.record is not None
    disputed = w.record
    current = mem.correct(ctx, first.id, "Deploy target is Render.", value="render").record
    assert current is not None
    fixed = mem.correct(ctx, disputed.id, "Deploy target is Fly after all.", value="fly").record
    assert fixed is not None
    assert [r.id for r in _active(mem, ctx)] == [fixed.id]
    assert mem.get(ctx, current.id).status is Status.SUPERSEDED


def test_a_keyed_write_never_confirms_away_its_key(mem: Engram, ctx: Context) -> None:
    """Same content as a keyless memory, but with a key: a new keyed record, not a
    CONFIRM that would drop the key and value."""
    plain = mem.remember(ctx, "Deploys go out on Tuesdays.")
    keyed = mem.remember(ctx, "Deploys go out on Tuesdays.", key="deploy.day", value="tue")
    assert plain.record is not None
    assert keyed.operation == "ADD"
    assert keyed.record is not None
    assert (keyed.record.key, keyed.record.value) == ("deploy.day", "tue")
