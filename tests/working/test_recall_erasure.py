"""Recall shows the caller's own live working items, and erasing a subject erases them."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from tests.working.conftest import OpenWorking

from engram import Budget, Context, Engram, FrozenClock

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1", task_id="t1")
QUERY = "what is the next step of the migration?"


def _block(mem: Engram, ctx: Context) -> str:
    return mem.recall(ctx, QUERY, budget=Budget(max_items=10, max_tokens=2000)).prompt


def test_recall_shows_the_callers_task_and_session_items(wmem: Engram) -> None:
    wmem.working(CTX).set("next_step", "run migration 0016 on staging")
    wmem.working(CTX, kind="session").set("mood", {"user": "in a hurry"})
    result = wmem.recall(CTX, QUERY, budget=Budget(max_items=10, max_tokens=2000))
    assert 'section name="task_state"' in result.prompt
    assert "next_step: run migration 0016 on staging" in result.prompt
    assert 'mood: {"user": "in a hurry"}' in result.prompt
    assert 'scope="task:t1"' in result.prompt
    assert 'scope="session:s1"' in result.prompt
    assert all(i.record.source.kind.value == "tool" for i in result.items)
    assert "working" in result.trace.channels


def test_recall_never_shows_another_scopes_items(wmem: Engram) -> None:
    wmem.working(CTX).set("next_step", "run migration 0016 on staging")
    for other in (dataclasses.replace(CTX, task_id="t2"),
                  dataclasses.replace(CTX, task_id=None, session_id="s2"),
                  dataclasses.replace(CTX, agent_id="reviewer"),
                  dataclasses.replace(CTX, user_id="u2"),
                  dataclasses.replace(CTX, tenant_id="other")):  # fmt: skip
        assert "migration 0016" not in _block(wmem, other), other


def test_recall_leaves_out_expired_items(
    open_working_mem: OpenWorking, backend: str, clock: FrozenClock
) -> None:
    mem = open_working_mem()
    mem.working(CTX).set("next_step", "run migration 0016 on staging", ttl=0.2)
    assert "migration 0016" in _block(mem, CTX)
    if backend == "sqlite":
        clock.advance(seconds=1)
    else:
        import time

        time.sleep(0.4)
    assert "migration 0016" not in _block(mem, CTX)


def test_stored_task_state_and_working_items_appear_together(wmem: Engram) -> None:
    wmem.remember(
        CTX, "Task state: the schema diff is reviewed", type="task_state", scope="task:t1"
    )
    wmem.working(CTX).set("next_step", "run migration 0016 on staging")
    block = _block(wmem, CTX)
    assert "schema diff is reviewed" in block
    assert "migration 0016" in block


def test_recall_with_a_custom_type_set_without_task_state_skips_working_items(
    open_working_mem: OpenWorking,
) -> None:
    mem = open_working_mem()
    mem.working(CTX).set("next_step", "run migration 0016")
    custom = dataclasses.replace(mem.config.working, recall_type="fact")
    mem.config = dataclasses.replace(mem.config, working=custom)  # not a working type
    assert "migration 0016" not in _block(mem, CTX)


def test_erase_subject_clears_every_scope_of_that_user_only(wmem: Engram) -> None:
    other_user = dataclasses.replace(CTX, user_id="u2")
    other_tenant = dataclasses.replace(CTX, tenant_id="beta")
    for ctx in (CTX, dataclasses.replace(CTX, agent_id=None, task_id="t9"), other_user,
                other_tenant):  # fmt: skip
        wmem.working(ctx).set("next_step", f"secret plan of {ctx.user_id}@{ctx.tenant_id}")
    wmem.working(CTX, kind="session").set("mood", "calm")
    receipt = wmem.erase_subject("acme", "u1")
    assert receipt.working == 3
    assert receipt.verified
    assert "working memory" in receipt.checked
    assert wmem.working(CTX).list() == []
    assert wmem.working(CTX, kind="session").list() == []
    assert wmem.working_store.subject_residue("acme", "u1") == 0
    assert len(wmem.working(other_user).list()) == 1
    assert len(wmem.working(other_tenant).list()) == 1


def test_erasure_leaves_no_working_bytes_in_the_sqlite_file(
    open_mem: OpenWorking, tmp_path: Path
) -> None:
    mem = open_mem(f"sqlite:///{tmp_path}/erase.db")
    marker = "needle-7f3a9c-working-memory-value"
    mem.working(CTX).set("plan", marker, ttl=timedelta(hours=1))
    mem.close()
    mem = open_mem(f"sqlite:///{tmp_path}/erase.db")
    receipt = mem.erase_subject("acme", "u1")
    assert receipt.working == 1
    mem.close()
    for path in tmp_path.glob("erase.db*"):
        assert marker.encode() not in path.read_bytes(), path.name


def test_deleting_an_item_drops_the_recall_caches_that_held_its_text(wmem: Engram) -> None:
    """Deleting means gone: a recall cached the item's text (rerank stems); delete and
    clear drop those caches too."""
    from engram.recall import rerank

    wm = wmem.working(CTX)
    wm.set("note", "the quokka code is QUOKKA4417")
    wmem.recall(CTX, "what is the quokka code?")
    assert rerank._stems.cache_info().currsize > 0
    assert wm.delete("note")
    assert rerank._stems.cache_info().currsize == 0
    wm.set("other", "the wombat code is WOMBAT1")
    wmem.recall(CTX, "what is the wombat code?")
    assert wm.clear() == 1
    assert rerank._stems.cache_info().currsize == 0


def test_working_item_ids_differ_between_users_of_the_same_session_and_key(
    wmem: Engram,
) -> None:
    other = dataclasses.replace(CTX, user_id="someone-else")
    wmem.working(CTX).set("goal", "ship it")
    wmem.working(other).set("goal", "ship it")
    mine = wmem.recall(CTX, "what is the goal?")
    theirs = wmem.recall(other, "what is the goal?")
    ids_mine = {i.record.id for i in mine.items if i.record.id.startswith("wm_")}
    ids_theirs = {i.record.id for i in theirs.items if i.record.id.startswith("wm_")}
    assert ids_mine
    assert ids_theirs
    assert not ids_mine & ids_theirs


def test_a_working_store_without_its_erasure_methods_is_refused() -> None:
    from engram.errors import ConfigError
    from engram.working.config import WorkingConfig
    from engram.working.open import open_working

    class Half:
        def put(self) -> None: ...
        def fetch(self) -> None: ...
        def items(self) -> None: ...
        def remove(self) -> None: ...
        def clear(self) -> None: ...

    with pytest.raises(ConfigError):
        open_working(Half(), None, WorkingConfig())
