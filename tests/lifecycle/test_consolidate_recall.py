"""Recall after consolidation: a summary and its episodes are never counted twice,
and when the episodes are gone (a retention sweep), the summaries still answer.

The sweep deletes episodes at the store level (``contract.Delete``): ``forget`` is
the user's hard delete and takes every copy derived from a memory with it,
summaries included, by design.
"""

from __future__ import annotations

from consolidation_kit import LATER, summaries, write_sessions

from engram import Budget, Context, Engram
from engram.store.contract import Delete
from engram.store.predicate import Tenant

BIG = Budget(max_items=10, max_tokens=10_000)
QUESTION = "What fixed the lock timeout in the invoices migration?"


def test_a_summary_and_its_episodes_are_not_both_selected(mem: Engram, ctx: Context) -> None:
    write_sessions(mem, ctx)
    mem.consolidate("acme", "u1", now=LATER)
    result = mem.recall(ctx, QUESTION, budget=BIG, now=LATER)
    sources = {s.id: set(s.source.derived_from) for s in summaries(mem, ctx)}
    chosen = set(result.ids)
    for summary_id, episodes in sources.items():
        assert summary_id not in chosen or not chosen & episodes
    trace = result.trace.to_dict()
    left = set(trace["rejections"].get("covered_by", []))
    assert left  # the question's session is found both as episodes and as a summary
    assert not left & chosen
    merges = [m for m in trace["merges"] if m["by"] == "derived_from"]
    assert {m["merged"] for m in merges} == left
    for m in merges:
        assert m["kept"] in chosen
        pair = {m["kept"], m["merged"]}
        assert any(pair <= {s, *episodes} for s, episodes in sources.items())


def test_after_the_episodes_are_swept_the_summaries_answer(mem: Engram, ctx: Context) -> None:
    sessions = write_sessions(mem, ctx)
    mem.consolidate("acme", "u1", now=LATER)
    episodes = [i for ids in sessions for i in ids]
    with mem.store.transaction():
        mem.store.apply([Delete(Tenant("acme"), tuple(episodes))])
    assert mem.list(ctx, type="episode") == []
    result = mem.recall(ctx, QUESTION, budget=BIG, now=LATER)
    first = next(s for s in summaries(mem, ctx) if s.source.derived_from == tuple(sessions[0]))
    assert result.ids[0] == first.id
    assert "Adding an index fixed it" in result.prompt
