"""A merged near-duplicate is a version of its survivor: forgetting either deletes both.

Consolidation's merge (``lifecycle.consolidate.merge``) supersedes the weaker
fact by the stronger one without the survivor naming it (``supersedes`` holds
the survivor's own previous version). Forget walks the version links both ways
(``Store.history``), so neither the survivor nor the merged fact outlives a
forget of the other, and nothing else is touched. The merged fact's share
copies are retracted when it is merged away.
"""

from __future__ import annotations

import dataclasses

import pytest
from tests.conftest import T0

from engram import Context, Engram, Record, Status
from engram.lifecycle.consolidate.merge import Merge, merge
from engram.store.predicate import Subject

CTX = Context(tenant_id="acme", user_id="u1")
FIRST = "The user lives in Berlin with two cats named Tom and Jerry"
SECOND = "User lives in Berlin, has two cats called Tom and Jerry"
OTHER = "The user's favourite editor is Helix"


def _fact(mem: Engram, text: str, ctx: Context = CTX) -> Record:
    record = mem.remember(ctx, text, type="fact").record
    assert record is not None
    return record


def _merged(mem: Engram, ctx: Context = CTX) -> tuple[Record, Record]:
    """Two near-duplicates of ``ctx``, the second merged into the first: (kept, loser)."""
    kept, loser = _fact(mem, FIRST, ctx), _fact(mem, SECOND, ctx)
    assert merge(mem.store, Subject("acme", "u1"), Merge(kept, loser), "consolidation", T0)
    assert mem.get(ctx, loser.id).superseded_by == kept.id
    return kept, loser


def _left(mem: Engram) -> set[str]:
    return {r.id for r in mem.list(CTX, status=None)}


@pytest.mark.parametrize("target", ["kept", "loser"])
def test_forgetting_either_side_of_a_merge_deletes_both(mem: Engram, target: str) -> None:
    other = _fact(mem, OTHER)
    kept, loser = _merged(mem)
    receipt = mem.forget(CTX, kept.id if target == "kept" else loser.id)
    assert set(receipt.deleted) == {kept.id, loser.id}
    assert receipt.verified, receipt.failed
    assert _left(mem) == {other.id}


def test_forget_follows_a_merge_into_a_corrected_fact(mem: Engram) -> None:
    kept, loser = _merged(mem)
    newer = mem.correct(CTX, kept.id, "The user lives in Berlin with three cats").record
    assert newer is not None
    history = {r.id for r in mem.history(CTX, loser.id)}
    assert history == {kept.id, loser.id, newer.id}
    receipt = mem.forget(CTX, newer.id)
    assert set(receipt.deleted) == {kept.id, loser.id, newer.id}
    assert _left(mem) == set()


def test_merging_a_shared_fact_away_retracts_its_copies(mem: Engram) -> None:
    coder = dataclasses.replace(CTX, agent_id="coder")
    mem.grant_share("acme", "coder", "reviewer", ["fact"])
    kept = _fact(mem, FIRST)
    loser = mem.remember(coder, SECOND, type="fact", agent_scope="agent").record
    assert loser is not None
    (copy,) = mem.share(coder, [loser.id], "reviewer").shared
    assert merge(mem.store, Subject("acme", "u1"), Merge(kept, loser), "consolidation", T0)
    reviewer = dataclasses.replace(CTX, agent_id="reviewer")
    assert mem.get(reviewer, copy).status == Status.RETRACTED
    receipt = mem.forget(coder, kept.id)
    assert set(receipt.deleted) == {kept.id, loser.id}
    assert set(receipt.derived) == {copy}
    assert mem.list(reviewer, status=None) == []
