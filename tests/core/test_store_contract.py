"""The storage contract on SQLite: the factory, the protocols, and the write locks."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path

import pytest

from engram import Context, Engram, Status
from engram.config import Config, PostgresConfig, SQLiteConfig, StoreConfig
from engram.errors import ConfigError, InvalidArgument
from engram.store import contract
from engram.store.contract import Audit, Maintenance, Store
from engram.store.open import open_store
from engram.store.predicate import OwnerSlot, Visibility
from engram.store.url import scheme_of


def _members(protocol: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(protocol) if not name.startswith("_")}


def test_open_store_gives_a_store_with_every_method_of_both_protocols(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db", StoreConfig())
    try:
        missing = {name for name in _members(Store) | _members(Maintenance)
                   if not hasattr(store, name)}  # fmt: skip
        assert missing == set()
    finally:
        store.close()


def test_schemes_dispatch_to_their_backend() -> None:
    assert scheme_of("sqlite:///x.db") == "sqlite"
    assert scheme_of("x.db") == "sqlite"
    assert scheme_of("postgresql://u@h/db") == "postgresql"
    assert scheme_of("postgres://u@h/db") == "postgresql"
    assert scheme_of("postgresql+psycopg://u@h/db") == "postgresql"
    with pytest.raises(ConfigError, match="unsupported store URL scheme 'mysql'"):
        open_store("mysql://u@h/db")


def test_a_postgresql_url_without_its_backend_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "engram.store.postgres", None)  # import fails
    with pytest.raises(ConfigError, match="PostgreSQL backend"):
        open_store("postgresql://engram@localhost/engram")
    with pytest.raises(ConfigError, match="PostgreSQL backend"):
        Engram.open("postgresql://engram@localhost/engram", embedder="hashing")


def test_backend_settings_are_checked() -> None:
    with pytest.raises(ConfigError):
        SQLiteConfig(overlapped_probes=frozenset({"key"}))
    with pytest.raises(ConfigError):
        SQLiteConfig(synchronous="sometimes")
    with pytest.raises(ConfigError):
        PostgresConfig(min_connections=4, max_connections=2)
    with pytest.raises(ConfigError):
        PostgresConfig(hnsw_m=16, hnsw_ef_construction=8)
    with pytest.raises(ConfigError):
        PostgresConfig(text_search="no such; config")


def _compares(sql: str, column: str, param: str) -> bool:
    """``sql`` compares ``column`` with the parameter ``param`` (either backend's style)."""
    return any(f"{column} = {p}" in sql for p in (f":{param}", f"%({param})s"))


def test_keyed_and_deduplicated_writes_lock_their_slot_before_reading_it(
    mem: Engram, ctx: Context
) -> None:
    events: list[str] = []
    store = mem.store
    locked = store.lock_slot

    def lock_slot(slot: OwnerSlot, key: str) -> None:
        events.append(f"lock {key.split(':', 1)[0]}")
        locked(slot, key)

    store.lock_slot = lock_slot  # type: ignore[method-assign]
    store.tracer = lambda sql, params: events.append(
        "read key" if _compares(sql, "r.key", "key")
        else "read hash" if _compares(sql, "content_hash", "hash")
        else "read both" if "r.key = ANY(%(keys)s" in sql and "content_hash = ANY(" in sql
        else "other"
    )  # fmt: skip
    try:
        mem.remember(ctx, "The staging database is Postgres 16.", type="fact",
                     key="staging.db", value="Postgres 16")  # fmt: skip
    finally:
        store.tracer = None
        mem.close()
    reads = [e for e in events if e != "other"]
    assert reads[:2] == ["lock key", "lock hash"]  # the batch's sorted pass
    # PostgreSQL reads both in one statement (``postgres.slot_batch``)
    pg = type(store).__module__.startswith("engram.store.postgres")
    both = ["read both"] if pg else ["read key", "read hash"]
    assert reads[2:] == ["lock key", "lock hash", *both]


def test_a_batch_takes_every_slot_lock_sorted_before_its_first_read(
    mem: Engram, ctx: Context
) -> None:
    """Two batches naming the same keys in opposite orders must lock in one order,
    or a backend with concurrent writers deadlocks them against each other."""
    events: list[str] = []
    store = mem.store
    locked = store.lock_slot

    def lock_slot(slot: OwnerSlot, key: str) -> None:
        events.append(key)
        locked(slot, key)

    store.lock_slot = lock_slot  # type: ignore[method-assign]
    store.tracer = lambda sql, params: events.append("read") if "FROM records" in sql else None
    items = [
        {"content": f"Service {name} runs on port {port}.", "type": "fact",
         "key": f"svc.{name}", "value": str(port)}
        for name, port in (("zeta", 9), ("alpha", 7), ("mid", 8))
    ]  # fmt: skip
    try:
        mem.remember_many(ctx, items)
    finally:
        store.tracer = None
        mem.close()
    assert events.index("read") >= 6
    first = events[:6]
    assert first[:3] == ["key:svc.alpha", "key:svc.mid", "key:svc.zeta"]
    assert first[3:] == sorted(first[3:])
    assert all(k.startswith("hash:") for k in first[3:])


def test_lock_slot_outside_a_transaction_is_refused(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/o.db")
    try:
        with pytest.raises(InvalidArgument):
            store.lock_slot(OwnerSlot("acme", "u1", "", "user"), "key:k")
        with store.transaction():
            store.lock_slot(OwnerSlot("acme", "u1", "", "user"), "key:k")  # a no-op here
    finally:
        store.close()


def test_audit_appends_through_apply_chain_and_verify(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from engram.store.audit import AuditEntry

    store = open_store(f"sqlite:///{tmp_path}/a.db")
    try:
        at = datetime(2024, 5, 1, tzinfo=UTC)
        done = store.apply(
            [
                Audit(AuditEntry(at, "acme", None, "admin", "NOTE", [], "a")),
                Audit(AuditEntry(at, "acme", "u1", "user:u1", "NOTE", [], "b")),
            ]
        )
        assert len(done.audit_ids) == 2
        assert done.audit_ids[0] != done.audit_ids[1]
        report = store.verify_audit()
        assert report.ok
        assert report.entries == 2
    finally:
        store.close()


def test_the_contract_module_names_what_it_exports() -> None:
    assert set(contract.__all__) <= set(dir(contract))
    assert Config().store.sqlite == SQLiteConfig()


def test_apply_inside_an_open_transaction_is_all_or_nothing(mem: Engram, ctx: Context) -> None:
    """A failing change undoes the batch's earlier changes even when the caller's
    transaction goes on (a savepoint), as the contract promises."""
    from engram.errors import EngramError
    from engram.scope import resolve
    from engram.store.contract import Insert, Listing

    try:
        kept = mem.remember(ctx, "The build server is ci-7.", type="fact").record
        assert kept is not None
        store = mem.store
        fresh = dataclasses.replace(kept, id="mem_fresh_one", content="half applied change")
        with store.transaction(), pytest.raises(EngramError):
            store.apply([Insert(fresh), Insert(kept)])  # the second: a duplicate id
        vis = Visibility.of(resolve(ctx))
        assert [r.content for r in store.listing(vis, Listing())] == [kept.content]
        assert store.read(vis, ["mem_fresh_one"]) == []
    finally:
        mem.close()


def test_an_update_never_reaches_another_tenants_record(mem: Engram, ctx: Context) -> None:
    from engram.errors import StoreError
    from engram.store.contract import Update

    try:
        theirs = mem.remember(ctx, "The vault code hint is a bird.", type="fact").record
        assert theirs is not None
        forged = dataclasses.replace(theirs, tenant_id="intruder", status=Status.RETRACTED)
        with pytest.raises(StoreError, match="no record"):
            mem.store.apply([Update(forged)])
        assert mem.get(ctx, theirs.id).status == Status.ACTIVE
    finally:
        mem.close()


def test_a_slot_probe_reads_only_the_callers_tenant_and_user(mem: Engram, ctx: Context) -> None:
    from engram.errors import EngramError
    from engram.store.contract import SlotProbe

    try:
        held = mem.remember(ctx, "The PIN hint is a river.", type="fact", key="pin.hint",
                            value="river").record  # fmt: skip
        assert held is not None
        theirs = OwnerSlot(held.tenant_id, held.user_id or "", held.agent_id or "", held.scope)
        probe = SlotProbe(theirs, ("active",), key="pin.hint")
        outsider = Visibility("other-tenant", "mallory", "", (None,) * 4)
        answer = mem.store.candidates(outsider, [probe])[0]
        assert isinstance(answer, EngramError)
        own = mem.store.candidates(theirs.visibility, [probe])[0]
        assert not isinstance(own, EngramError)
        assert [r.key for r, _ in own] == ["pin.hint"]
    finally:
        mem.close()
