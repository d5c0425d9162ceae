"""The write lock is held only to decide and commit: never while embedding.

A slow embedder (a large model, a remote endpoint) must not make other
connections' writes, or opening the store, fail with "database is locked" (nor
wait on a PostgreSQL tenant's writer lock); bulk writes commit in bounded chunks.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from tests.conftest import OpenMem

from engram import Config, Context, EmbeddingError, PartialWrite
from engram.config import SQLiteConfig, StoreConfig, WritePolicy
from engram.embed.base import Wrapped
from engram.embed.hashing import HashingEmbedder


class SlowEmbedder(Wrapped):
    """The hashing embedder, but each call signals ``started`` and waits for ``release``."""

    def __init__(self) -> None:
        super().__init__(HashingEmbedder())
        self.started = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.started.set()
        assert self.release.wait(30), "the test never released the embedder"
        return self.inner.embed(texts)


class FailingEmbedder(Wrapped):
    """The hashing embedder, failing from its ``fail_at``-th call on."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(HashingEmbedder())
        self.calls = 0
        self.fail_at = fail_at

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise EmbeddingError("the embedding endpoint went away")
        return self.inner.embed(texts)


def _short_wait() -> Config:
    return Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=300)))


def _while_embedding(slow: SlowEmbedder, call: Any, out: list[Any]) -> threading.Thread:
    """Start ``call`` in a thread (its result or error goes to ``out``) and return once
    it is inside the embedder."""

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert slow.started.wait(10)
    return thread


@pytest.mark.parametrize("operation", ["remember", "remember_many", "correct"])
def test_other_writers_and_open_proceed_while_a_write_embeds(
    shared_url: str, open_mem: OpenMem, ctx: Context, operation: str
) -> None:
    slow = SlowEmbedder()
    writer = open_mem(shared_url, embedder=slow, config=_short_wait())
    other = open_mem(shared_url, config=_short_wait())
    seeded = other.remember(ctx, "The build uses Gradle 8.", key="build.tool", value="gradle")
    assert seeded.record is not None
    target = seeded.record.id
    calls = {
        "remember": lambda: writer.remember(ctx, "Release trains leave on Thursdays."),
        "remember_many": lambda: writer.remember_many(ctx, [{"content": "Staging resets at 6."}]),
        "correct": lambda: writer.correct(ctx, target, "The build uses Bazel.", value="bazel"),
    }
    out: list[Any] = []
    thread = _while_embedding(slow, calls[operation], out)
    try:
        written = other.remember(ctx, "Code review needs two approvals.")  # must not wait
        assert written.record is not None
        reopened = open_mem(shared_url, config=_short_wait())
        assert reopened.get(ctx, written.record.id).content == "Code review needs two approvals."
    finally:
        slow.release.set()
        thread.join(30)
    assert len(out) == 1
    assert not isinstance(out[0], Exception), out
    assert len(writer.list(ctx, status=None, limit=100)) == 3


def test_bulk_writes_commit_in_bounded_chunks(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    config = Config(write=WritePolicy(batch_items=100))
    mem = open_mem(shared_url, config=config)
    statements: list[str] = []
    mem.store.tracer = lambda sql, params: statements.append(sql)
    items = [{"content": f"Service {i} listens on port {9000 + i}."} for i in range(250)]
    results = mem.remember_many(ctx, items)
    mem.store.tracer = None
    assert [r.record.content for r in results if r.record] == [i["content"] for i in items]
    # one transaction per chunk (PostgreSQL's tracer sees each COMMIT, not its BEGIN)
    opening = "COMMIT" if type(mem.store).__name__ == "PostgresStore" else "BEGIN IMMEDIATE"
    assert statements.count(opening) == 3
    assert len(mem.list(ctx, limit=1000)) == 250


def test_a_failed_chunk_reports_what_landed_and_writes_none_of_itself(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    config = Config(write=WritePolicy(batch_items=50))
    mem = open_mem(shared_url, config=config, embedder=FailingEmbedder(fail_at=3))
    items = [{"content": f"Queue {i} drains every {i + 1} minutes."} for i in range(120)]
    with pytest.raises(PartialWrite) as raised:
        mem.remember_many(ctx, items)
    assert len(raised.value.results) == 100
    assert isinstance(raised.value.__cause__, EmbeddingError)
    stored = {r.content for r in mem.list(ctx, limit=1000)}
    assert stored == {i["content"] for i in items[:100]}


def test_one_chunk_is_all_or_nothing(shared_url: str, open_mem: OpenMem,
                                     ctx: Context) -> None:  # fmt: skip
    mem = open_mem(shared_url, embedder=FailingEmbedder(fail_at=1))
    with pytest.raises(EmbeddingError):
        mem.remember_many(ctx, [{"content": "Alpha runs on Mondays."},
                                {"content": "Beta runs on Tuesdays."}])  # fmt: skip
    assert mem.list(ctx, limit=10) == []


def test_a_bad_item_anywhere_writes_nothing(shared_url: str, open_mem: OpenMem,
                                            ctx: Context) -> None:  # fmt: skip
    mem = open_mem(shared_url, config=Config(write=WritePolicy(batch_items=10)))
    items: list[dict[str, Any]] = [{"content": f"Fact number {i}."} for i in range(40)]
    items[35] = {"content": "Bad confidence.", "confidence": 7}
    with pytest.raises(ValueError, match="confidence"):
        mem.remember_many(ctx, items)
    assert mem.list(ctx, limit=100) == []


@pytest.mark.parametrize("status", ["active", "superseded"])
def test_other_writers_proceed_while_an_import_embeds(
    shared_url: str, open_mem: OpenMem, ctx: Context, status: str
) -> None:
    slow = SlowEmbedder()
    writer = open_mem(shared_url, embedder=slow, config=_short_wait())
    other = open_mem(shared_url, config=_short_wait())
    source = dataclasses.replace(ctx, user_id="exporter")
    other.remember(source, "The build uses Gradle 8.", key="build.tool", value="gradle")
    rows = [{**row, "status": status} for row in other.export(source)]
    out: list[Any] = []
    thread = _while_embedding(slow, lambda: writer.import_records(ctx, rows), out)
    try:
        written = other.remember(ctx, "Code review needs two approvals.")  # must not wait
        assert written.record is not None
    finally:
        slow.release.set()
        thread.join(30)
    assert len(out) == 1
    assert not isinstance(out[0], Exception), out
    assert len(writer.list(ctx, status=None, limit=100)) == 2


class CrashingEmbedder(FailingEmbedder):
    """Fails like a buggy custom embedder: a plain ``RuntimeError``."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        try:
            return super().embed(texts)
        except EmbeddingError:
            raise RuntimeError("custom embedder bug") from None


def test_a_later_chunk_crashing_in_any_way_is_a_partial_write(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    config = Config(write=WritePolicy(batch_items=50))
    mem = open_mem(shared_url, config=config, embedder=CrashingEmbedder(fail_at=2))
    items = [{"content": f"Queue {i} drains every {i + 1} minutes."} for i in range(80)]
    with pytest.raises(PartialWrite) as raised:
        mem.remember_many(ctx, items)
    assert len(raised.value.results) == 50
    assert len(mem.list(ctx, limit=1000)) == 50
