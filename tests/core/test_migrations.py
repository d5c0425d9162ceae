"""A database from before the in-memory lexical engine upgrades in place and loses nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests import probes

from engram import Context, Engram
from engram.scope import resolve
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "expired")
_LATER = """
DROP TRIGGER lexical_count_insert; DROP TRIGGER lexical_count_delete;
DROP TRIGGER lexical_count_update; DROP TABLE lexical_state; DROP INDEX records_partition;
DELETE FROM migrations WHERE name IN ('0009_fts_changes', '0010_lexical_state', '0011_drop_fts');
"""


def test_an_older_database_is_backfilled_and_searchable(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    path = tmp_path / "old.db"
    mem = open_mem(f"sqlite:///{path}")
    mem.remember_many(ctx, [{"content": f"note {i} about the harbour", "type": "fact"}
                            for i in range(5)])  # fmt: skip
    mem.close()
    with sqlite3.connect(path) as conn:  # roll the schema back to migration 0008
        conn.executescript(_LATER)
    upgraded = open_mem(f"sqlite:///{path}")
    vis = Visibility.of(resolve(ctx))
    assert len(probes.lexical(upgraded.store, vis, "harbour", ALL, 10)) == 5
    upgraded.remember(ctx, "a sixth harbour note", type="fact")
    assert len(probes.lexical(upgraded.store, vis, "harbour", ALL, 10)) == 6
    assert upgraded.recall(ctx, "what about the harbour?").items


def test_the_fts5_index_and_its_counters_are_dropped(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    """0011 drops ``records_fts`` (whose segments kept erased words) and the FTS
    change counters, on a new database and on one written before it."""
    path = tmp_path / "fts.db"
    mem = open_mem(f"sqlite:///{path}")
    mem.remember(ctx, "the harbour crane is blue", type="fact")
    mem.close()
    with sqlite3.connect(path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        totals = {row[0] for row in conn.execute("SELECT name FROM index_totals")}
    assert not {n for n in names if "fts" in n}
    assert totals == {"vectors"}
    upgraded = open_mem(f"sqlite:///{path}")
    vis = Visibility.of(resolve(ctx))
    assert len(probes.lexical(upgraded.store, vis, "harbour crane", ALL, 10)) == 1
