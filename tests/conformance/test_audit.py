"""The audit log: a hash chain over ids and reason codes, append-only, content-free."""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from backends import table_rows
from engram import Context, Engram
from engram.store.predicate import Subject

CONTENTS = [
    "Prefers dark roast coffee in the morning.",
    "The staging cluster is named pelican.",
    "Quarterly planning happens in Lisbon.",
    "Deploys are frozen during the holidays.",
    "The design system is called Aurora.",
]


def _many_operations(mem: Engram, ctx: Context) -> list[str]:
    """A mix of every write kind; returns every content string ever written."""
    written = list(CONTENTS)
    ids = []
    for text in CONTENTS:
        w = mem.remember(ctx, text)
        assert w.record is not None
        ids.append(w.record.id)
    mem.remember(ctx, CONTENTS[0])  # CONFIRM
    corrected = "The staging cluster is named heron."
    written.append(corrected)
    mem.correct(ctx, ids[1], corrected)
    mem.retract(ctx, ids[2], reason="Lisbon was last year, the user said")
    mem.expire(ctx, ids[3])
    mem.forget(ctx, ids[4])
    mem.remember(ctx, "Card 4111 1111 1111 1111 is on file.")  # REJECT
    weak: dict[str, Any] = {"key": "cdn", "authority": "tool_observation", "confidence": 0.4}
    for value in ("Fastly", "Akamai"):
        text = f"The CDN vendor is {value}."
        written.append(text)
        mem.remember(ctx, text, value=value, **weak)  # ADD then CONTEST
    other = dataclasses.replace(ctx, user_id="u2")
    batch = [f"Batch memory {i} about the observability stack." for i in range(5)]
    written += batch
    mem.remember_many(other, [{"content": text} for text in batch])
    mem.import_records(dataclasses.replace(ctx, user_id="u3"), mem.export(ctx))
    written.append("Tenant-wide: all laptops use disk encryption.")
    mem.remember_global("acme", written[-1])
    mem.erase_subject("acme", "u2")
    return written


def test_the_chain_verifies_after_many_operations(mem: Engram, ctx: Context) -> None:
    _many_operations(mem, ctx)
    report = mem.audit_verify()
    assert report.ok
    assert report.problem is None
    assert report.entries >= 18


def test_audit_entries_never_contain_content(mem: Engram, ctx: Context) -> None:
    written = _many_operations(mem, ctx)
    linked = []
    for user in ("u1", "u3", ""):
        linked += mem.store.audit_entries(Subject("acme", user))
    assert mem.store.audit_entries(Subject("acme", "u2")) == []  # erased: unlinkable
    entries = table_rows(mem.store, "audit")
    assert len(entries) == mem.audit_verify().entries
    assert len(linked) < len(entries)  # u2's entries remain in the chain, unnamed
    operations = {entry["operation"] for entry in entries}
    assert {"ADD", "CONFIRM", "SUPERSEDE", "RETRACT", "EXPIRE", "DELETE", "REJECT",
            "CONTEST", "IMPORT", "ERASE"} <= operations  # fmt: skip
    blob = repr(entries)
    # "4111 1111" (with its space) cannot occur in an id, hash or time by chance; the bare
    # "4111" can (e.g. inside a hex hash), which made this check flaky
    for text in [*written, "Lisbon was last year", "4111 1111", "Card 4111"]:
        assert text not in blob


