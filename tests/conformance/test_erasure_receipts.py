"""A receipt claims only what its verification pass checked, and what it claims is
what direct reads of every store find: record, version, vector and trace rows,
tombstones (digests, never text), working memory (the SQLite file's bytes, the
Redis keys), the audit entry it names. On every backend."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.backends import redis_client, table_rows

from engram import Context, Engram
from engram.lifecycle.receipts import ErasureReceipt, ForgetReceipt
from engram.store.sqlite import SQLiteStore
from engram.working.redis_store import escape

CONTENT = "Quokka ledger passphrase rotates at half past four every Tuesday."
CORRECTED = "Quokka ledger passphrase now rotates at a quarter to five on Tuesdays."
DERIVED = "Summary: the quokka ledger rotation moved later in the afternoon."
SHARED = "Shared from coder: quokka ledger passphrase rotates on Tuesdays."
WORKING = "scratch: confirm the quokka ledger passphrase rotation with ops"
KEY = "ledger.rotation.time"
REF = "ticket://SEC-4471-quokka-ledger"
NEEDLES = (CONTENT, CORRECTED, DERIVED, SHARED, REF)
ROW_CHECKS = {"records rows", "vectors rows", "contest links", "traces rows", "derived rows",
              "partition caches", "queued traces", "tombstones"}  # fmt: skip


def _world(mem: Engram, ctx: Context) -> dict[str, str]:
    """A keyed memory, its correction, a summary in another user's partition, a copy
    shared to another agent, traces stored and queued, and a working item."""
    first = mem.remember(
        ctx, CONTENT, key=KEY, value="16:30", source={"kind": "document", "ref": REF}
    ).record
    assert first is not None
    second = mem.correct(ctx, first.id, CORRECTED, value="16:45").record
    assert second is not None
    summary = mem.remember(
        dataclasses.replace(ctx, user_id="u2"),
        DERIVED,
        type="summary",
        source={"kind": "consolidation", "derived_from": [second.id]},
    ).record
    shared = mem.remember(
        dataclasses.replace(ctx, agent_id="reviewer"),
        SHARED,
        source={"kind": "share", "derived_from": [second.id]},
    ).record
    assert summary is not None
    assert shared is not None
    mem.remember(ctx, "The office plants are watered on Fridays.")
    mem.recall(ctx, "When does the quokka ledger passphrase rotate?")
    mem.flush()
    mem.recall(ctx, "quokka ledger rotation")  # its trace stays queued
    mem.working(ctx).set("next", WORKING)
    return {"first": first.id, "second": second.id, "summary": summary.id, "shared": shared.id}


def _rows_naming(mem: Engram, table: str, ids: Iterable[str]) -> list[dict[str, Any]]:
    wanted = set(ids)
    found = []
    for row in table_rows(mem.store, table):
        text = json.dumps({k: str(v) for k, v in row.items()})
        if any(i in text for i in wanted):
            found.append(row)
    return found


def _no_text(mem: Engram, table: str) -> None:
    dumped = json.dumps(
        [{k: str(v) for k, v in row.items()} for row in table_rows(mem.store, table)]
    )
    for needle in (*NEEDLES, "quokka", "Quokka"):
        assert needle not in dumped, (table, needle)


def _audited(mem: Engram, receipt: ForgetReceipt | ErasureReceipt) -> dict[str, Any]:
    rows = [r for r in table_rows(mem.store, "audit") if r["hash"] == receipt.audit_id]
    assert len(rows) == 1
    _no_text(mem, "audit")
    return rows[0]


def _files(url: str) -> list[Path]:
    if not url.startswith("sqlite:///"):
        return []
    db = url.removeprefix("sqlite:///")
    names = [db + s for s in ("", "-wal", "-shm", "-working", "-working-wal", "-working-shm")]
    return [Path(n) for n in names if Path(n).exists()]


def _in_files(url: str, needles: Iterable[str]) -> list[tuple[str, str]]:
    return [(p.name, n) for p in _files(url) for n in needles if n.encode() in p.read_bytes()]


def test_a_forget_receipt_agrees_with_direct_reads_of_every_store(
    store_url: str, open_mem: Any, ctx: Context
) -> None:
    mem: Engram = open_mem(store_url)
    ids = _world(mem, ctx)
    assert _in_files(store_url, NEEDLES) or not _files(store_url)

    receipt = mem.forget(ctx, ids["first"])

    assert receipt.verified, receipt.failed
    assert set(receipt.deleted) == {ids["first"], ids["second"]}
    assert set(receipt.derived) == {ids["summary"], ids["shared"]}
    assert set(receipt.checked) >= ROW_CHECKS
    assert dict(receipt.counts) == dict.fromkeys(receipt.checked, 0)
    gone = [*receipt.deleted, *receipt.derived]
    assert _rows_naming(mem, "records", gone) == []
    assert _rows_naming(mem, "traces", gone) == []
    if isinstance(mem.store, SQLiteStore):  # PostgreSQL keeps vectors in the records rows
        assert _rows_naming(mem, "vectors", gone) == []
    assert len(table_rows(mem.store, "tombstones")) == receipt.tombstones == 4
    _no_text(mem, "tombstones")
    entry = _audited(mem, receipt)
    assert set(json.loads(entry["record_ids"])) == set(gone)
    assert entry["reason"] == "forget"
    if _files(store_url):
        assert {"working database file bytes", "working wal bytes"} <= set(receipt.checked)
        assert _in_files(store_url, NEEDLES) == []
    assert mem.working(ctx).get("next") is not None  # the agent's scratch state stays


def test_an_erasure_receipt_agrees_with_direct_reads_of_every_store(
    store_url: str, open_mem: Any
) -> None:
    victim = Context(tenant_id="acme", user_id="patient-0451", agent_id="coder",
                     session_id="s1")  # fmt: skip
    mem: Engram = open_mem(store_url)
    ids = _world(mem, victim)
    colleague = Context(tenant_id="acme", user_id="u2", session_id="s1")
    mem.working(colleague).set("next", "water the plants")

    receipt = mem.erase_subject("acme", victim.user_id)

    assert receipt.verified, receipt.failed
    assert (receipt.records, receipt.derived, receipt.working) == (4, 1, 1)
    assert ROW_CHECKS | {"subject rows", "counter rows", "tombstone rows", "working memory"} <= set(
        receipt.checked)  # fmt: skip
    assert dict(receipt.counts) == dict.fromkeys(receipt.checked, 0)
    assert _rows_naming(mem, "records", ids.values()) == []
    assert [r for r in table_rows(mem.store, "records") if r["user_id"] == victim.user_id] == []
    assert [r for r in table_rows(mem.store, "traces") if r["user_id"] == victim.user_id] == []
    rows = table_rows(mem.store, "tombstones")
    assert len(rows) == receipt.tombstones == 5
    assert victim.user_id not in json.dumps([str(r) for r in rows])
    _no_text(mem, "tombstones")
    entry = _audited(mem, receipt)
    assert entry["operation"] == "ERASE"
    assert victim.user_id not in json.dumps({k: str(v) for k, v in entry.items()})
    assert mem.working(colleague).get("next") is not None
    if _files(store_url):
        assert "working database file bytes" in receipt.checked
        assert _in_files(store_url, (*NEEDLES, WORKING)) == []
    elif store_url.startswith("postgresql"):
        client = redis_client()
        prefix = mem.config.working.redis_prefix
        pattern = f"{prefix}:wm*:{escape('acme')}:{escape(victim.user_id)}:*"
        assert list(client.scan_iter(match=pattern)) == []
        assert list(client.scan_iter(match=f"{prefix}:*"))  # the colleague's item stays
