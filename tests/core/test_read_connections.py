"""Reads outside a transaction use a per-thread connection: they neither wait for
another thread's write nor see its uncommitted rows; the writing thread sees them."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engram import Context, Engram
from engram.scope import resolve
from engram.store.contract import Listing
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "expired")


def test_a_read_does_not_wait_for_another_threads_open_write(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = open_mem(f"sqlite:///{tmp_path}/r.db")
    committed = mem.remember(ctx, "The staging cluster runs in eu-west-1.").record
    assert committed is not None
    vis = Visibility.of(resolve(ctx))
    inside, release = threading.Event(), threading.Event()
    seen_by_writer: list[int] = []

    def writer() -> None:
        with mem.store.transaction():
            mem.remember(ctx, "The production cluster runs in us-east-2.")
            seen_by_writer.append(len(mem.store.listing(vis, Listing(ALL, None, 100))))
            inside.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert inside.wait(timeout=30)
        # The write transaction is open and holds the store's lock: this read must
        # neither block on it nor see its uncommitted row.
        assert [r.id for r in mem.store.listing(vis, Listing(ALL, None, 100))] == [committed.id]
    finally:
        release.set()
        thread.join(timeout=30)
    assert seen_by_writer == [2]
    assert len(mem.store.listing(vis, Listing(ALL, None, 100))) == 2


def test_memory_stores_keep_one_connection(open_mem: Callable[..., Engram], ctx: Context) -> None:
    mem = open_mem("sqlite://:memory:")
    mem.remember(ctx, "The staging cluster runs in eu-west-1.")
    found: list[int] = []
    thread = threading.Thread(target=lambda: found.append(len(mem.list(ctx))))
    thread.start()
    thread.join(timeout=30)
    assert found == [1]


def test_a_finished_threads_read_connection_is_closed(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = open_mem(f"sqlite:///{tmp_path}/t.db")
    mem.remember(ctx, "The staging cluster runs in eu-west-1.")
    for _ in range(20):
        thread = threading.Thread(target=lambda: mem.list(ctx))
        thread.start()
        thread.join(timeout=30)
    gc.collect()
    assert len(mem.store._readers) <= 1  # not one per finished thread


def test_reads_follow_the_file_not_the_working_directory(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mem = open_mem("sqlite:///relative.db")
    mem.remember(ctx, "The staging cluster runs in eu-west-1.")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    found: list[int] = []
    thread = threading.Thread(target=lambda: found.append(len(mem.list(ctx))))
    thread.start()
    thread.join(timeout=30)
    assert found == [1]
    assert not (elsewhere / "relative.db").exists()
