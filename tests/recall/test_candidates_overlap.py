"""Channels may run on worker threads beside the others; results do not change."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engram import Context, Engram, FrozenClock
from engram.config import Config, RecallConfig, SQLiteConfig, StoreConfig
from engram.recall.model import RecallResult


def _world(mem: Engram, ctx: Context) -> None:
    for i in range(40):
        mem.remember(ctx, f"Note {i}: the build of service {i % 7} failed on runner {i % 5}.",
                     type="episode")  # fmt: skip
    mem.remember(ctx, "Always run the linter before pushing.", type="rule", scope="user")


def test_overlapped_and_sequential_channels_agree(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    seq = Config(store=StoreConfig(sqlite=SQLiteConfig(overlapped_probes=frozenset())))
    a = open_mem(f"sqlite:///{tmp_path}/a.db", config=Config())
    b = open_mem(f"sqlite:///{tmp_path}/b.db", config=seq)
    _world(a, ctx)
    _world(b, ctx)
    for query in ("why did the build of service 3 fail", "linter before pushing", "runner 4"):
        ra, rb = a.recall(ctx, query), b.recall(ctx, query)
        assert [i.record.content for i in ra.items] == [i.record.content for i in rb.items]
        assert list(ra.trace.channels) == list(rb.trace.channels)
        assert {n: c.count for n, c in ra.trace.channels.items()} == {
            n: c.count for n, c in rb.trace.channels.items()
        }


def test_recall_inside_an_open_transaction_does_not_deadlock(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = open_mem(f"sqlite:///{tmp_path}/t.db")
    _world(mem, ctx)
    results: list[RecallResult] = []

    def inside() -> None:
        with mem.store.transaction():
            results.append(mem.recall(ctx, "why did the build of service 3 fail"))

    worker = threading.Thread(target=inside, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "recall inside a transaction deadlocked"
    assert results[0].items


def _recall_in_child(url: str, ctx: Context, now: datetime, out: Any) -> None:
    mem = Engram.open(url, embedder="hashing")
    try:
        out.put(len(mem.recall(ctx, "why did the build of service 3 fail", now=now).items))
    finally:
        mem.close()


def test_a_forked_child_can_recall_after_the_parent_did(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context, clock: FrozenClock
) -> None:
    """Worker pools are per process: a child forked after the parent used them (a
    pre-fork server) builds its own instead of waiting on threads it lacks."""
    url = f"sqlite:///{tmp_path}/f.db"
    mem = open_mem(url)
    _world(mem, ctx)
    assert mem.recall(ctx, "why did the build of service 3 fail").items  # pools now exist
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    child = fork.Process(target=_recall_in_child, args=(url, ctx, clock.now(), out))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("recall in a forked child hung")
    assert child.exitcode == 0
    assert out.get(timeout=5) > 0


def test_a_context_window_of_zero_adds_no_neighbours_and_no_error(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    config = Config(recall=RecallConfig(context_window=0))
    mem = open_mem(f"sqlite:///{tmp_path}/w.db", config=config)
    _world(mem, ctx)
    result = mem.recall(ctx, "why did the build of service 3 fail")
    assert result.status.value == "ok"
    assert result.trace.channels["context"].error is None
    assert result.trace.channels["context"].count == 0
