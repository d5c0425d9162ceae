"""Sharing, forgetting, the sweep and erasure on PostgreSQL, through the per-transaction
state of ``store.postgres.unit``: each transaction's audit entries are chained in
Python and inserted by one statement before ``COMMIT``, its locks are taken together,
and a rolled-back savepoint takes its entries, head, key, tombstones and generation
bump with it. These paths were written after that state existed, so here they run
together and the chain is verified after each: one unverifiable entry fails."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from pg_records import T0

from engram import Context, Engram
from engram.store import contract
from engram.store.audit import AuditEntry
from engram.store.postgres import PostgresConfig, PostgresStore
from engram.store.predicate import Subject, Tenant

OpenMem = Callable[..., Engram]
CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder")
OTHER = Context(tenant_id="acme", user_id="u2", agent_id="coder")
_APPENDS = "WITH head AS (UPDATE audit_heads"  # the one statement inserting the entries


def _appends(mem: Engram, call: Callable[[], object]) -> tuple[object, int]:
    """``call``'s result and how many statements inserted audit entries."""
    sent: list[str] = []
    mem.store.tracer = lambda sql, params: sent.append(sql)  # type: ignore[union-attr]
    try:
        result = call()
    finally:
        mem.store.tracer = None  # type: ignore[union-attr]
    return result, Counter(s.lstrip().startswith(_APPENDS) for s in sent)[True]


def _verified(mem: Engram) -> int:
    report = mem.audit_verify()
    assert report.ok, report
    return report.entries


def test_share_forget_sweep_and_erasure_keep_one_verifiable_chain(
    pg_url: str, open_mem: OpenMem
) -> None:
    mem = open_mem(pg_url)
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    items = [{"content": f"Procedure {i}: restart worker {i} after the deploy.",
              "type": "procedure"} for i in range(5)]  # fmt: skip
    ids = [w.record.id for w in mem.remember_many(CODER, items) if w.record is not None]
    mem.remember(OTHER, "The second user's build runs on Fridays.")
    due = mem.remember(CODER, "The temporary door code is 4471.", retention="transient").record
    assert due is not None
    before = _verified(mem)

    report, appends = _appends(mem, lambda: mem.share(CODER, ids, "reviewer"))
    assert len(report.shared) == 5  # type: ignore[attr-defined]
    assert appends == 1  # the copies' entries and the share's, one insert
    shared = _verified(mem)
    assert shared > before

    receipt, appends = _appends(mem, lambda: mem.forget(CODER, ids[0]))  # and its copy
    assert appends == 1
    assert receipt.audit_id is not None  # type: ignore[attr-defined]
    forgotten = _verified(mem)
    assert forgotten > shared

    swept, appends = _appends(mem, lambda: mem.sweep("acme", now=T0 + timedelta(hours=12)))
    assert swept.expired == 1  # type: ignore[attr-defined]
    assert appends >= 1
    assert _verified(mem) > forgotten

    erased, appends = _appends(mem, lambda: mem.erase_subject("acme", "u2"))
    assert erased.records == 1  # type: ignore[attr-defined]
    assert appends == 1
    assert _verified(mem) > forgotten
    assert mem.store.audit_name(Subject("acme", "u2")) is None  # type: ignore[union-attr]
    assert mem.audit_log("acme", "u1")  # u1's entries still name u1's pseudonym


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore.open(pg_url, PostgresConfig(max_connections=4))
    yield opened
    opened.close()


def _audit(user: str, note: str) -> contract.Audit:
    return contract.Audit(AuditEntry(T0, "acme", user, f"user:{user}", "NOTE", [], note))


def test_a_rolled_back_deletion_takes_its_bump_tombstones_and_entries_with_it(
    store: PostgresStore,
) -> None:
    tenant = Tenant("acme")
    bury = contract.AddTombstones(tenant, "u1", ("h-kept",), T0)

    def undone() -> None:
        with store.transaction():
            store.apply([contract.Delete(tenant, ()), _audit("u1", "undone"),
                         contract.AddTombstones(tenant, "u1", ("h-undone",), T0)])  # fmt: skip
            raise RuntimeError("roll the savepoint back")

    with store.transaction():
        store.apply([contract.Delete(tenant, ()), bury, _audit("u1", "kept")])
        with pytest.raises(RuntimeError):
            undone()
        store.apply([_audit("u2", "erased next")])
        assert store.forget_audit_subject(Subject("acme", "u2")) == 1
        store.apply([_audit("u1", "after")])
        assert store.generation(tenant) == 1  # read inside: the kept bump only
    assert store.generation(tenant) == 1
    assert store.tombstoned(tenant, "u1", ["h-kept", "h-undone"]) == {"h-kept"}
    assert [e["reason"] for e in store.audit_entries(Subject("acme", "u1"))] == ["kept", "after"]
    assert store.audit_entries(Subject("acme", "u2")) == []  # its key is gone
    report = store.verify_audit()
    assert report.ok, report
    assert report.entries == 3
