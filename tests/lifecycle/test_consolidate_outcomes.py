"""Procedure outcomes: ``record_outcome``, the outcomes episodes report, and recall.

Counts live beside the procedure (tenant-first ``procedure_stats``), are written
with an audit entry, go with the procedure when it is forgotten, and lift a
reliable procedure above an equally relevant failing one in recall.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from consolidation_kit import LATER, write_episodes
from tests.conftest import T0

from backends import table_rows
from engram import Budget, Context, Engram, Forbidden, InvalidArgument, NotFound
from engram.store.predicate import Subject

BIG = Budget(max_items=10, max_tokens=10_000)


def _procedure(mem: Engram, ctx: Context, text: str) -> str:
    written = mem.remember(ctx, text, type="procedure", now=T0)
    assert written.record is not None
    return written.record.id


def test_outcomes_are_counted_smoothed_and_audited(mem: Engram, ctx: Context) -> None:
    deploy = _procedure(mem, ctx, "To deploy, run the blue-green script and watch the canary.")
    mem.record_outcome(ctx, deploy, success=True, reward=1.0)
    mem.record_outcome(ctx, deploy, True)
    after = mem.record_outcome(ctx, deploy, success=False, reward=-0.5)
    assert (after.successes, after.failures) == (2, 1)
    assert after.success_rate == pytest.approx(3 / 5)  # Beta(1, 1): (2 + 1) / (3 + 2)
    assert after.mean_reward == pytest.approx(0.25)
    reasons = [e["reason"] for e in mem.store.audit_entries(Subject("acme", "u1"))
               if e["operation"] == "OUTCOME"]  # fmt: skip
    assert reasons == ["outcome_success", "outcome_success", "outcome_failure"]


@pytest.mark.parametrize(
    ("success", "reward"), [(1, None), ("yes", None), (True, 2.0), (True, float("nan")),
                            (True, "high"), (True, True)],
)  # fmt: skip
def test_a_bad_outcome_is_refused_and_counts_nothing(
    mem: Engram, ctx: Context, success: object, reward: object
) -> None:
    deploy = _procedure(mem, ctx, "To deploy, run the blue-green script.")
    with pytest.raises(InvalidArgument):
        mem.record_outcome(ctx, deploy, success, reward)  # type: ignore[arg-type]
    assert table_rows(mem.store, "procedure_stats") == []


def test_only_the_callers_active_procedures_take_outcomes(mem: Engram, ctx: Context) -> None:
    fact = mem.remember(ctx, "The staging cluster runs in eu-west-1.", type="fact").record
    assert fact is not None
    with pytest.raises(InvalidArgument, match="not a procedure"):
        mem.record_outcome(ctx, fact.id, True)
    deploy = _procedure(mem, ctx, "To deploy, run the blue-green script.")
    with pytest.raises(NotFound):
        mem.record_outcome(Context(tenant_id="acme", user_id="u2"), deploy, True)
    with pytest.raises(NotFound):
        mem.record_outcome(ctx, "01NOSUCHPROCEDURE000000000", True)
    mem.correct(ctx, deploy, "To deploy, run the blue-green script, then smoke tests.")
    with pytest.raises(InvalidArgument, match="not active"):
        mem.record_outcome(ctx, deploy, True)
    shared = mem.remember_global("acme", "To rotate keys, use the vault CLI.", type="procedure")
    assert shared.record is not None
    with pytest.raises(Forbidden):
        mem.record_outcome(ctx, shared.record.id, True)


def test_recall_ranks_the_reliable_procedure_first(mem: Engram, ctx: Context) -> None:
    good = _procedure(mem, ctx, "To restart the payments worker, drain the queue first.")
    bad = _procedure(mem, ctx, "To restart the payments worker, kill the pod directly.")
    for _ in range(6):
        mem.record_outcome(ctx, good, True)
        mem.record_outcome(ctx, bad, False)
    result = mem.recall(ctx, "How do I restart the payments worker?", budget=BIG)
    ranked = [i for i in result.ids if i in (good, bad)]
    assert ranked == [good, bad]
    parts = {item.record.id: item.components for item in result.items}
    assert parts[good]["outcome"] == pytest.approx(7 / 8)
    assert parts[bad]["outcome"] == pytest.approx(1 / 8)
    mem.record_outcome(ctx, bad, True)  # outcomes move the order, they never filter
    assert bad in mem.recall(ctx, "How do I restart the payments worker?", budget=BIG).ids


def test_episodes_report_outcomes_once(mem: Engram, ctx: Context) -> None:
    deploy = _procedure(mem, ctx, "To deploy, run the blue-green script.")
    write_episodes(mem, ctx, ["Deploy of v2.3 with the blue-green script."], T0,
                   value={"procedure_id": deploy, "success": True, "reward": 0.5})  # fmt: skip
    write_episodes(mem, ctx, ["The blue-green deploy failed: the canary crashed."],
                   T0 + timedelta(hours=2), source={"derived_from": [deploy]})  # fmt: skip
    write_episodes(mem, ctx, ["Ran the deploy again; it worked but an error was logged."],
                   T0 + timedelta(hours=4), source={"derived_from": [deploy]})  # fmt: skip
    report = mem.consolidate("acme", "u1", now=LATER)
    assert report.outcomes == 2  # the third states both a success and an error: neither
    assert mem.consolidate("acme", "u1", now=LATER).outcomes == 0
    stats = mem.record_outcome(ctx, deploy, True)
    assert (stats.successes, stats.failures) == (2, 1)
    assert stats.mean_reward == pytest.approx(0.5)


def test_forgetting_a_procedure_takes_its_counts_with_it(mem: Engram, ctx: Context) -> None:
    deploy = _procedure(mem, ctx, "To deploy, run the blue-green script.")
    mem.record_outcome(ctx, deploy, True)
    assert mem.forget(ctx, deploy).verified
    assert table_rows(mem.store, "procedure_stats") == []
    other = _procedure(mem, ctx, "To roll back, redeploy the previous image tag.")
    mem.record_outcome(ctx, other, False)
    assert mem.erase_subject("acme", "u1").verified
    assert table_rows(mem.store, "procedure_stats") == []
