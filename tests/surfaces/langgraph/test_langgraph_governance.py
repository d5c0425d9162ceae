"""What Engram adds under the LangGraph store API, on every backend: identity from
the constructor (users, tenants, agents never widened by a namespace), namespaces
placed in Engram scopes, TTLs as exact expiry, and bad input refused with nothing
stored."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp

import engram
from engram import ConfigError, Context, Engram, Forbidden, InvalidArgument
from engram.surfaces.langgraph import EngramStore, InvalidNamespace
from engram.surfaces.langgraph.namespaces import engram_key

ALICE = ("memories", "alice")
BOB = ("memories", "bob")


def _store(mem: Engram, tenant: str = "acme", **options: Any) -> EngramStore:
    options.setdefault("users", {"alice", "bob"})
    options.setdefault("user_at", 1)
    return EngramStore(mem, tenant, **options)


# -- identity ------------------------------------------------------------------------


def test_users_never_see_each_others_items(mem: Engram) -> None:
    store = _store(mem)
    store.put(ALICE, "diet", {"memory": "Alice is vegetarian"})
    store.put(BOB, "diet", {"memory": "Bob eats everything"})
    assert store.get(BOB, "diet").value == {"memory": "Bob eats everything"}  # type: ignore[union-attr]
    assert [h.namespace for h in store.search(BOB)] == [BOB]
    assert [h.namespace for h in store.search(BOB, query="vegetarian diet")] in ([], [BOB])
    bob_only = _store(mem, users={"bob"})
    assert bob_only.search(("memories",)) == bob_only.search(BOB)
    assert bob_only.list_namespaces() == [BOB]


def test_a_namespace_naming_a_user_outside_the_set_is_forbidden(mem: Engram) -> None:
    store = _store(mem)
    carol = ("memories", "carol")
    for call in (lambda: store.put(carol, "k", {"memory": "hello there carol"}),
                 lambda: store.get(carol, "k"), lambda: store.delete(carol, "k"),
                 lambda: store.search(carol), lambda: store.search(carol, query="x"),
                 lambda: store.list_namespaces(prefix=carol)):  # fmt: skip
        with pytest.raises(Forbidden, match="carol"):
            call()
    with pytest.raises(InvalidNamespace, match="user label at position 1"):
        store.put(("memories",), "k", {"memory": "no user label"})


def test_tenants_and_agents_are_apart(mem: Engram) -> None:
    acme, other = _store(mem, "acme"), _store(mem, "globex")
    acme.put(ALICE, "k", {"memory": "Alice works at acme"})
    assert other.get(ALICE, "k") is None
    assert other.search(("memories",)) == []
    assert other.list_namespaces() == []
    planner, critic = _store(mem, agent_id="planner"), _store(mem, agent_id="critic")
    planner.put(ALICE, "plan", {"memory": "Plan the launch for Friday"})
    assert planner.get(ALICE, "plan") is not None
    assert critic.get(ALICE, "plan") is None
    assert critic.search(ALICE, query="launch plan") == []
    assert acme.get(ALICE, "plan") is None  # an agent's own memory, not the user's


def test_memories_written_through_the_sdk_are_not_items(mem: Engram) -> None:
    mem.remember(Context(tenant_id="acme", user_id="alice"), "Alice lives in Lisbon.")
    mem.remember_global("acme", "The office closes at six.")
    store = _store(mem)
    assert store.search(ALICE) == []
    assert store.search(ALICE, query="where does Alice live") == []
    assert store.list_namespaces() == []


def test_a_fixed_user_store_treats_every_namespace_as_a_folder(mem: Engram) -> None:
    store = EngramStore(mem, "acme", user_id="alice")
    store.put(("notes",), "k", {"memory": "Alice keeps notes"})
    store.put(("notes", "bob"), "k", {"memory": "a folder named bob, still Alice's"})
    assert store.list_namespaces() == [("notes",), ("notes", "bob")]
    assert _store(mem).search(BOB) == []  # nothing was written for the user bob


# -- scopes --------------------------------------------------------------------------


def test_a_scope_label_places_the_item_in_that_engram_scope(mem: Engram) -> None:
    store = _store(mem, project_id="lunest")
    store.put((*ALICE, "project:lunest"), "db", {"memory": "Lunest stores data in Postgres"})
    ctx = Context(tenant_id="acme", user_id="alice", project_id="lunest")
    (record,) = [r for r in mem.list(ctx) if r.key == engram_key((*ALICE, "project:lunest"),
                                                                    "db")]  # fmt: skip
    assert record.scope == "project:lunest"
    recalled = mem.recall(ctx, "which database does lunest use")
    assert record.id in recalled.ids
    elsewhere = Context(tenant_id="acme", user_id="alice", project_id="other")
    assert record.id not in mem.recall(elsewhere, "which database does lunest use").ids
    assert [h.key for h in store.search(ALICE)] == ["db"]


def test_a_scope_label_the_store_was_not_opened_for_is_refused(mem: Engram) -> None:
    store = _store(mem, project_id="lunest")
    with pytest.raises(InvalidNamespace, match="project:other"):
        store.put((*ALICE, "project:other"), "k", {"memory": "somewhere else"})
    with pytest.raises(InvalidNamespace, match="at most one"):
        store.put((*ALICE, "project:lunest", "project:lunest"), "k", {"memory": "twice"})
    with pytest.raises(InvalidNamespaceError):  # LangGraph's own class catches it too
        store.get((*ALICE, "session:s9"), "k")


# -- TTL -----------------------------------------------------------------------------


def test_an_item_past_its_ttl_is_never_returned(mem: Engram, clock: engram.FrozenClock) -> None:
    store = _store(mem)
    store.put(ALICE, "temp", {"memory": "Alice is at the dentist this afternoon"}, ttl=5)
    store.put(ALICE, "kept", {"memory": "Alice has a dentist in Lisbon"})
    clock.advance(minutes=4)
    assert store.get(ALICE, "temp", refresh_ttl=False) is not None
    clock.advance(minutes=2)
    assert store.get(ALICE, "temp") is None
    assert [h.key for h in store.search(ALICE)] == ["kept"]
    assert "temp" not in [h.key for h in store.search(ALICE, query="dentist this afternoon")]
    store.put(ALICE, "temp", {"memory": "Alice is at the dentist this afternoon"}, ttl=5)
    assert store.get(ALICE, "temp") is not None  # a put after expiry stores it again


def test_reads_refresh_the_ttl_unless_told_not_to(mem: Engram, clock: engram.FrozenClock) -> None:
    store = _store(mem)
    store.put(ALICE, "temp", {"memory": "Alice waits for the plumber today"}, ttl=10)
    clock.advance(minutes=8)
    assert store.get(ALICE, "temp") is not None  # refreshes: expires at +18
    clock.advance(minutes=8)
    assert store.search(ALICE, refresh_ttl=False)  # does not refresh
    clock.advance(minutes=3)
    assert store.get(ALICE, "temp") is None
    store.put(ALICE, "temp", {"memory": "Alice waits for the plumber today"}, ttl=10)
    clock.advance(minutes=8)
    store.put(ALICE, "temp", {"memory": "Alice waits for the plumber today"}, ttl=10)
    clock.advance(minutes=8)
    assert store.get(ALICE, "temp") is not None  # the same put again restarted it


def test_a_recall_never_stretches_a_ttl(mem: Engram, clock: engram.FrozenClock) -> None:
    store = _store(mem)
    store.put(ALICE, "temp", {"memory": "Alice parked on level three"}, ttl=2)
    clock.advance(minutes=1)
    ctx = Context(tenant_id="acme", user_id="alice")
    assert mem.recall(ctx, "where did Alice park").ids  # Engram's own read path touches it
    mem.flush()
    clock.advance(minutes=2)
    assert store.get(ALICE, "temp") is None


def test_the_ttl_config_sets_the_default_and_the_refresh(
    mem: Engram, clock: engram.FrozenClock
) -> None:
    store = _store(mem, ttl={"default_ttl": 3, "refresh_on_read": False})
    store.put(ALICE, "temp", {"memory": "Alice is on a call"})
    store.put(ALICE, "kept", {"memory": "Alice is an engineer"}, ttl=None)
    clock.advance(minutes=2)
    assert store.get(ALICE, "temp") is not None  # no refresh by default
    clock.advance(minutes=2)
    assert store.get(ALICE, "temp") is None
    assert store.get(ALICE, "kept") is not None
    with pytest.raises(ConfigError, match="sweep"):
        _store(mem, ttl={"sweep_interval_minutes": 5})
    with pytest.raises(ConfigError, match="embedder"):
        _store(mem, index={"dims": 8, "embed": lambda texts: [[0.0] * 8 for _ in texts]})


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [("memories", ""), ("memories", "alice", "a.b"),
                                       (), ("langgraph", "alice"), ("memories", 7)])  # fmt: skip
def test_bad_namespaces_are_refused(mem: Engram, namespace: tuple[Any, ...]) -> None:
    store = _store(mem)
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(namespace, "k", {"memory": "x y z"})])
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "k", {"memory": "x y z"})
    assert store.list_namespaces() == []


@pytest.mark.parametrize(("value", "why"), [
    (["not", "a", "dict"], "must be a dict"), ("text", "must be a dict"),
    ({1: "x"}, "keys must be strings"), ({"n": math.nan}, "value"),
    ({"memory": "Write to alice.smith@fastmail.fm"}, "consent"),
    ({"memory": "ok thanks"}, "refused"), ({"memory": "x" * 9000}, "bytes"),
])  # fmt: skip
def test_bad_values_get_a_clear_error(mem: Engram, value: Any, why: str) -> None:
    store = _store(mem)
    with pytest.raises(InvalidArgument, match=why):
        store.put(ALICE, "k", value)
    assert store.get(ALICE, "k") is None


def test_a_consent_basis_lets_personal_data_in(mem: Engram) -> None:
    store = _store(mem, consent_basis="contract")
    store.put(ALICE, "mail", {"memory": "Write to alice.smith@fastmail.fm"})
    assert store.get(ALICE, "mail") is not None


@pytest.mark.parametrize("ttl", [0, -1, math.inf, "5", True])
def test_a_bad_ttl_is_refused(mem: Engram, ttl: Any) -> None:
    with pytest.raises(InvalidArgument, match="ttl"):
        _store(mem).put(ALICE, "k", {"memory": "Alice likes tea"}, ttl=ttl)


def test_a_refused_put_leaves_the_whole_batch_unwritten(mem: Engram) -> None:
    store = _store(mem)
    store.put(ALICE, "tea", {"memory": "Alice drinks green tea"})
    secret = {"memory": "the deploy key is sk-abcdefghijklmnopqrstuvwxyz0123456789"}
    with pytest.raises(InvalidArgument, match="secret"):
        store.batch([PutOp(ALICE, "tea", {"memory": "Alice drinks black tea"}),
                     PutOp(BOB, "new", {"memory": "Bob likes jazz"}),
                     PutOp(ALICE, "key", secret)])  # fmt: skip
    tea = store.get(ALICE, "tea")
    assert tea is not None
    assert tea.value == {"memory": "Alice drinks green tea"}
    assert store.get(BOB, "new") is None
    assert store.get(ALICE, "key") is None
    assert mem.audit_verify().ok


def test_bad_searches_and_identities_are_refused(mem: Engram) -> None:
    store = _store(mem)
    with pytest.raises(InvalidArgument, match="operator"):
        store.search(ALICE, filter={"n": {"$in": [1]}})
    with pytest.raises(InvalidArgument, match="limit"):
        store.search(ALICE, limit=-1)
    with pytest.raises(InvalidArgument, match="not a LangGraph store operation"):
        store.batch([GetOp(ALICE, "k"), "get"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="exactly one"):
        EngramStore(mem, "acme")
    with pytest.raises(InvalidArgument, match="exactly one"):
        EngramStore(mem, "acme", user_id="alice", users={"bob"})
    with pytest.raises(InvalidArgument, match="collection"):
        EngramStore(mem, "acme", users="alice")
    with pytest.raises(InvalidArgument):
        EngramStore(mem, "", user_id="alice")
    with pytest.raises(ConfigError):
        EngramStore(mem, "acme", user_id="alice", type="no-such-type")


# -- concurrent writers --------------------------------------------------------------


def test_concurrent_puts_of_one_item_leave_one_current_version(
    shared_url: str, open_mem: Callable[..., Engram]
) -> None:
    stores = [_store(open_mem(shared_url)) for _ in range(2)]
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(8):
                stores[n].put(ALICE, "seat", {"memory": f"writer {n} says seat {i}"}, ttl=60)
                stores[n].put(ALICE, f"own-{n}-{i}", {"memory": f"writer {n} note {i}"})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    reader = stores[0]
    item = reader.get(ALICE, "seat")
    assert item is not None
    assert item.value["memory"] in {"writer 0 says seat 7", "writer 1 says seat 7"}
    ctx = Context(tenant_id="acme", user_id="alice")
    key = engram_key(ALICE, "seat")
    versions = [r for r in reader.memory.list(ctx, status=None, limit=1000) if r.key == key]
    assert [r.status.value for r in versions].count("active") == 1
    assert len(versions) == 16
    assert len(reader.search(ALICE, limit=100)) == 17
    assert reader.memory.audit_verify().ok