def test_a_file_store_holds_no_content_in_its_audit_table(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    written = _many_operations(open_mem(sqlite_file_url), ctx)
    with closing(sqlite3.connect(db_path)) as conn:
        rows = conn.execute("SELECT * FROM audit").fetchall()
    assert rows
    blob = repr(rows)
    for text in written:
        assert text not in blob
        for word in ("pelican", "heron", "Lisbon", "Aurora", "Akamai", "observability"):
            assert word not in blob


@contextmanager
def _raw(db_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def test_the_audit_table_refuses_update_and_delete(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    mem = open_mem(sqlite_file_url)
    mem.remember(ctx, CONTENTS[0])
    with _raw(db_path) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE audit SET reason = 'nothing happened'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM audit")
    assert mem.audit_verify().ok
    assert mem.audit_verify().entries == 1


@pytest.mark.parametrize(
    ("trigger", "tamper", "bad_seq"),
    [
        ("audit_no_update", "UPDATE audit SET reason = 'forged' WHERE seq = 3", 3),
        ("audit_no_update", "UPDATE audit SET record_ids = '[]' WHERE seq = 5", 5),
        ("audit_no_update", "UPDATE audit SET at = at + 1 WHERE seq = 1", 1),
        ("audit_no_delete", "DELETE FROM audit WHERE seq = 2", 3),
    ],
)
def test_tampering_breaks_verification(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram], ctx: Context,
    trigger: str, tamper: str, bad_seq: int,
) -> None:  # fmt: skip
    mem = open_mem(sqlite_file_url)
    for text in CONTENTS:
        mem.remember(ctx, text)
    assert mem.audit_verify().ok
    with _raw(db_path) as conn:
        conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(tamper)
    report = mem.audit_verify()
    assert not report.ok
    assert report.first_bad_seq == bad_seq
    assert report.problem


def test_cli_audit_verify_fails_on_a_tampered_chain(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    mem = open_mem(sqlite_file_url)
    for text in CONTENTS:
        mem.remember(ctx, text)
    with _raw(db_path) as conn:
        conn.execute("DROP TRIGGER audit_no_update")
        conn.execute("UPDATE audit SET operation = 'CONFIRM' WHERE seq = 4")
    cli = _cli(sqlite_file_url, "audit", "verify")
    assert cli.returncode == 1
    assert "BROKEN at seq 4" in cli.stderr


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engram", "--db", url, "--embedder", "hashing", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_cli_audit_verify_and_index_rebuild_exit_zero(
    sqlite_file_url: str, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    mem = open_mem(sqlite_file_url)
    for text in CONTENTS:
        mem.remember(ctx, text)
    mem.close()
    rebuild = _cli(sqlite_file_url, "index", "rebuild")
    assert rebuild.returncode == 0, rebuild.stderr
    assert "5 records" in rebuild.stdout
    verify = _cli(sqlite_file_url, "audit", "verify")
    assert verify.returncode == 0, verify.stderr
    assert "5 entries" in verify.stdout


def test_users_are_named_by_pseudonym_and_erasure_unlinks_them(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    mem = open_mem(sqlite_file_url)
    victim = Context(tenant_id="acme", user_id="victim-7f3a9c@example.net")
    first = mem.remember(victim, "Prefers tea.")
    assert first.record is not None
    mem.retract(victim, first.record.id)
    mem.remember(ctx, CONTENTS[1])
    before = mem.store.audit_entries(Subject("acme", victim.user_id))
    assert [e["operation"] for e in before] == ["ADD", "RETRACT"]
    assert {e["user_id"] for e in before} == {mem.store.audit_name(Subject("acme", victim.user_id))}
    mem.erase_subject("acme", victim.user_id)
    assert mem.store.audit_entries(Subject("acme", victim.user_id)) == []
    assert mem.store.audit_name(Subject("acme", victim.user_id)) is None
    assert mem.audit_verify().ok
    assert mem.store.audit_entries(Subject("acme", "u1"))  # others stay linkable
    mem.close()
    raw = db_path.read_bytes()
    for suffix in ("-wal", "-shm"):
        extra = db_path.with_name(db_path.name + suffix)
        raw += extra.read_bytes() if extra.exists() else b""
    for user in (victim.user_id, "u1"):
        with closing(sqlite3.connect(db_path)) as conn:
            rows = conn.execute("SELECT user_id, actor FROM audit").fetchall()
        assert user not in repr(rows)
    assert victim.user_id.encode() not in raw


def test_a_user_id_shaped_like_a_pseudonym_is_pseudonymised_too(
    sqlite_file_url: str, db_path: Path, open_mem: Callable[..., Engram]
) -> None:
    """``s:`` and 32 hex characters is an ordinary user id (``s:`` + an MD5, say)."""
    mem = open_mem(sqlite_file_url)
    shaped = Context(tenant_id="acme", user_id="s:" + "5f4dcc3b5aa765d61d8327deb882cf99")
    written = mem.remember(shaped, "Prefers green tea in the afternoon.")
    assert written.record is not None
    mem.retract(shaped, written.record.id)
    name = mem.store.audit_name(Subject("acme", shaped.user_id))
    assert name is not None
    assert name != shaped.user_id
    # a user named after another's pseudonym never reads that user's entries
    impostor = Subject("acme", name)
    assert mem.store.audit_entries(impostor) == []
    mem.erase_subject("acme", shaped.user_id)
    assert mem.audit_verify().ok
    mem.close()
    raw = db_path.read_bytes()
    for suffix in ("-wal", "-shm"):
        extra = db_path.with_name(db_path.name + suffix)
        raw += extra.read_bytes() if extra.exists() else b""
    assert shaped.user_id.encode() not in raw
