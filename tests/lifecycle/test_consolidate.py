"""Consolidation turns old episodes into summaries, on every backend.

Summaries are ``summary`` records (tier episodic, authority ``derived_summary``,
``source.kind`` consolidation) whose ``derived_from`` names their episodes; each
old episode is in exactly one; episodes are never deleted; young episodes and a
session still running at the cutoff wait; sessions, scopes and agents are never
mixed in one summary; a second run with the same clock changes nothing.
"""

from __future__ import annotations

from datetime import timedelta

from consolidation_kit import LATER, snapshot, summaries, write_episodes, write_sessions
from tests.conftest import T0

from engram import Authority, Context, Engram, SourceKind, Status, Tier
from engram.store.predicate import Subject


def test_old_episodes_become_summaries_that_name_them(mem: Engram, ctx: Context) -> None:
    sessions = write_sessions(mem, ctx)
    report = mem.consolidate("acme", "u1", now=LATER)
    found = summaries(mem, ctx)
    assert report.groups == report.summaries == len(found) == len(sessions)
    assert report.episodes == sum(map(len, sessions))
    assert sorted(s.source.derived_from for s in found) == sorted(map(tuple, sessions))
    for summary in found:
        assert (summary.tier, summary.authority) == (Tier.EPISODIC, Authority.DERIVED_SUMMARY)
        assert summary.source.kind == SourceKind.CONSOLIDATION
        assert (summary.agent_id, summary.scope) == ("coder", "user")
        assert summary.content.startswith("1 May 2024, ")
    episodes = mem.list(ctx, type="episode")
    assert len(episodes) == report.episodes  # consolidation never deletes an episode
    assert {r.status for r in episodes} == {Status.ACTIVE}


def test_each_group_is_audited_by_ids_and_reason_only(mem: Engram, ctx: Context) -> None:
    sessions = write_sessions(mem, ctx)
    report = mem.consolidate("acme", "u1", now=LATER)
    entries = [e for e in mem.store.audit_entries(Subject("acme", "u1"))
               if e["operation"] == "CONSOLIDATE"]  # fmt: skip
    assert len(entries) == report.groups
    named = [str(e["record_ids"]) for e in entries]
    for ids, summary_id in zip(sessions, report.summary_ids, strict=True):
        assert any(summary_id in text and all(i in text for i in ids) for text in named)
    assert all(e["reason"] == "consolidated" for e in entries)
    assert not any("Postgres" in str(e) for e in mem.store.audit_entries(Subject("acme", "u1")))


def test_a_second_run_with_the_same_clock_changes_nothing(mem: Engram, ctx: Context) -> None:
    write_sessions(mem, ctx)
    mem.remember(ctx, "User prefers dark mode in editors.", type="preference")
    mem.remember(ctx, "The user prefers dark mode in all editors.", type="preference",
                 authority="model_inference", confidence=0.6)  # fmt: skip
    first = mem.consolidate("acme", "u1", now=LATER)
    assert first.changed
    before = snapshot(mem)
    again = mem.consolidate("acme", "u1", now=LATER)
    assert not again.changed
    assert (again.groups, again.summaries, again.facts_proposed, again.merges) == (0, 0, 0, 0)
    assert snapshot(mem) == before


def test_young_episodes_and_a_session_running_at_the_cutoff_wait(mem: Engram, ctx: Context) -> None:
    old = write_episodes(mem, ctx, ["We chose Redis for the session cache."], T0)
    edge = write_episodes(mem, ctx, ["The cache warmup script finished in 40 seconds."],
                          LATER - timedelta(days=7, minutes=30))  # fmt: skip
    young = write_episodes(mem, ctx, ["We decided to shard the cache by tenant."],
                           LATER - timedelta(days=2))  # fmt: skip
    report = mem.consolidate("acme", "u1", now=LATER)
    assert [s.source.derived_from for s in summaries(mem, ctx)] == [tuple(old)]
    assert report.episodes == 1
    mem.consolidate("acme", "u1", now=LATER + timedelta(hours=2))  # the session has ended
    assert [s.source.derived_from for s in summaries(mem, ctx)] == [tuple(old), tuple(edge)]
    mem.consolidate("acme", "u1", now=LATER + timedelta(days=6))
    assert [s.source.derived_from for s in summaries(mem, ctx)][-1] == tuple(young)


def test_sessions_scopes_and_agents_are_never_mixed(
    mem: Engram, ctx: Context, open_mem: object
) -> None:
    mine = write_episodes(mem, ctx, ["We decided the API returns RFC 7807 errors."], T0)
    scoped = write_episodes(mem, ctx, ["We agreed the repo uses trunk-based development."],
                            T0 + timedelta(minutes=1), scope="repo:r1")  # fmt: skip
    other = Context(tenant_id="acme", user_id="u1", agent_id="reviewer")
    theirs = write_episodes(mem, other, ["The review bot flagged three missing tests."],
                            T0 + timedelta(minutes=2))  # fmt: skip
    later = write_episodes(mem, ctx, ["The error format change shipped to production."],
                           T0 + timedelta(hours=2))  # fmt: skip
    mem.consolidate("acme", "u1", now=LATER)
    seen = {s.source.derived_from: s for s in summaries(mem, ctx)}
    assert set(seen) == {tuple(mine), tuple(scoped), tuple(later)}
    assert seen[tuple(scoped)].scope == "repo:r1"
    theirs_summary = summaries(mem, other)
    assert [s.source.derived_from for s in theirs_summary] == [tuple(theirs)]
    assert theirs_summary[0].agent_id == "reviewer"


def test_forgetting_an_episode_forgets_the_summary_made_of_it(mem: Engram, ctx: Context) -> None:
    sessions = write_sessions(mem, ctx)
    mem.consolidate("acme", "u1", now=LATER)
    receipt = mem.forget(ctx, sessions[0][1])
    assert receipt.verified
    assert len(summaries(mem, ctx)) == len(sessions) - 1
    assert all(sessions[0][1] not in s.source.derived_from for s in summaries(mem, ctx))
    assert len(mem.list(ctx, type="episode")) == sum(map(len, sessions)) - 1


def test_every_user_of_a_tenant_is_consolidated(mem: Engram, ctx: Context) -> None:
    write_sessions(mem, ctx)
    other = Context(tenant_id="acme", user_id="u2", agent_id="coder")
    write_episodes(mem, other, ["We decided to archive the legacy wiki."], T0)
    report = mem.consolidate("acme", now=LATER)
    assert report.users == 2
    assert report.user_id is None
    assert len(summaries(mem, other)) == 1
    assert len(summaries(mem, ctx)) == 4
