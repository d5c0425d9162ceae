"""A usage flush on PostgreSQL: its touches are heap-only updates.

An update that changes an indexed column, or finds no room on its page, writes a
new entry into every index of ``records``: the HNSW graph of the vector and the
GIN index of the text too. A flush of 40 recalls then took 224 ms at 2,000
records and 329 ms at 20,000 (`docs/evaluation.md`, "Usage flushes on
PostgreSQL"). So the table keeps room on its pages (migration
``0014_records_fillfactor``) and an access renews ``expires_at`` only when that
gains more than a hundredth of the period (``store.renewal``).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import psycopg
from pg_records import later, make_record, vector_for

from engram.store import contract
from engram.store.predicate import Visibility

VIS = Visibility("acme", "u1", "coder", ("session:s1", None, None, None))
YEAR = timedelta(days=365)  # make_record's retention is long_term


def _updates(pg_url: str, deadline_s: float = 30.0, want: int = 1) -> tuple[int, int]:
    """(updates, heap-only updates) of ``records`` once the statistics show ``want``
    updates. A backend reports its counts when it exits, else up to 10 s later, so
    callers close the store first."""
    query = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'records'"
    stop = time.monotonic() + deadline_s
    with psycopg.connect(pg_url, autocommit=True) as conn:
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(query).fetchone()
            assert row is not None
            if row[0] >= want or time.monotonic() > stop:
                return int(row[0]), int(row[1])
            time.sleep(0.1)


def test_the_records_table_keeps_room_for_new_row_versions(store: Any, pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'records'").fetchone()
    assert row is not None
    assert "fillfactor=80" in (row[0] or [])


def test_touches_that_renew_nothing_are_heap_only_updates(store: Any, pg_url: str) -> None:
    """Twenty of 200 records with a vector (scattered, as a recall's picks are),
    each accessed in two flushes a minute after its retention started: no indexed
    column changes and the pages have room, so no index (HNSW and GIN included)
    gets a new entry."""
    records = [make_record(f"note {i} about the cache", expires_at=later(0) + YEAR)
               for i in range(200)]  # fmt: skip
    store.apply([contract.Insert(r, vector_for(r.content)) for r in records])
    ids = [r.id for r in records[::10]]
    for minute in (1, 2):  # one flush (one transaction) each
        store.apply([contract.Touch(VIS, tuple(ids[i : i + 5]), later(minute))
                     for i in range(0, len(ids), 5)])  # fmt: skip
    (first,) = store.read(VIS, ids[:1])
    assert (first.access_count, first.last_accessed_at, first.expires_at) == (
        2,
        later(2),
        later(0) + YEAR,
    )
    store.close()  # its connections' backends exit and report their counts
    updates, heap_only = _updates(pg_url, want=40)
    assert (updates, heap_only) == (40, 40)


def test_a_flush_sends_one_update_per_visibility(store: Any) -> None:
    """Forty recalls of one caller (overlapping picks) and two of another are three
    ``UPDATE`` statements (``store.accesses``), not 42: each held the tenant's writer
    lock about a millisecond longer. The counts still add up per record."""
    records = [make_record(f"note {i} about the cache", expires_at=later(0) + YEAR)
               for i in range(60)]  # fmt: skip
    store.apply([contract.Insert(r, vector_for(r.content)) for r in records])
    ids = [r.id for r in records]
    other = Visibility("acme", "u1", "coder", ("session:s2", None, None, None))
    tenant_wide = Visibility("acme", "u1", "", (None, None, None, None))
    touches = [contract.Touch(VIS, tuple(ids[i % 50 : i % 50 + 10]), later(1 + i % 3))
               for i in range(40)]  # fmt: skip
    touches += [contract.Touch(other, tuple(ids[:3]), later(5)),
                contract.Touch(tenant_wide, tuple(ids[:1]), later(6))]  # fmt: skip
    sent: list[str] = []
    store.tracer = lambda text, params: sent.append(text)
    store.apply(touches)
    store.tracer = None
    assert sum(1 for text in sent if text.lstrip().startswith("UPDATE records")) == 3
    expected = {rid: sum(rid in t.ids for t in touches) for rid in ids}
    got = {r.id: r.access_count for r in store.read(VIS, ids)}
    assert got == expected
    (first,) = store.read(VIS, ids[:1])
    assert first.last_accessed_at == later(6)
