"""How many statements a write sends to PostgreSQL, pinned, and what the savings keep.

The store's tracer sees every statement it sends and the transaction control
around them (``BEGIN``, ``SAVEPOINT``, ``RELEASE``, ``COMMIT``): each is a round
trip. A write used to send 17 (one ``remember``) and 13 per item of a 100-item
``remember_many``: four per audit entry, two advisory locks per item, a
vector-model read per insert. Per transaction now: the advisory locks in one
statement, the model read once, the audit pseudonym key read or made once, the
chain head locked once, and the entries inserted by one statement before
``COMMIT``. Since then every write reads two more rows once per call: the
tenant's cache generation (``lifecycle.caches``: a deletion elsewhere drops this
process's copies) and its tombstone key (``write.tombstones``: forgotten content
is not written again). A share of 100 sent 620, six per copy (its slot read
and its insert, each in a savepoint); it now decides every copy on one read of
the slots and writes them in one apply (``write.bulk``), 26 whatever its size,
and a run of slot probes is one statement per slot (``postgres.slot_batch``),
which also cut a keyed supersede's two reads to one. ``remember_many`` does the
same for a chunk without passages: 100 new items sent 610 statements and now 16,
100 supersedes 910 and now 217 (an update per retired version and a read of its
share copies each). The bounds below are today's counts, so a regression fails
here.

The savings must keep what they replaced: entries chain across stores (as
across processes), an erased subject's key is never reused by the transaction
that erased it, a rolled-back savepoint takes its key, head and entries with it,
and a transaction that reads the log sees its own entries.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pg_records import T0, make_record, vector_for

from engram import Context, Engram
from engram.store import contract
from engram.store.audit import AuditEntry
from engram.store.postgres import PostgresConfig, PostgresStore, sql
from engram.store.predicate import Subject, Visibility

OpenMem = Callable[..., Engram]
CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder")
VIS_U1 = Visibility("acme", "u1", "", (None, None, None, None))
BOUNDS = {"remember": 16, "remember_many": 16, "supersede": 217, "share": 26}
_KINDS = {
    "lock": "SELECT pg_advisory_xact_lock", "meta": "SELECT key, value FROM engram_meta",
    "key": "WITH made AS (INSERT INTO audit_subjects", "head": "INSERT INTO audit_heads",
    "audit": "WITH head AS (UPDATE audit_heads", "insert": "INSERT INTO records",
    "savepoint": "SAVEPOINT", "begin": "BEGIN", "commit": "COMMIT",
}  # fmt: skip


def _kind(sql: str) -> str:
    text = sql.lstrip()
    return next((kind for kind, prefix in _KINDS.items() if text.startswith(prefix)), "other")


def _sent(mem: Engram, call: Callable[[], object]) -> list[str]:
    """The statements ``call`` sends through ``mem``'s store, in order."""
    sent: list[str] = []
    mem.store.tracer = lambda sql, params: sent.append(sql)  # type: ignore[union-attr]
    try:
        call()
    finally:
        mem.store.tracer = None  # type: ignore[union-attr]
    return sent


def _items(tag: str, n: int, keyed: bool = False) -> list[dict[str, Any]]:
    if keyed:
        return [{"content": f"Service {i} builds {tag}.", "type": "preference",
                 "key": f"svc.{i}", "value": tag} for i in range(n)]  # fmt: skip
    return [{"content": f"{tag} procedure {i}: restart worker {i} after the deploy."}
            for i in range(n)]  # fmt: skip


@pytest.fixture
def mem(pg_url: str, open_mem: OpenMem) -> Engram:
    """Engram on a fresh PostgreSQL database whose vector model is claimed already."""
    opened = open_mem(pg_url)
    opened.remember(Context(tenant_id="acme", user_id="warm"), "Claims the vector model.")
    return opened


def test_one_remember_sends_at_most_its_pinned_statements(mem: Engram) -> None:
    mem.remember(CTX, "The first write of this user makes its audit key.")
    sent = _sent(mem, lambda: mem.remember(CTX, "The on-call rota changes on Mondays."))
    kinds = Counter(map(_kind, sent))
    assert len(sent) <= BOUNDS["remember"], sent
    assert kinds["lock"] == 1  # the tenant's writer lock and the slot's, together
    assert kinds["begin"] == kinds["commit"] == 1
    assert (kinds["key"], kinds["head"], kinds["audit"]) == (1, 1, 1)
    assert kinds["meta"] <= 2  # the write path's check before and inside the transaction


def test_a_remember_many_of_100_sends_at_most_its_pinned_statements(mem: Engram) -> None:
    sent = _sent(mem, lambda: mem.remember_many(CTX, _items("plain", 100)))
    kinds = Counter(map(_kind, sent))
    assert len(sent) <= BOUNDS["remember_many"], kinds
    assert kinds["insert"] == 1  # the 100 records in one statement
    assert kinds["lock"] == 1  # every slot of the batch in one statement
    assert (kinds["key"], kinds["head"], kinds["audit"]) == (1, 1, 1)  # per transaction
    assert kinds["meta"] <= 2


def test_a_remember_manys_statements_do_not_grow_with_its_size(mem: Engram) -> None:
    ten = _sent(mem, lambda: mem.remember_many(CTX, _items("ten", 10)))
    hundred = _sent(mem, lambda: mem.remember_many(CTX, _items("hundred", 100)))
    assert len(ten) == len(hundred)


