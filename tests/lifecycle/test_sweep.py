"""The sweep: retention ends in hard deletion, decay prunes only what is unused and
unprotected, episodes are consolidated first, and a clock set back deletes nothing
a correct one would keep. Every test runs on SQLite (file and memory) and
PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from tests import probes
from tests.conftest import T0

from engram import Context, Engram, IncompleteIdentity, InvalidArgument, NotFound
from engram.lifecycle.sweep import DECAYED, EXPIRED
from engram.scope import resolve
from engram.store.predicate import Subject, Tenant, Visibility

ALL = ("active", "superseded", "retracted", "expired", "disputed")
HOUR, DAY = timedelta(hours=1), timedelta(days=1)


def _vis(ctx: Context) -> Visibility:
    return Visibility.of(resolve(ctx))


def _gone(mem: Engram, ctx: Context, ids: list[str]) -> None:
    """Nothing of ``ids`` is left: rows, vectors, lexical and vector hits."""
    tenant = Tenant(ctx.tenant_id)
    assert mem.store.records_of(tenant, ids) == []
    residue = mem.store.residue(tenant, ids)
    assert (residue["records rows"], residue["vectors rows"]) == (0, 0)
    for memory_id in ids:
        with pytest.raises(NotFound):
            mem.get(ctx, memory_id)


def test_retention_ends_in_the_hard_deletion_of_the_whole_chain(mem: Engram, ctx: Context) -> None:
    first = mem.remember(ctx, "The nightly build cache lives on volume nine.", key="cache.vol",
                         value=9, retention="transient", now=T0).record  # fmt: skip
    assert first is not None
    second = mem.correct(ctx, first.id, "The nightly build cache lives on volume ten.",
                         value=10, now=T0 + timedelta(minutes=5)).record  # fmt: skip
    assert second is not None
    assert second.retention.value == "transient"
    keep = mem.remember(ctx, "The release train leaves on Thursdays.", now=T0).record
    assert keep is not None
    vis = _vis(ctx)
    assert probes.lexical(mem.store, vis, "nightly build cache volume", ALL, 10)

    report = mem.sweep(now=T0 + 2 * HOUR)

    assert (report.expired, report.versions, report.pruned) == (1, 1, 0)
    assert report.deleted == {EXPIRED: 1, DECAYED: 0}
    _gone(mem, ctx, [first.id, second.id])
    assert probes.lexical(mem.store, vis, "nightly build cache volume", ALL, 10) == []
    query = mem.embedder.embed(["nightly build cache volume"])[0]
    hits = probes.vector(mem.store, vis, query, mem.embedder.model_id, ALL, 10)
    assert [i for i, _ in hits] == [keep.id]
    assert mem.get(ctx, keep.id).content == keep.content
    entries = mem.store.audit_entries(Subject(ctx.tenant_id, ctx.user_id))
    swept = [e for e in entries if e["reason"] == EXPIRED]
    assert len(swept) == 1
    assert set(json.loads(swept[0]["record_ids"])) == {first.id, second.id}
    assert mem.audit_verify().ok


def test_what_is_not_due_stays_and_permanent_memories_never_expire(
    mem: Engram, ctx: Context
) -> None:
    soon = mem.remember(ctx, "Deploy freeze until Friday noon.", retention="short_term", now=T0)
    stated = mem.remember(ctx, "Never deploy on a Friday afternoon.", type="rule", now=T0)
    assert soon.record is not None
    assert stated.record is not None
    assert stated.record.expires_at is None
    report = mem.sweep(now=T0 + 6 * DAY)
    assert report.expired == 0
    assert mem.get(ctx, soon.record.id).status.value == "active"
    later = mem.sweep(now=T0 + 8 * DAY)
    assert later.expired == 1
    _gone(mem, ctx, [soon.record.id])
    assert mem.get(ctx, stated.record.id).content == stated.record.content
    assert mem.sweep(now=T0 + 5000 * DAY).expired == 0


def test_an_expired_or_retracted_memory_goes_once_its_retention_ends(
    mem: Engram, ctx: Context
) -> None:
    ended = mem.remember(ctx, "The canary runs in eu-west-3.", retention="short_term", now=T0)
    wrong = mem.remember(ctx, "The canary runs in us-east-9.", retention="short_term", now=T0)
    assert ended.record is not None
    assert wrong.record is not None
    mem.expire(ctx, ended.record.id, now=T0 + DAY)
    mem.retract(ctx, wrong.record.id, now=T0 + DAY)
    assert mem.sweep(now=T0 + 2 * DAY).expired == 0  # retention runs on
    assert mem.sweep(now=T0 + 8 * DAY).expired == 2
    _gone(mem, ctx, [ended.record.id, wrong.record.id])


def test_decay_prunes_only_old_unused_unprotected_memories(mem: Engram, ctx: Context) -> None:
    guess = mem.remember(ctx, "The user may prefer dark roast coffee.", importance=0.1,
                         authority="model_inference", now=T0).record  # fmt: skip
    said = mem.remember(ctx, "I prefer green tea in the afternoon.", importance=0.1,
                        now=T0).record  # fmt: skip
    important = mem.remember(ctx, "The on-call phone is in the blue drawer.", importance=0.9,
                             authority="tool_observation", now=T0).record  # fmt: skip
    used = mem.remember(ctx, "The staging database is called heron.", importance=0.1,
                        authority="tool_observation", now=T0).record  # fmt: skip
    young = mem.remember(ctx, "The lint job takes four minutes.", importance=0.1,
                         authority="tool_observation", now=T0 + 50 * DAY).record  # fmt: skip
    assert None not in (guess, said, important, used, young)
    for day in (40, 52, 58):  # recalled often, and lately
        result = mem.recall(ctx, "What is the staging database called?", now=T0 + day * DAY)
        assert used.id in result.ids
    mem.flush()

    report = mem.sweep(now=T0 + 60 * DAY)

    assert report.pruned == 1
    _gone(mem, ctx, [guess.id])
    for kept in (said, important, used, young):
        assert mem.get(ctx, kept.id).content == kept.content
    entries = mem.store.audit_entries(Subject(ctx.tenant_id, ctx.user_id))
    assert [json.loads(e["record_ids"]) for e in entries if e["reason"] == DECAYED] == [[guess.id]]


def test_pruning_can_be_turned_off(store_url: str, open_mem: object, ctx: Context) -> None:
    from engram import Config
    from engram.config import SweepConfig

    mem = open_mem(store_url, config=Config(sweep=SweepConfig(prune=False)))  # type: ignore[operator]
    guess = mem.remember(ctx, "The user may like jazz.", importance=0.05,
                         authority="model_inference", now=T0).record  # fmt: skip
    assert mem.sweep(now=T0 + 200 * DAY).pruned == 0  # retention (365 days) runs on
    assert mem.get(ctx, guess.id) is not None


def test_episodes_are_consolidated_before_they_are_dropped(mem: Engram, ctx: Context) -> None:
    episode = mem.remember(ctx, "We paired on the flaky login test.", type="episode",
                           retention="short_term", now=T0).record  # fmt: skip
    fact = mem.remember(ctx, "The login test uses a mock clock.", retention="short_term",
                        now=T0).record  # fmt: skip
    assert episode is not None
    assert fact is not None
    seen: list[tuple[str, str | None, datetime, bool]] = []

    def consolidate(tenant_id: str, user_id: str | None, now: datetime) -> None:
        still_there = bool(mem.store.records_of(Tenant(tenant_id), [episode.id]))
        seen.append((tenant_id, user_id, now, still_there))

    mem.consolidator = consolidate
    report = mem.sweep(now=T0 + 8 * DAY)
    assert seen == [(ctx.tenant_id, ctx.user_id, T0 + 8 * DAY, True)]
    assert (report.consolidated, report.expired) == (1, 2)
    _gone(mem, ctx, [episode.id, fact.id])


def test_a_failed_consolidation_keeps_the_episodes_until_it_succeeds(
    mem: Engram, ctx: Context
) -> None:
    episode = mem.remember(ctx, "We migrated the queue to NATS.", type="episode",
                           retention="short_term", now=T0).record  # fmt: skip
    fact = mem.remember(ctx, "The queue is NATS.", retention="short_term", now=T0).record
    assert episode is not None
    assert fact is not None

    def broken(tenant_id: str, user_id: str | None, now: datetime) -> None:
        raise RuntimeError("the summariser is down")

    mem.consolidator = broken
    report = mem.sweep(now=T0 + 8 * DAY)
    assert (report.expired, report.unconsolidated, report.consolidated) == (1, 1, 0)
    assert mem.store.records_of(Tenant(ctx.tenant_id), [episode.id])  # kept, unsummarised
    _gone(mem, ctx, [fact.id])
    mem.consolidator = lambda tenant_id, user_id, now: None
    assert mem.sweep(now=T0 + 9 * DAY).expired == 1
    _gone(mem, ctx, [episode.id])


def test_a_clock_set_back_deletes_nothing_a_correct_clock_would_keep(
    mem: Engram, ctx: Context
) -> None:
    old = mem.remember(ctx, "A transient note from the first day.", retention="transient",
                       now=T0).record  # fmt: skip
    assert old is not None
    first = mem.sweep(now=T0 + 10 * DAY)
    assert first.expired == 1
    assert first.clock_behind == ()
    later = mem.remember(ctx, "A transient note from day eleven.", retention="transient",
                         now=T0 + 11 * DAY).record  # fmt: skip
    future = mem.remember(ctx, "A note the model guessed on day eleven.", importance=0.01,
                          authority="model_inference", now=T0 + 11 * DAY).record  # fmt: skip
    assert later is not None
    assert future is not None

    behind = mem.sweep(now=T0 + DAY)

    assert behind.clock_behind == (ctx.tenant_id,)
    assert (behind.expired, behind.pruned) == (0, 0)
    for kept in (later, future):
        assert mem.get(ctx, kept.id).content == kept.content
    assert mem.sweep(now=T0 + 5 * DAY).clock_behind == (ctx.tenant_id,)  # the mark stays
    assert mem.store.mark_swept(Tenant(ctx.tenant_id), T0) == T0 + 10 * DAY
    entries = mem.store.audit_entries(Subject(ctx.tenant_id, ""))
    assert any("clock behind" in e["reason"] for e in entries)


def test_one_tenant_is_swept_alone_and_every_tenant_by_default(mem: Engram, ctx: Context) -> None:
    other = Context(tenant_id="globex", user_id="u1")
    mine = mem.remember(ctx, "Acme's transient note.", retention="transient", now=T0).record
    theirs = mem.remember(other, "Globex's transient note.", retention="transient",
                          now=T0).record  # fmt: skip
    assert mine is not None
    assert theirs is not None
    assert mem.sweep("globex", now=T0 + DAY).tenants == ("globex",)
    assert mem.get(ctx, mine.id) is not None
    _gone(mem, other, [theirs.id])
    report = mem.sweep(now=T0 + DAY)
    assert report.tenants == ("acme",)  # every tenant that still has a record
    _gone(mem, ctx, [mine.id])


def test_long_content_is_swept_as_one_group(mem: Engram, ctx: Context) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "the retention sweep keeps groups whole. " * 40
                       for i in range(16))  # fmt: skip
    written = mem.remember(ctx, text, retention="short_term", now=T0)
    assert len(written.passages) > 2
    recalled = mem.recall(ctx, "Paragraph 4 retention sweep", now=T0 + 6 * DAY)  # renews some
    mem.flush()
    assert recalled.ids
    report = mem.sweep(now=T0 + 8 * DAY)
    assert report.expired == 1
    assert report.versions == len(written.passages) - 1
    _gone(mem, ctx, list(written.passages))


def test_bad_arguments_are_refused_before_anything_is_deleted(mem: Engram, ctx: Context) -> None:
    note = mem.remember(ctx, "A transient note.", retention="transient", now=T0).record
    assert note is not None
    with pytest.raises(IncompleteIdentity):
        mem.sweep("  ", now=T0 + DAY)
    for bad in (":acme", "a\nb", 7, "x" * 201):
        with pytest.raises(InvalidArgument):
            mem.sweep(bad, now=T0 + DAY)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        mem.sweep(now=datetime(2024, 6, 1))  # naive
    assert mem.get(ctx, note.id) is not None
    assert mem.sweep("nobody", now=T0 + DAY).expired == 0


def test_the_report_names_no_content(mem: Engram, ctx: Context) -> None:
    secretish = "The offsite key is taped under the third desk."
    mem.remember(ctx, secretish, retention="transient", now=T0)
    report = mem.sweep(now=T0 + DAY)
    dumped = json.dumps(report.to_dict())
    assert "offsite" not in dumped
    assert report.expired == 1
    assert report.audit_ids
    assert not any("offsite" in json.dumps(e) for e in mem.store.audit_entries(
        Subject(ctx.tenant_id, ctx.user_id)))  # fmt: skip
