"""No explicit memory is ever pruned, whatever the records, the clock and the weights.

Two levels: the pure rule (``decay.prunable``) over arbitrary records and
configurations, and the sweep itself over random stores on every backend, where
a memory may go only because its retention ended or because the rule says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import T0

from engram.config import Config, SweepConfig
from engram.ids import new_id
from engram.lifecycle import decay
from engram.store.contract import Insert
from engram.store.predicate import Tenant
from engram.types import Authority, Record, Retention, Sensitivity, Source, Status, Tier

DAY = timedelta(days=1)
AUTHORITIES = [a.value for a in Authority]
STATUSES = [Status.ACTIVE, Status.DISPUTED, Status.RETRACTED, Status.EXPIRED]
unit = st.floats(0.0, 1.0, allow_nan=False)

configs = st.builds(
    SweepConfig,
    importance_weight=unit, recency_weight=unit, access_weight=unit, prune_below=unit,
    protect_importance=unit, recency_half_life_days=st.floats(0.01, 1000.0),
    min_age_days=st.floats(0.0, 400.0), access_saturation=st.integers(1, 1000),
)  # fmt: skip


@st.composite
def records(draw: st.DrawFn) -> Record:
    """A record with random authority, importance, usage, age and retention."""
    created = T0 + draw(st.integers(-400, 400)) * DAY
    accessed = draw(st.none() | st.integers(0, 800).map(lambda d: created + d * DAY))
    retention = draw(st.sampled_from([Retention.LONG_TERM, Retention.PERMANENT,
                                      Retention.SHORT_TERM]))  # fmt: skip
    expires = draw(st.none() | st.integers(1, 900).map(lambda d: created + d * DAY))
    content = f"memory {draw(st.integers(0, 10**9))} about the build farm"
    return Record(
        id=new_id(), tenant_id="acme", user_id="u1", agent_id=None, scope="user",
        tier=Tier.SEMANTIC, type="fact", key=None, value=None, content=content,
        authority=Authority(draw(st.sampled_from(AUTHORITIES))), confidence=0.9,
        source=Source(), observed_at=created, valid_from=None, valid_to=None,
        created_at=created, updated_at=created, status=draw(st.sampled_from(STATUSES)),
        version=1, supersedes=None, superseded_by=None, sensitivity=Sensitivity.LOW,
        purpose=None, consent_basis=None,
        retention=Retention.PERMANENT if expires is None else retention, expires_at=expires,
        importance=draw(unit), access_count=draw(st.integers(0, 500)),
        last_accessed_at=accessed, private=False, embedding_model=None,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )  # fmt: skip


@given(records(), configs, st.integers(-1000, 2000))
@settings(max_examples=500)
def test_the_rule_never_prunes_an_explicit_or_important_memory(
    record: Record, config: SweepConfig, day: int
) -> None:
    now = T0 + day * DAY
    if record.authority in (Authority.EXPLICIT_USER, Authority.EXPLICIT_ADMIN):
        assert not decay.prunable(record, now, config)
    if record.importance >= config.protect_importance:
        assert not decay.prunable(record, now, config)
    if now - record.created_at < timedelta(days=config.min_age_days):
        assert not decay.prunable(record, now, config)


@given(records(), configs, st.integers(0, 2000), st.integers(1, 2000))
@settings(max_examples=300)
def test_an_earlier_clock_never_prunes_what_a_later_one_keeps(
    record: Record, config: SweepConfig, later: int, back: int
) -> None:
    """Monotone in time: whatever a sweep at ``now`` prunes, a sweep later prunes too,
    so a clock set back can only prune less."""
    now = T0 + later * DAY
    if decay.prunable(record, now - back * DAY, config):
        assert decay.prunable(record, now, config)


@given(st.lists(records(), min_size=1, max_size=12), configs, st.integers(-100, 1200))
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])  # fmt: skip
def test_the_sweep_deletes_only_what_ended_or_decayed(
    open_fresh: object, made: list[Record], config: SweepConfig, day: int
) -> None:
    mem = open_fresh(config=Config(sweep=config))  # type: ignore[operator]
    try:
        mem.store.apply([Insert(record) for record in made])
        now = T0 + day * DAY
        mem.sweep(now=now)
        left = {r.id for r in mem.store.records_of(Tenant("acme"), [r.id for r in made])}
        for record in made:
            ended = record.expires_at is not None and record.expires_at <= now
            if record.id not in left:
                assert ended or decay.prunable(record, now, config), record
                assert ended or record.authority not in decay.EXPLICIT
            elif not ended:
                assert not decay.prunable(record, now, config)
        explicit = [r for r in made if r.authority in decay.EXPLICIT and not (
            r.expires_at is not None and r.expires_at <= now)]  # fmt: skip
        assert {r.id for r in explicit} <= left
    finally:
        mem.close()


def test_the_weights_and_thresholds_are_checked() -> None:
    import pytest

    from engram import ConfigError

    for bad in ({"batch_size": 0}, {"prune_below": float("nan")}, {"importance_weight": 2.0},
                {"recency_half_life_days": 0.0}, {"min_age_days": float("inf")},
                {"access_saturation": 0}, {"batch_size": True}):  # fmt: skip
        with pytest.raises(ConfigError):
            dataclasses.replace(SweepConfig(), **bad)
    assert SweepConfig().protect_importance == 0.5


def test_a_record_from_the_future_is_never_old_enough_to_prune() -> None:
    """Found by the property above: a record created after ``now`` (clock skew, an
    import) has a negative age, under every minimum age, even 0."""
    content = "memory 1 about the build farm"
    record = Record(
        id=new_id(), tenant_id="acme", user_id="u1", agent_id=None, scope="user",
        tier=Tier.SEMANTIC, type="fact", key=None, value=None, content=content,
        authority=Authority.MODEL_INFERENCE, confidence=0.9, source=Source(),
        observed_at=T0 + DAY, valid_from=None, valid_to=None, created_at=T0 + DAY,
        updated_at=T0 + DAY, status=Status.ACTIVE, version=1, supersedes=None,
        superseded_by=None, sensitivity=Sensitivity.LOW, purpose=None, consent_basis=None,
        retention=Retention.PERMANENT, expires_at=None, importance=0.0, access_count=0,
        last_accessed_at=None, private=False, embedding_model=None,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )  # fmt: skip
    eager = SweepConfig(prune_below=1.0, protect_importance=1.0, min_age_days=0.0)
    assert not decay.prunable(record, T0, eager)
    assert decay.prunable(record, T0 + DAY, eager)