def test_a_batch_of_100_supersedes_sends_at_most_its_pinned_statements(mem: Engram) -> None:
    mem.remember_many(CTX, _items("nightly", 100, keyed=True))
    sent = _sent(mem, lambda: mem.remember_many(CTX, _items("hourly", 100, keyed=True)))
    kinds = Counter(map(_kind, sent))
    assert len(sent) <= BOUNDS["supersede"], kinds
    assert (kinds["lock"], kinds["audit"], kinds["commit"]) == (1, 1, 1)
    assert len(mem.list(CTX, limit=300)) == 100  # each of the 100 keys has one active version


def _share(mem: Engram, user: str, n: int) -> list[str]:
    """The statements of a share of ``n`` new procedures of ``user``'s coder."""
    coder = Context(tenant_id="acme", user_id=user, agent_id="coder")
    items = [{**item, "type": "procedure"} for item in _items(f"shared by {user}", n)]
    ids = [w.record.id for w in mem.remember_many(coder, items) if w.record is not None]
    return _sent(mem, lambda: mem.share(coder, ids, "reviewer"))


def test_a_share_of_100_sends_at_most_its_pinned_statements(mem: Engram) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    sent = _share(mem, "u1", 100)
    kinds = Counter(map(_kind, sent))
    assert len(sent) <= BOUNDS["share"], kinds
    assert kinds["insert"] == 1  # the 100 copies in one statement
    assert kinds["savepoint"] <= 4  # the slot reads, the copies, the share's audit entry
    assert kinds["lock"] <= 2  # the tenant's, then every copy's slot in one statement
    assert (kinds["key"], kinds["head"], kinds["audit"], kinds["commit"]) == (1, 1, 1, 1)
    reviewer = Context(tenant_id="acme", user_id="u1", agent_id="reviewer")
    assert len(mem.list(reviewer, limit=300)) == 100  # the copies are there
    assert mem.store.verify_audit().ok  # type: ignore[union-attr]


def test_a_shares_statements_do_not_grow_with_its_size(mem: Engram) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    assert len(_share(mem, "u1", 10)) == len(_share(mem, "u2", 100))


# -- what the savings keep ---------------------------------------------------------------


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    """A bare store on a fresh database."""
    opened = PostgresStore.open(pg_url, PostgresConfig(max_connections=6))
    yield opened
    opened.close()


def _audit(user: str | None, note: str) -> contract.Audit:
    actor = f"user:{user}" if user else "admin"
    return contract.Audit(AuditEntry(T0, "acme", user, actor, "NOTE", [], note))


def test_a_bulk_apply_inserts_at_most_insert_rows_records_per_statement(
    store: PostgresStore,
) -> None:
    """A bulk load's inserts go in statements of ``sql.INSERT_ROWS`` rows: one
    statement of 500 (each row an HNSW insert) ran past the statement timeout on a
    loaded machine."""
    count = 2 * sql.INSERT_ROWS + 7
    records = [make_record(f"bulk memory {i}") for i in range(count)]
    sent: list[str] = []
    store.tracer = lambda text, params: sent.append(text)
    store.apply([contract.Insert(r, vector_for(r.content)) for r in records])
    store.tracer = None
    assert sum(text.startswith(sql.INSERT_MANY) for text in sent) == 3
    assert len(store.read(VIS_U1, [r.id for r in records])) == count


def test_entries_of_many_transactions_on_two_stores_chain_as_one(
    store: PostgresStore, pg_url: str
) -> None:
    other = PostgresStore.open(pg_url, PostgresConfig(max_connections=6))
    stores, errors = (store, other), []

    def writer(n: int) -> None:
        try:
            for i in range(6):
                with stores[(n + i) % 2].transaction():
                    for j in range(3):  # three appends in three apply calls
                        stores[(n + i) % 2].apply([_audit(f"u{n}", f"{n}.{i}.{j}")])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    other.close()
    assert errors == []
    report = store.verify_audit()
    assert report.ok, report
    assert report.entries == 4 * 6 * 3


def test_an_erased_subjects_key_is_not_reused_by_the_erasing_transaction(
    store: PostgresStore,
) -> None:
    subject = Subject("acme", "u1")
    with store.transaction():
        store.apply([_audit("u1", "before")])
        before = store.audit_name(subject)
        assert store.forget_audit_subject(subject) == 1
        assert store.audit_name(subject) is None
        store.apply([_audit("u1", "after")])
        after = store.audit_name(subject)
    assert before is not None
    assert after is not None
    assert before != after
    entries = store.audit_entries(subject)
    assert [e["reason"] for e in entries] == ["after"]  # the first is unlinkable now
    assert entries[0]["user_id"] == after
    assert store.verify_audit().entries == 2


def test_a_rolled_back_savepoint_takes_its_key_head_and_entries_with_it(
    store: PostgresStore,
) -> None:
    subject = Subject("acme", "u7")

    def undone() -> None:
        with store.transaction():
            store.apply([_audit("u7", "undone"), _audit(None, "undone too")])
            raise RuntimeError("roll the savepoint back")

    with store.transaction():
        with pytest.raises(RuntimeError):
            undone()
        store.apply([_audit("u7", "kept")])
    entries = store.audit_entries(subject)
    assert [e["reason"] for e in entries] == ["kept"]
    assert entries[0]["user_id"] == store.audit_name(subject)  # its key was made again
    report = store.verify_audit()
    assert report.ok
    assert report.entries == 1


def test_a_transaction_reading_the_log_sees_its_own_entries(store: PostgresStore) -> None:
    with store.transaction():
        store.apply([_audit("u1", "one")])
        assert store.verify_audit().entries == 1
        assert [e["reason"] for e in store.audit_entries(Subject("acme", "u1"))] == ["one"]
        store.apply([_audit("u1", "two")])
    report = store.verify_audit()
    assert report.ok
    assert report.entries == 2
