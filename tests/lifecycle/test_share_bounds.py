"""A share copy is bounded by its original: never longer lived, never another user's.

A copy's retention counts from the share, so a copy of an original written days
earlier would outlive it; the share cuts the copy's ``expires_at`` to the
original's. The idempotency check (a memory already shared to the agent) only
counts a copy of the original's own user.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from tests.conftest import T0

from engram import Authority, Context, Engram, Source, SourceKind
from engram.ids import new_id
from engram.lifecycle.grants import share_ref
from engram.store.contract import Insert

CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder")
REVIEWER = dataclasses.replace(CODER, agent_id="reviewer")
DEMO = "The sprint demo is scheduled in room 4B"


@pytest.fixture
def granted(mem: Engram) -> Engram:
    mem.grant_share("acme", "coder", "reviewer", ["fact"])
    return mem


def test_a_copy_never_outlives_its_original(granted: Engram) -> None:
    mem = granted
    original = mem.remember(CODER, DEMO, agent_scope="agent", retention="short_term",
                            now=T0 - timedelta(days=5)).record  # fmt: skip
    assert original is not None
    assert original.expires_at is not None
    (copy_id,) = mem.share(CODER, [original.id], "reviewer", now=T0).shared
    copy = mem.get(REVIEWER, copy_id)
    assert copy.expires_at == original.expires_at
    later = original.expires_at + timedelta(hours=1)
    assert original.id not in mem.recall(CODER, "where is the sprint demo", now=later).ids
    assert copy_id not in mem.recall(REVIEWER, "where is the sprint demo", now=later).ids


def test_a_fresh_original_keeps_the_copys_own_retention(granted: Engram) -> None:
    mem = granted
    original = mem.remember(CODER, DEMO, agent_scope="agent", retention="short_term",
                            now=T0).record  # fmt: skip
    assert original is not None
    (copy_id,) = mem.share(CODER, [original.id], "reviewer", now=T0).shared
    assert mem.get(REVIEWER, copy_id).expires_at == original.expires_at


def test_a_copy_of_another_user_does_not_count_as_already_shared(granted: Engram) -> None:
    mem = granted
    original = mem.remember(CODER, DEMO, agent_scope="agent").record
    assert original is not None
    stray = original.replace(
        id=new_id(), user_id="u2", agent_id="reviewer", authority=Authority.SHARED,
        source=Source(SourceKind.SHARE, share_ref(original.id, "coder"), (original.id,)),
    )  # fmt: skip
    mem.store.apply([Insert(stray)])
    (item,) = mem.share(CODER, [original.id], "reviewer").items
    assert item.outcome == "shared", item
    assert item.copy_id not in (None, stray.id)
    assert mem.get(REVIEWER, item.copy_id).user_id == "u1"
