"""Deleting means gone: after ``forget`` / ``erase_subject`` the erased texts are in no
byte of the database file, its WAL or shared memory, in no stored or queued trace,
in no in-memory index, and the receipt says what was checked (SPEC section 1)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable
from contextlib import closing
from pathlib import Path

import pytest
from tests import probes
from tests.conftest import T0

from engram import Context, Engram, NotFound
from engram.errors import EngramError
from engram.lifecycle.forget import ForgetReceipt
from engram.recall import rerank
from engram.scope import resolve
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "retracted", "expired", "disputed", "deleted")
CONTENT = "Zanzibar backup vault passphrase rotates nightly at quarter past three."
CORRECTED = "Zanzibar backup vault passphrase now rotates every hour on the hour."
DERIVED = "Summary: the Zanzibar vault rotation cadence was tightened by ops."
KEY = "vault.rotation.schedule"
VALUE = {"window": "quarter-past-three-ante-meridiem"}
REF = "ticket://OPS-998877-vault-rotation"
# "zanzibar" in lower case is only ever written by a lexical index (a token).
TOKEN = "zanzibar"


def _needles() -> list[bytes]:
    texts = [CONTENT, CORRECTED, DERIVED, KEY, REF, json.dumps(VALUE, sort_keys=True), TOKEN]
    return [text.encode() for text in texts]


def _files(db: Path) -> list[Path]:
    return [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]


def _found(db: Path, needles: Iterable[bytes]) -> list[tuple[str, bytes]]:
    """(file, needle) for every needle present in any byte of the store's files."""
    hits = []
    for path in _files(db):
        data = path.read_bytes()
        hits += [(path.name, n) for n in needles if n in data]
    return hits


def _write_chain(mem: Engram, ctx: Context) -> tuple[str, str, str]:
    """A keyed memory with a value and a source ref, its correction and a derived copy
    in another user's partition; returns (first, corrected, derived) ids."""
    first = mem.remember(ctx, CONTENT, key=KEY, value=VALUE,
                         source={"kind": "document", "ref": REF}).record  # fmt: skip
    assert first is not None
    second = mem.correct(ctx, first.id, CORRECTED, value=VALUE).record
    assert second is not None
    other = dataclasses.replace(ctx, user_id="u2")
    copy = mem.remember(
        other,
        DERIVED,
        type="summary",
        source={"kind": "consolidation", "derived_from": [second.id]},
    ).record
    assert copy is not None
    return first.id, second.id, copy.id


def _recall_traces(mem: Engram, ctx: Context) -> list[str]:
    """One recall whose trace is stored (flushed), one whose trace is still queued."""
    stored = mem.recall(ctx, "When does the Zanzibar vault passphrase rotate?").trace.trace_id
    mem.flush()
    queued = mem.recall(ctx, "Zanzibar vault rotation schedule").trace.trace_id
    return [stored, queued]


def test_forget_leaves_no_byte_of_the_chain_or_its_copies(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    mem = open_mem(sqlite_file_url)
    first, _, _ = _write_chain(mem, ctx)
    mem.remember(ctx, "The staging cluster is named heron.")
    for _ in range(50):  # later traffic must not be what hides the residue
        mem.remember(ctx, "An unrelated note about the coffee machine.")
    traces = _recall_traces(mem, ctx)
    assert _found(db_path, _needles())  # the texts are on disk before

    receipt = mem.forget(ctx, first)

    assert _found(db_path, _needles()) == []
    for trace_id in traces:
        with pytest.raises(NotFound):
            mem.trace(ctx, trace_id)
    assert receipt.verified, receipt.failed
    assert receipt.traces >= 2
    assert {"records rows", "vectors rows", "traces rows", "derived rows", "partition caches",
            "wal checkpoint", "database file bytes", "wal bytes", "shm bytes"} <= set(
        receipt.checked)  # fmt: skip
    assert receipt.failed == ()
    assert receipt.scanned >= 5
    mem.flush()
    assert _found(db_path, _needles()) == []
    assert not mem.store.holds_cached(ctx.tenant_id)
    assert rerank._stems.cache_info().currsize == 0
    mem.close()
    assert _found(db_path, _needles()) == []


def test_erase_subject_leaves_no_byte_counter_row_or_plain_user_id(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram]
) -> None:
    victim = Context(tenant_id="acme", user_id="patient-7f3a9c", agent_id="coder")
    mem = open_mem(sqlite_file_url)
    _write_chain(mem, victim)
    keep = mem.remember(Context(tenant_id="acme", user_id="u2"), "u2 keeps the rota.").record
    assert keep is not None
    traces = _recall_traces(mem, victim)
    vis = Visibility.of(resolve(victim))
    assert probes.lexical(mem.store, vis, "Zanzibar", ALL, 5)  # partitions are cached

    receipt = mem.erase_subject("acme", "patient-7f3a9c")

    assert _found(db_path, _needles()) == []
    for trace_id in traces:
        with pytest.raises(NotFound):
            mem.trace(victim, trace_id)
    assert receipt.verified, receipt.failed
    assert (receipt.records, receipt.derived) == (2, 1)
    assert receipt.traces >= 2
    assert {"subject rows", "counter rows", "database file bytes", "wal bytes"} <= set(
        receipt.checked
    )
    assert mem.get(Context(tenant_id="acme", user_id="u2"), keep.id).content == keep.content
    with closing(sqlite3.connect(db_path)) as conn:
        for table in ("partition_state", "lexical_state"):
            rows = conn.execute(f"SELECT * FROM {table} WHERE user_id = ?", (victim.user_id,))
            assert rows.fetchall() == [], table
        erase = conn.execute("SELECT user_id, reason FROM audit WHERE operation = 'ERASE'")
        ((user_column, reason),) = erase.fetchall()
    assert user_column.startswith("s:")
    assert victim.user_id not in user_column + reason
    assert mem.audit_verify().ok
    mem.remember(victim, "A new note after the erasure.")  # counters start again, caches fresh
    assert [i for i, _ in probes.lexical(mem.store, vis, "Zanzibar", ALL, 5)] == []
    mem.close()
    assert _found(db_path, _needles()) == []


