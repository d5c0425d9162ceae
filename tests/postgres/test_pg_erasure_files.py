"""What PostgreSQL's files hold after an erasure, read directly from the data directory.

The embedded test server runs on this machine, so the store can read its files and
so can this test. Measured and pinned here: a plain ``VACUUM`` leaves the erased
text in the heap's freed space and its words in the GIN index; the receipt sees it
(``relation file bytes``) and, by default, rewrites the tables (``VACUUM FULL``),
after which neither the store's scan nor this test's finds a byte of it. With
``erasure_rewrite="never"`` the residue is reported, not hidden.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import psycopg

from engram import Config, Context, Engram
from engram.store.config import PostgresConfig, StoreConfig

CONTENT = "Wombat vault passphrase rotates at seven past midnight on Sundays."
TOKEN = b"wombat"  # the GIN index holds the stemmed word


def _relation_files(url: str) -> list[Path]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        datadir = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
        rows = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c"
            " WHERE c.relkind IN ('r', 'i', 't') AND pg_relation_filepath(c.oid) IS NOT NULL"
        ).fetchall()
    files = []
    for (relative,) in rows:
        base = datadir / str(relative)
        files += [p for p in base.parent.glob(base.name + "*") if p.is_file()]
    return files


def _holding(url: str, needles: tuple[bytes, ...]) -> set[bytes]:
    return {n for path in _relation_files(url) for n in needles if n in path.read_bytes()}


def _victim_world(mem: Engram) -> Context:
    victim = Context(tenant_id="acme", user_id="patient-9", session_id="s1")
    for i in range(20):
        mem.remember(victim, f"{CONTENT} Copy {i}.")
    for i in range(50):
        mem.remember(dataclasses.replace(victim, user_id="u2"), f"Kettle rota note {i}.")
    mem.recall(victim, "When does the wombat vault passphrase rotate?")
    mem.flush()
    return victim


def _config(rewrite: str) -> Config:
    return Config(store=StoreConfig(postgres=PostgresConfig(erasure_rewrite=rewrite)))


def test_the_erasure_rewrites_what_vacuum_leaves_in_the_files(
    pg_url: str, open_mem: Callable[..., Engram]
) -> None:
    mem = open_mem(pg_url, config=_config("on_residue"))
    victim = _victim_world(mem)
    assert _holding(pg_url, (CONTENT[:32].encode(), TOKEN))

    receipt = mem.erase_subject(victim.tenant_id, victim.user_id)

    assert receipt.verified, receipt.failed
    assert {"vacuum", "dead tuples", "relation file bytes", "rewrite"} <= set(receipt.checked)
    assert _holding(pg_url, (CONTENT[:32].encode(), CONTENT[-32:].encode(), TOKEN)) == set()


def test_without_a_rewrite_the_residue_is_reported(
    pg_url: str, open_mem: Callable[..., Engram]
) -> None:
    mem = open_mem(pg_url, config=_config("never"))
    victim = _victim_world(mem)

    receipt = mem.erase_subject(victim.tenant_id, victim.user_id)

    assert "relation file bytes" in receipt.checked
    assert "rewrite" not in receipt.checked
    assert "relation file bytes" in receipt.failed  # VACUUM does not zero freed space
    assert not receipt.verified
    assert _holding(pg_url, (CONTENT[:32].encode(),))
