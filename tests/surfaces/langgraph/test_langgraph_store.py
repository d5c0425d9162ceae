"""LangGraph's store API on Engram, on every backend: put, get, search, delete,
list_namespaces and their async twins, versions, deletes and TTLs.

The same operations run against LangGraph's own ``InMemoryStore`` where its answer
is the reference (namespace listing, filters, pagination)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

import pytest
from langgraph.store.base import GetOp, Item, Op, PutOp, Result
from langgraph.store.memory import InMemoryStore

import engram
from engram import Context, Engram
from engram.surfaces.langgraph import EngramStore
from engram.surfaces.langgraph.namespaces import engram_key

ALICE = ("memories", "alice")


@pytest.fixture
def store(mem: Engram) -> EngramStore:
    """A store for tenant acme acting for alice and bob (user label at position 1)."""
    return EngramStore(mem, "acme", users={"alice", "bob"}, user_at=1, project_id="x")


def _versions(mem: Engram, user: str, namespace: tuple[str, ...], key: str) -> list[Any]:
    ctx = Context(tenant_id="acme", user_id=user, project_id="x")
    wanted = engram_key(namespace, key)
    return [r for r in mem.list(ctx, status=None, limit=1000) if r.key == wanted]


def test_put_then_get_returns_the_item_with_its_times(
    store: EngramStore, clock: engram.FrozenClock
) -> None:
    created = clock.now()
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea", "cups": 2})
    item = store.get(ALICE, "tea")
    assert item is not None
    assert (item.namespace, item.key) == (ALICE, "tea")
    assert item.value == {"memory": "Alice drinks green tea", "cups": 2}
    assert item.created_at == item.updated_at == created
    assert store.get(ALICE, "coffee") is None
    assert store.get(("other", "alice"), "tea") is None  # another namespace, same key


def test_a_second_put_supersedes_and_keeps_the_first_creation_time(
    store: EngramStore, mem: Engram, clock: engram.FrozenClock
) -> None:
    created = clock.now()
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"})
    later = clock.advance(minutes=10)
    store.put(ALICE, "tea", {"memory": "Alice drinks black tea now"})
    item = store.get(ALICE, "tea")
    assert item is not None
    assert item.value == {"memory": "Alice drinks black tea now"}
    assert (item.created_at, item.updated_at) == (created, later)
    versions = _versions(mem, "alice", ALICE, "tea")
    assert sorted(r.status.value for r in versions) == ["active", "superseded"]
    newest = next(r for r in versions if r.status.value == "active")
    assert [r.content for r in mem.history(_ctx("alice"), newest.id)] == [
        "Alice drinks green tea", "Alice drinks black tea now"]  # fmt: skip


def test_the_same_put_twice_is_one_version(store: EngramStore, mem: Engram) -> None:
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"})
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"})
    assert len(_versions(mem, "alice", ALICE, "tea")) == 1


def test_delete_forgets_every_version(store: EngramStore, mem: Engram) -> None:
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"})
    store.put(ALICE, "tea", {"memory": "Alice drinks black tea"})
    store.delete(ALICE, "tea")
    assert store.get(ALICE, "tea") is None
    assert _versions(mem, "alice", ALICE, "tea") == []
    assert store.search(ALICE) == []
    store.delete(ALICE, "tea")  # deleting what is gone is a no-op
    store.put(ALICE, "tea", {"memory": "Alice drinks mint tea"})
    item = store.get(ALICE, "tea")
    assert item is not None
    assert item.value["memory"] == "Alice drinks mint tea"
    assert mem.audit_verify().ok


def test_search_with_a_query_is_recall_with_its_scores(store: EngramStore) -> None:
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea every morning"})
    store.put(ALICE, "car", {"memory": "Alice drives an old red bicycle to work"})
    store.put(("memories", "bob"), "tea", {"memory": "Bob drinks green tea too"})
    hits = store.search(ALICE, query="what tea does Alice drink in the morning")
    assert hits
    assert hits[0].key == "tea"
    assert all(h.namespace[:2] == ALICE for h in hits)
    assert all(isinstance(h.score, float) for h in hits)
    assert [h.score for h in hits] == sorted((h.score or 0.0 for h in hits), reverse=True)
    both = store.search(("memories",), query="green tea")
    assert {h.namespace for h in both} >= {ALICE, ("memories", "bob")}


def test_an_unindexed_item_is_found_by_key_and_listing_but_not_by_a_query(
    store: EngramStore,
) -> None:
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"}, index=False)
    assert store.get(ALICE, "tea") is not None
    assert [h.key for h in store.search(ALICE)] == ["tea"]
    assert store.search(ALICE, query="green tea") == []


def test_index_fields_choose_the_text_engram_embeds(store: EngramStore, mem: Engram) -> None:
    store.put(ALICE, "doc", {"title": "Quarterly plan", "body": {"text": "ship the store"}},
              index=["title", "body.text"])  # fmt: skip
    (record,) = _versions(mem, "alice", ALICE, "doc")
    assert record.content == "Quarterly plan\nship the store"
    store.put(ALICE, "plain", {"n": 1, "note": "x"})
    (plain,) = _versions(mem, "alice", ALICE, "plain")
    assert plain.content == '{"n":1,"note":"x"}'


def test_search_without_a_query_filters_and_pages_like_langgraph(
    store: EngramStore, clock: engram.FrozenClock
) -> None:
    reference = InMemoryStore()
    for n in range(7):
        clock.advance(seconds=1)
        value = {"memory": f"note number {n}", "n": n, "kind": "odd" if n % 2 else "even"}
        for target in (store, reference):
            target.put(ALICE, f"k{n}", value)
    for filt in ({"kind": "odd"}, {"n": {"$gte": 3}}, {"n": {"$gt": 1, "$lt": 5}},
                 {"kind": {"$ne": "odd"}}, {"n": {"$eq": 4}}, {"n": [1]}):  # fmt: skip
        ours = {h.key for h in store.search(ALICE, filter=filt, limit=100)}
        theirs = {h.key for h in reference.search(ALICE, filter=filt, limit=100)}
        assert ours == theirs, filt
    # A comparison with a missing field matches nothing (InMemoryStore raises TypeError).
    assert store.search(ALICE, filter={"missing": {"$gt": 0}}) == []
    newest = [h.key for h in store.search(ALICE, limit=3)]
    assert newest == ["k6", "k5", "k4"]
    assert [h.key for h in store.search(ALICE, limit=3, offset=3)] == ["k3", "k2", "k1"]
    assert all(h.score is None for h in store.search(ALICE))


def test_list_namespaces_matches_langgraphs_own_store(store: EngramStore) -> None:
    reference = InMemoryStore()
    spaces = [("memories", "alice"), ("memories", "alice", "notes"),
              ("memories", "alice", "notes", "deep"), ("memories", "bob", "notes"),
              ("docs", "alice", "v1"), ("memories", "alice", "project:x")]  # fmt: skip
    for namespace in spaces:
        for target in (store, reference):
            target.put(namespace, "k", {"memory": f"item in {'/'.join(namespace)}"})
    asks: list[dict[str, Any]] = [
        {}, {"prefix": ("memories",)}, {"prefix": ("memories", "alice")},
        {"suffix": ("notes",)}, {"prefix": ("memories", "*", "notes")},
        {"max_depth": 2}, {"prefix": ("memories",), "max_depth": 3},
        {"limit": 2}, {"limit": 2, "offset": 2}, {"suffix": ("*", "notes")},
    ]  # fmt: skip
    for ask in asks:
        assert store.list_namespaces(**ask) == reference.list_namespaces(**ask), ask


def test_async_twins_run_in_a_worker_thread(store: EngramStore) -> None:
    threads: list[int] = []

    class Watched(EngramStore):
        def batch(self, ops: Iterable[Op]) -> list[Result]:
            threads.append(threading.get_ident())
            return super().batch(ops)

    watched = Watched(store.memory, "acme", users={"alice", "bob"}, user_at=1)

    async def run() -> list[Any]:
        await watched.aput(ALICE, "tea", {"memory": "Alice drinks green tea"})
        got = await watched.aget(ALICE, "tea")
        found = await watched.asearch(ALICE, query="green tea")
        spaces = await watched.alist_namespaces(prefix=("memories",))
        await watched.adelete(ALICE, "tea")
        gone = await watched.aget(ALICE, "tea")
        return [got, found, spaces, gone]

    got, found, spaces, gone = asyncio.run(run())
    assert got is not None
    assert got.value == {"memory": "Alice drinks green tea"}
    assert [h.key for h in found] == ["tea"]
    assert spaces == [ALICE]
    assert gone is None
    assert threads
    assert threading.get_ident() not in threads


def test_a_batch_reads_before_its_puts_and_the_last_put_wins(store: EngramStore) -> None:
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"})
    results = store.batch([
        PutOp(ALICE, "tea", {"memory": "Alice drinks black tea"}),
        GetOp(ALICE, "tea"),
        PutOp(ALICE, "tea", {"memory": "Alice drinks oolong tea"}),
    ])  # fmt: skip
    assert results[0] is None
    assert isinstance(results[1], Item)
    assert results[1].value["memory"] == "Alice drinks green tea"
    item = store.get(ALICE, "tea")
    assert item is not None
    assert item.value["memory"] == "Alice drinks oolong tea"


def _ctx(user: str) -> Context:
    return Context(tenant_id="acme", user_id=user, project_id="x")
