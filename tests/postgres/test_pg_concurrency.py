"""Concurrent writers and dropped connections on PostgreSQL: one active version per
key whatever the interleaving, a verifying audit chain, and no partial record."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from pg_records import T0, make_record

from engram.store import contract
from engram.store.audit import AuditEntry
from engram.store.postgres import ConstraintViolation, PostgresStore, Unavailable
from engram.store.predicate import OwnerSlot, Visibility
from engram.types import Record, Status

VIS = Visibility("acme", "u1", "", (None, None, None, None))
SLOT = OwnerSlot("acme", "u1", "", "user")
ACTIVE = ("active",)


def _write(store: Any, content: str, lock: bool) -> None:
    """One write of the key ``tz``: supersede the current version, if any."""
    with store.transaction():
        if lock:
            store.lock_slot(SLOT, "tz")
        (hits,) = store.candidates(VIS, [contract.SlotProbe(SLOT, ACTIVE, key="tz")])
        current: Record | None = hits[0][0] if hits else None
        new = make_record(content, key="tz", version=current.version + 1 if current else 1,
                          supersedes=current.id if current else None)  # fmt: skip
        changes: list[contract.Change] = []
        if current is not None:
            retired = current.replace(status=Status.SUPERSEDED, superseded_by=new.id)
            changes.append(contract.Update(retired))
        entry = AuditEntry(T0, "acme", "u1", "user:u1", "SUPERSEDE", [new.id], "test")
        store.apply([*changes, contract.Insert(new), contract.Audit(entry)])


def _race(store: Any, threads: int, writes: int, lock: bool) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def worker(n: int) -> None:
        start.wait()
        for i in range(writes):
            try:
                _write(store, f"tz zone {n}-{i}", lock)
            except ConstraintViolation as exc:
                errors.append(exc)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return errors


def test_writers_holding_the_slot_lock_chain_every_version(store: Any) -> None:
    errors = _race(store, threads=6, writes=5, lock=True)
    assert errors == []
    (active,) = store.candidates(VIS, [contract.SlotProbe(SLOT, ACTIVE, key="tz")])
    assert len(active) == 1
    chain = store.history(VIS, active[0][0].id)
    assert [r.version for r in chain] == list(range(1, 31))  # one line, no fork
    report = store.verify_audit()
    assert report.ok
    assert report.entries == 30


def test_without_the_lock_the_database_still_keeps_one_active_version(store: Any) -> None:
    errors = _race(store, threads=6, writes=5, lock=False)
    (active,) = store.candidates(VIS, [contract.SlotProbe(SLOT, ACTIVE, key="tz")])
    assert len(active) == 1  # losers of the race were refused, not stored
    assert all("records_one_active" in str(e) or "supersedes" in str(e) for e in errors)
    assert store.verify_audit().ok


def test_lock_slot_needs_a_transaction(store: Any) -> None:
    with pytest.raises(Exception, match="needs an open transaction"):
        store.lock_slot(SLOT, "tz")


def _kill(pg_url: str, pid: int) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(100):
            if not admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchall():
                return
            time.sleep(0.02)


def _commit_after_kill(store: Any, pg_url: str, changes: list[contract.Change]) -> None:
    with store.transaction():
        store.apply(changes)
        ((pid,),) = store.rows(("SELECT pg_backend_pid()", {}))
        _kill(pg_url, pid)


def test_a_dropped_connection_before_commit_leaves_nothing_and_a_retry_writes_once(
    store: Any, pg_url: str
) -> None:
    record = make_record("written once")
    entry = AuditEntry(T0, "acme", "u1", "user:u1", "ADD", [record.id], "test")
    changes: list[contract.Change] = [contract.Insert(record), contract.Audit(entry)]
    with pytest.raises(Unavailable, match="unavailable"):
        _commit_after_kill(store, pg_url, changes)
    assert store.read(VIS, [record.id]) == []
    assert store.verify_audit().entries == 0
    store.apply(changes)  # the retry, on a fresh pooled connection
    with pytest.raises(ConstraintViolation):  # a second retry cannot duplicate it
        store.apply([contract.Insert(record)])
    assert store.read(VIS, [record.id]) == [record]
    assert store.verify_audit().entries == 1


def test_two_stores_on_one_database_see_each_others_commits(store: Any, pg_url: str) -> None:
    other = PostgresStore.open(pg_url)
    try:
        record = make_record("shared")
        other.apply([contract.Insert(record)])
        assert store.read(VIS, [record.id]) == [record]
    finally:
        other.close()