def test_the_receipt_lists_what_was_checked_on_every_backend(mem: Engram, ctx: Context) -> None:
    first, _, _ = _write_chain(mem, ctx)
    receipt = mem.forget(ctx, first)
    assert receipt.verified
    assert {"records rows", "vectors rows", "traces rows", "derived rows",
            "partition caches"} <= set(receipt.checked)  # fmt: skip
    erased = mem.erase_subject(ctx.tenant_id, "u2")
    assert erased.verified
    assert {"subject rows", "counter rows"} <= set(erased.checked)


def test_a_trace_queued_before_a_forget_is_never_written_after_it(
    mem: Engram, ctx: Context
) -> None:
    first, _, _ = _write_chain(mem, ctx)
    trace_id = mem.recall(ctx, "Zanzibar vault passphrase").trace.trace_id
    receipt = mem.forget(ctx, first)
    mem.flush()
    with pytest.raises(NotFound):
        mem.trace(ctx, trace_id)
    assert receipt.traces == 1


def test_a_recall_overtaken_by_an_erasure_records_no_usage(mem: Engram, ctx: Context) -> None:
    first, second, _ = _write_chain(mem, ctx)
    vis = Visibility.of(resolve(ctx))
    started = mem._usage.epoch
    body = {"selected": [{"id": second}], "rejections": {"floor": [first]}}
    mem.forget(ctx, first)
    mem._usage.record(vis, [second], T0, "01HZZZZZZZZZZZZZZZZZZZZZZZ", body, started)
    mem.flush()
    with pytest.raises(NotFound):
        mem.trace(ctx, "01HZZZZZZZZZZZZZZZZZZZZZZZ")


def _race(mem: Engram, ctx: Context, target_id: str, trial: int) -> ForgetReceipt:
    """``correct`` and ``forget`` of one memory from two threads released together."""
    start = threading.Barrier(2)
    receipts: list[ForgetReceipt] = []

    def correct() -> None:
        start.wait()
        with contextlib.suppress(EngramError):  # refused: the memory was forgotten first
            mem.correct(ctx, target_id, f"Trial {trial}: the deploy window is Tuesday.",
                        value="Tuesday")  # fmt: skip

    def forget() -> None:
        start.wait()
        receipts.append(mem.forget(ctx, target_id))

    threads = [threading.Thread(target=correct), threading.Thread(target=forget)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return receipts[0]


def test_forget_racing_correct_never_verifies_a_surviving_version(
    shared_url: str, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    mem = open_mem(shared_url)
    admin = Visibility.of(resolve(ctx))
    for trial in range(50):
        target = mem.remember(ctx, f"Trial {trial}: the deploy window is Monday.",
                              key=f"deploy.window.{trial}", value="Monday").record  # fmt: skip
        assert target is not None
        receipt = _race(mem, ctx, target.id, trial)
        survivors = probes.by_key(mem.store, admin, [f"deploy.window.{trial}"], ALL, 10)
        assert receipt.verified
        assert survivors == [], (trial, survivors)


def _cached_strings(function: object) -> list[str]:
    """The string keys an ``lru_cache`` holds (its cache dict is a referent)."""
    import gc

    caches = [r for r in gc.get_referents(function) if isinstance(r, dict)]
    return [key for cache in caches for key in cache if isinstance(key, str)]


@pytest.mark.parametrize("operation", ["forget", "erase_subject"])
def test_no_embedder_cache_keeps_words_of_erased_text(
    mem: Engram, ctx: Context, operation: str
) -> None:
    from engram.embed import hashing

    written = mem.remember(ctx, CONTENT)
    assert written.record is not None
    assert any(TOKEN in key for key in _cached_strings(hashing._feature_hash))
    if operation == "forget":
        receipt = mem.forget(ctx, written.record.id)
    else:
        receipt = mem.erase_subject(ctx.tenant_id, ctx.user_id)
    assert receipt.verified
    assert [key for key in _cached_strings(hashing._feature_hash) if TOKEN in key] == []
