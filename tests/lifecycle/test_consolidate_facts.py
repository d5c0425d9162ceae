"""Facts from episodes, and near-duplicate facts merged, on every backend.

What an episode states goes through the proposer and the write policy: the
user's own words give ``explicit_user`` facts, an agent's or a tool's at most
``model_inference``; each fact names its episode. Near-duplicate facts of one
slot merge into the stronger (authority, then confidence): the other keeps its
content, becomes ``superseded`` by it, and the audit names both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from consolidation_kit import LATER, write_episodes
from tests.conftest import T0, OpenMem

from backends import table_rows
from engram import Authority, Config, Conflict, Context, Engram, Status, Turn
from engram.config import ConsolidationConfig
from engram.lifecycle.consolidate import runner
from engram.store.predicate import Subject
from engram.types import Proposal


def _facts(mem: Engram, ctx: Context) -> list[object]:
    return [r for r in mem.list(ctx, limit=1000) if r.type not in ("episode", "summary")]


def test_what_the_user_said_becomes_an_explicit_fact(mem: Engram, ctx: Context) -> None:
    [episode] = write_episodes(mem, ctx, ["I prefer dark mode in every editor."], T0)
    report = mem.consolidate("acme", "u1", now=LATER)
    assert (report.facts_proposed, report.facts_accepted) == (1, 1)
    [fact] = _facts(mem, ctx)
    assert fact.type == "preference"  # type: ignore[attr-defined]
    assert fact.authority == Authority.EXPLICIT_USER  # type: ignore[attr-defined]
    assert fact.agent_id is None  # type: ignore[attr-defined]  # the user's, for every agent
    assert fact.source.derived_from == (episode,)  # type: ignore[attr-defined]
    assert fact.observed_at == T0  # type: ignore[attr-defined]


def test_what_a_tool_reported_is_at_most_an_inference(mem: Engram, ctx: Context) -> None:
    write_episodes(mem, ctx, ["Your timezone is Europe/Berlin."], T0,
                   source={"kind": "tool", "ref": "calendar-sync"})  # fmt: skip
    mem.consolidate("acme", "u1", now=LATER)
    facts = _facts(mem, ctx)
    assert facts
    assert {f.authority for f in facts} == {Authority.MODEL_INFERENCE}  # type: ignore[attr-defined]


class _Careless:
    """A proposer that suggests a secret, an unknown type and one sound fact (as a
    badly behaved LLM proposer might)."""

    def propose(self, turns: Sequence[Turn]) -> list[Proposal]:
        return [
            Proposal("The deploy key is sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c.", "fact"),
            Proposal("The user seems cheerful today.", "mood"),
            Proposal(
                "The team deploys on Tuesdays.",
                "decision",
                authority=Authority.MODEL_INFERENCE,
                confidence=0.6,
            ),
        ]


def test_proposed_facts_meet_the_write_policy(mem: Engram, ctx: Context) -> None:
    write_episodes(mem, ctx, ["We talked about the deploy schedule."], T0)
    report = mem.consolidate("acme", "u1", now=LATER, proposer=_Careless())
    assert (report.facts_proposed, report.facts_accepted) == (2, 1)  # "mood" is no type
    assert [f.content for f in _facts(mem, ctx)] == ["The team deploys on Tuesdays."]
    assert not any("sk-live" in str(row) for row in table_rows(mem.store, "records"))


def test_near_duplicate_facts_merge_into_the_stronger(mem: Engram, ctx: Context) -> None:
    stated = mem.remember(ctx, "User prefers dark mode in editors.", type="preference").record
    guessed = mem.remember(ctx, "The user prefers dark mode in editors.", type="preference",
                           authority="model_inference", confidence=0.6).record  # fmt: skip
    apart = mem.remember(ctx, "User prefers light mode in terminals.", type="preference").record
    assert stated is not None
    assert guessed is not None
    assert apart is not None
    report = mem.consolidate("acme", "u1", now=LATER)
    assert report.merged == ((stated.id, guessed.id),)
    merged = mem.get(ctx, guessed.id)
    assert merged.status == Status.SUPERSEDED
    assert merged.superseded_by == stated.id
    assert merged.content == guessed.content  # nothing overwritten
    assert mem.get(ctx, stated.id).status == Status.ACTIVE
    assert mem.get(ctx, apart.id).status == Status.ACTIVE
    [entry] = [e for e in mem.store.audit_entries(Subject("acme", "u1"))
               if e["reason"] == "near_duplicate_merge"]  # fmt: skip
    assert stated.id in str(entry["record_ids"])
    assert guessed.id in str(entry["record_ids"])
    assert {stated.id, guessed.id} <= {r.id for r in mem.history(ctx, guessed.id)}


def test_conflicts_keys_and_scopes_do_not_merge(mem: Engram, ctx: Context) -> None:
    keyed = mem.remember(ctx, "User prefers dark mode in editors.", type="preference",
                         key="editor.theme", value="dark").record  # fmt: skip
    loose = mem.remember(ctx, "The user prefers dark mode in editors.", type="preference",
                         authority="model_inference", confidence=0.6).record  # fmt: skip
    scoped = mem.remember(ctx, "User prefers dark mode in the editors.", type="preference",
                          scope="repo:r1").record  # fmt: skip
    assert keyed is not None
    assert loose is not None
    assert scoped is not None
    report = mem.consolidate("acme", "u1", now=LATER)
    assert report.merged == ((keyed.id, loose.id),)  # an unkeyed duplicate joins the keyed
    assert mem.get(ctx, keyed.id).status == Status.ACTIVE
    assert mem.get(ctx, scoped.id).status == Status.ACTIVE  # another scope: another slot


def test_erasure_after_consolidation_leaves_nothing(mem: Engram, ctx: Context) -> None:
    write_episodes(mem, ctx, ["I prefer dark mode in every editor.",
                              "We decided to pin Node 20."], T0)  # fmt: skip
    mem.consolidate("acme", "u1", now=LATER)
    receipt = mem.erase_subject("acme", "u1")
    assert receipt.verified, receipt.failed
    for table in ("records", "consolidated", "consolidation_runs", "procedure_stats"):
        assert table_rows(mem.store, table) == [], table


def test_merges_stop_once_the_lease_passed_to_another_consolidator(
    store_url: str, open_mem: OpenMem, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each merge re-takes the lease: a run whose lease ran out while it planned its
    merges, and was taken over, merges nothing and says why."""
    rules = ConsolidationConfig(lease_seconds=0.3)
    mem = open_mem(store_url, config=Config(consolidation=rules))
    mem.remember(ctx, "User prefers dark mode in editors.", type="preference")
    guessed = mem.remember(ctx, "The user prefers dark mode in editors.", type="preference",
                           authority="model_inference", confidence=0.6).record  # fmt: skip
    assert guessed is not None
    planned = runner.plan_merges

    def slow_plan(store: Any, subject: Subject, config: Config, now: datetime) -> Any:
        pairs = planned(store, subject, config, now)
        time.sleep(0.5)  # the run's lease runs out, and another consolidator takes it
        wall = datetime.now(UTC)
        assert store.take_lease(subject, "someone-else", wall, wall + timedelta(minutes=5)).held
        return pairs

    monkeypatch.setattr(runner, "plan_merges", slow_plan)
    with pytest.raises(Conflict, match="took over"):
        mem.consolidate("acme", "u1", now=LATER)
    assert mem.get(ctx, guessed.id).status == Status.ACTIVE
