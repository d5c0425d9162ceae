"""PostgresStore against the contract: reads, listing, history, and what ``apply``
writes (atomically, under the database's own rules)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pg_records import T0, later, make_record, vector_for

from engram.errors import StoreError
from engram.store import contract
from engram.store.audit import AuditEntry
from engram.store.postgres import ConstraintViolation
from engram.store.predicate import Tenant, Visibility
from engram.types import Status

VIS = Visibility("acme", "u1", "coder", ("session:s1", None, None, None))
ACTIVE = ("active",)


def test_insert_then_read_round_trips_every_field(store: Any) -> None:
    record = make_record("Ana prefers window seats", key="seat", expires_at=later(60),
                         derived_from=("01J0000000000000000000000A",))  # fmt: skip
    record = record.replace(value={"seat": "window"}, source=record.source, private=True)
    store.apply([contract.Insert(record, vector_for(record.content))])
    assert store.read(VIS, [record.id]) == [record]
    assert store.vectors(VIS, [record.id], record.embedding_model)[record.id].shape == (384,)


def test_read_keeps_the_order_asked_and_leaves_out_missing_ids(store: Any) -> None:
    first, second = make_record("one"), make_record("two")
    store.apply([contract.Insert(first), contract.Insert(second)])
    found = store.read(VIS, [second.id, "01J00000000000000000000000", first.id])
    assert [r.id for r in found] == [second.id, first.id]


def test_listing_is_newest_first_filters_type_status_and_pages(store: Any) -> None:
    records = [make_record(f"note {i}", at=later(i)) for i in range(5)]
    retracted = make_record("old", at=later(9), status=Status.RETRACTED)
    task = make_record("a task", at=later(10), type_name="task_state")
    store.apply([contract.Insert(r) for r in (*records, retracted, task)])
    page = store.listing(VIS, contract.Listing(ACTIVE, type_name="fact", limit=2, offset=1))
    assert [r.content for r in page] == ["note 3", "note 2"]
    everything = store.listing(VIS, contract.Listing())
    assert len(everything) == 7
    assert everything[0].id == task.id


def test_listing_judges_effective_status_at_a_time(store: Any) -> None:
    lasting = make_record("lasting")
    fleeting = make_record("fleeting", expires_at=later(30))
    store.apply([contract.Insert(lasting), contract.Insert(fleeting)])
    before = store.listing(VIS, contract.Listing(statuses=ACTIVE, at=later(29)))
    after = store.listing(VIS, contract.Listing(statuses=ACTIVE, at=later(31)))
    expired = store.listing(VIS, contract.Listing(statuses=("expired",), at=later(31)))
    assert {r.id for r in before} == {lasting.id, fleeting.id}
    assert [r.id for r in after] == [lasting.id]
    assert [r.id for r in expired] == [fleeting.id]


def test_history_walks_the_version_chain_both_ways(store: Any) -> None:
    v1 = make_record("tz Lisbon", key="tz", status=Status.SUPERSEDED)
    v2 = make_record("tz Berlin", key="tz", supersedes=v1.id, version=2, at=later(1))
    v1 = v1.replace(superseded_by=v2.id)
    store.apply([contract.Insert(v1), contract.Insert(v2)])
    assert [r.id for r in store.history(VIS, v1.id)] == [v1.id, v2.id]
    assert [r.id for r in store.history(VIS, v2.id)] == [v1.id, v2.id]


def test_update_place_touch_write_their_fields(store: Any) -> None:
    record = make_record("keeps", expires_at=T0 + timedelta(days=10))
    store.apply([contract.Insert(record)])
    store.apply([contract.Update(record.replace(status=Status.DISPUTED, confidence=0.4))])
    store.apply([contract.Place(record.replace(version=3, created_at=later(-5)))])
    store.apply([contract.Touch(VIS, (record.id,), later(100))])
    (now,) = store.read(VIS, [record.id])
    assert (now.status, now.confidence, now.version) == (Status.DISPUTED, 0.4, 3)
    assert now.created_at == later(-5)
    assert now.access_count == 1
    assert now.last_accessed_at == later(100)
    assert now.expires_at == later(100) + timedelta(days=365)  # long_term renewed


def test_a_failing_change_in_a_batch_leaves_nothing(store: Any) -> None:
    good = make_record("good")
    clash = make_record("clash")
    entry = AuditEntry(T0, "acme", "u1", "user:u1", "ADD", [good.id], "test")
    with pytest.raises(StoreError):
        store.apply([contract.Insert(good), contract.Audit(entry), contract.Insert(clash),
                     contract.Insert(clash)])  # fmt: skip
    assert store.read(VIS, [good.id, clash.id]) == []
    assert store.verify_audit().entries == 0


def test_one_active_uncontested_version_per_key_is_a_database_rule(store: Any) -> None:
    first = make_record("tz Lisbon", key="tz")
    store.apply([contract.Insert(first)])
    with pytest.raises(ConstraintViolation, match="records_one_active"):
        store.apply([contract.Insert(make_record("tz Berlin", key="tz"))])
    contested = make_record("tz Berlin", key="tz").replace(contested_with=first.id)
    store.apply([contract.Insert(contested)])  # a contested pair is allowed
    other_scope = make_record("tz Rome", key="tz", scope="session:s1")
    store.apply([contract.Insert(other_scope)])  # another slot
    assert len(store.read(VIS, [first.id, contested.id, other_scope.id])) == 3


def test_delete_forgets_and_refuses_a_new_version_of_the_deleted(store: Any) -> None:
    target, partner = make_record("gone"), make_record("partner")
    partner = partner.replace(contested_with=target.id)
    store.apply([contract.Insert(target), contract.Insert(partner)])
    applied = store.apply([contract.UnlinkContests(Tenant("acme"), (target.id,), later(1)),
                           contract.Delete(Tenant("acme"), (target.id,))])  # fmt: skip
    assert (applied.deleted, applied.unlinked) == (1, 1)
    assert store.read(VIS, [partner.id])[0].contested_with is None
    successor = make_record("back again", supersedes=target.id, version=2)
    with pytest.raises(StoreError, match="supersedes was deleted"):
        store.apply([contract.Insert(successor)])
    assert store.read(VIS, [successor.id]) == []


def test_delete_is_tenant_scoped(store: Any) -> None:
    mine = make_record("mine")
    store.apply([contract.Insert(mine)])
    assert store.apply([contract.Delete(Tenant("other"), (mine.id,))]).deleted == 0
    assert store.read(VIS, [mine.id]) == [mine]


def test_nested_transactions_are_savepoints(store: Any) -> None:
    kept, dropped = make_record("kept"), make_record("dropped")
    with store.transaction():
        assert store.in_transaction
        store.apply([contract.Insert(kept)])
        with pytest.raises(RuntimeError):
            _fail_inside(store, contract.Insert(dropped))
    assert not store.in_transaction
    assert [r.id for r in store.read(VIS, [kept.id, dropped.id])] == [kept.id]


def _fail_inside(store: Any, change: contract.Change) -> None:
    with store.transaction():
        store.apply([change])
        raise RuntimeError("roll back the inner block")


def test_audit_ids_come_back_in_order_and_the_chain_verifies(store: Any) -> None:
    entries = [
        AuditEntry(later(i), "acme", "u1", "user:u1", "ADD", [f"id{i}"], "t") for i in range(3)
    ]
    applied = store.apply([contract.Audit(e) for e in entries])
    assert len(applied.audit_ids) == 3
    assert len(set(applied.audit_ids)) == 3
    report = store.verify_audit()
    assert report.ok
    assert report.entries == 3
    rows = store.audit_entries(VIS.partition)
    assert [r["record_ids"] for r in rows] == ['["id0"]', '["id1"]', '["id2"]']
    assert all(r["user_id"].startswith("s:") for r in rows)  # pseudonyms, never "u1"
