"""The SQLite store's durability setting: FULL by default, NORMAL (or another level) by
configuration or by the store URL, and a misspelt setting refused.

``synchronous`` decides whether an acknowledged write survives a power loss (FULL
syncs the WAL at every commit) or only a process crash (NORMAL). The pragma is
read back from the writer connection, the one that commits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engram import Config, Context, Engram
from engram.config import SQLiteConfig, StoreConfig
from engram.errors import ConfigError
from engram.store.open import open_store
from engram.store.sqlite import SQLiteStore
from engram.store.url import sqlite_options, sqlite_path
from engram.working.sqlite import SQLiteWorking

LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}  # PRAGMA synchronous's answers


def _level(store: object) -> str:
    assert isinstance(store, SQLiteStore)
    return LEVELS[int(store._conn.execute("PRAGMA synchronous").fetchone()[0])]


def _working_level(mem: Engram) -> str:
    working = mem.working_store
    assert isinstance(working, SQLiteWorking)
    return LEVELS[int(working._conn.execute("PRAGMA synchronous").fetchone()[0])]


def test_an_acknowledged_write_is_synced_at_commit_by_default(tmp_path: Path) -> None:
    assert SQLiteConfig().synchronous == "FULL"
    store = open_store(f"sqlite:///{tmp_path}/default.db")
    try:
        assert _level(store) == "FULL"
        assert str(store._conn.execute("PRAGMA journal_mode").fetchone()[0]) == "wal"  # type: ignore[attr-defined]
    finally:
        store.close()


@pytest.mark.parametrize("level", ["OFF", "NORMAL", "FULL", "EXTRA"])
def test_the_level_is_a_setting_of_the_config_and_of_the_url(tmp_path: Path, level: str) -> None:
    config = StoreConfig(sqlite=SQLiteConfig(synchronous=level.lower()))
    by_config = open_store(f"sqlite:///{tmp_path}/config.db", config)
    by_url = open_store(f"sqlite:///{tmp_path}/url.db?synchronous={level}")
    try:
        assert (_level(by_config), _level(by_url)) == (level, level)
        assert Path(by_url.path).name == "url.db"  # type: ignore[attr-defined]
    finally:
        by_config.close()
        by_url.close()


def test_the_url_option_overrides_the_config_and_names_the_same_file(tmp_path: Path) -> None:
    ctx = Context(tenant_id="acme", user_id="u1")
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(synchronous="FULL")))
    url = f"sqlite:///{tmp_path}/same.db"
    with Engram.open(url + "?synchronous=NORMAL", embedder="hashing", config=config) as mem:
        assert _level(mem.store) == "NORMAL"
        assert _working_level(mem) == "NORMAL"  # working memory follows the store
        written = mem.remember(ctx, "The staging database listens on port 5433.").record
    assert written is not None
    with Engram.open(url, embedder="hashing") as mem:
        assert (_level(mem.store), _working_level(mem)) == ("FULL", "FULL")
        assert mem.get(ctx, written.id).content == written.content
    assert sorted(p.name for p in tmp_path.iterdir() if "?" in p.name) == []


@pytest.mark.parametrize(
    "query",
    ["?synchronus=FULL", "?synchronous=", "?synchronous=FULL&synchronous=OFF",
     "?synchronous=sometimes", "?busy_timeout_ms=1", "?=FULL"],
)  # fmt: skip
def test_a_misspelt_or_unknown_option_is_refused_before_anything_opens(
    tmp_path: Path, query: str
) -> None:
    with pytest.raises(ConfigError):
        open_store(f"sqlite:///{tmp_path}/bad.db{query}")
    assert not (tmp_path / "bad.db").exists()


def test_a_bare_path_keeps_a_question_mark_in_its_name() -> None:
    assert sqlite_options("odd?name.db") == {}
    assert sqlite_path("odd?name.db") == "odd?name.db"
    assert sqlite_path("sqlite:///dir/x.db?synchronous=OFF") == "dir/x.db"
    assert sqlite_options("sqlite:///dir/x.db?synchronous=OFF") == {"synchronous": "OFF"}
