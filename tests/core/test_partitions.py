"""In-memory partitions hold committed rows only, never deadlock a transaction, cope
with appends racing a search, break ties the same way with and without int8
estimates, and forget what a forget or an erasure removes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests import probes

from engram import Context, Engram
from engram.scope import resolve
from engram.store.lexicon import porter
from engram.store.predicate import Visibility
from engram.store.vectors import Partition, Scan, ScanPolicy, top_k

ALL = ("active", "superseded", "expired")
VIS = Visibility("t", "u1", "", (None, None, None, None))


class Rollback(Exception):
    """Raised to roll a transaction back."""


def test_a_rolled_back_savepoint_leaves_no_trace_in_memory(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "s.db")
    vis = Visibility.of(resolve(ctx))
    model = mem.embedder.model_id
    mem.remember(ctx, "the office coffee machine is broken", type="fact")
    with mem.store.transaction():
        try:
            with mem.store.transaction():  # a savepoint
                mem.remember(ctx, "zebra sighting near the lake", type="fact")
                assert probes.lexical(mem.store, vis, "zebra", ALL, 5)  # seen inside
                probes.vector(mem.store, vis, mem.embedder.embed(["zebra"])[0], model, ALL, 5)
                raise Rollback
        except Rollback:
            pass
        record = mem.remember(ctx, "giraffe sighting near the river", type="fact").record
        assert record is not None
        assert [i for i, _ in probes.lexical(mem.store, vis, "giraffe", ALL, 5)] == [record.id]
    assert [i for i, _ in probes.lexical(mem.store, vis, "giraffe", ALL, 5)] == [record.id]
    assert probes.lexical(mem.store, vis, "zebra", ALL, 5) == []
    query = mem.embedder.embed(["giraffe sighting near the river"])[0]
    assert record.id in [i for i, _ in probes.vector(mem.store, vis, query, model, ALL, 5)]


def test_uncommitted_rows_do_not_change_another_threads_ranking(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "d.db")
    vis = Visibility.of(resolve(ctx))
    mem.remember(ctx, "alpha kiwi", type="fact")
    mem.remember(ctx, "bravo kiwi", type="fact")

    def ranking_elsewhere() -> list[str]:
        out: list[list[str]] = []
        thread = threading.Thread(target=lambda: out.append(
            [i for i, _ in probes.lexical(mem.store, vis, "alpha bravo", ("active",), 5)]
        ))  # fmt: skip
        thread.start()
        thread.join()
        return out[0]

    before = ranking_elsewhere()
    seen: list[int] = []
    try:
        with mem.store.transaction():
            mem.remember_many(ctx, [{"content": f"alpha draft {i}", "type": "fact"}
                                    for i in range(300)])  # fmt: skip
            seen.append(len(probes.lexical(mem.store, vis, "alpha", ALL, 500)))  # its own writes
            assert ranking_elsewhere() == before
            raise Rollback
    except Rollback:
        pass
    assert seen == [301]
    assert ranking_elsewhere() == before


def test_a_transaction_never_waits_for_a_partition_load(ctx: Context) -> None:
    """On a single-connection store a loader waits for the store's lock, which an
    open transaction holds; the transaction must not wait for the loader."""
    mem = Engram.open("sqlite://:memory:", embedder="hashing")
    store = mem.store
    vis = Visibility.of(resolve(ctx))
    mem.remember(ctx, "the zebra crossing is closed", type="fact")
    loading, in_transaction = threading.Event(), threading.Event()
    original = store._rows

    def rows(query: Any, plain: bool = False) -> Any:
        if threading.current_thread().name == "loader" and "r.rowid > :after" in query[0]:
            loading.set()
            in_transaction.wait(5)
        return original(query, plain)

    store._rows = rows  # type: ignore[method-assign]

    def writer() -> None:
        loading.wait(5)
        with store.transaction():
            in_transaction.set()
            probes.lexical(store, vis, "zebra", ("active",), 5)

    threads = [threading.Thread(target=lambda: probes.lexical(store, vis, "zebra", ("active",), 5),
                                name="loader", daemon=True),
               threading.Thread(target=writer, name="writer", daemon=True)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
    mem.close()


@pytest.mark.parametrize("hidden", [False, True])
def test_a_search_racing_an_append_keeps_rows_and_scores_aligned(
    hidden: bool, make_partition: Callable[..., Partition]
) -> None:
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((200, 16)).astype(np.float32)
    users = ["u1" if i % 2 or not hidden else "u2" for i in range(200)]
    part = make_partition(rows[:100], users[:100])
    original = part.owners.visible

    def racing(vis: Visibility, size: int | None = None) -> Any:
        if part.size == 100:  # another thread's refresh lands here
            part.append([(1000 + i, f"n{i}", users[100 + i], "user", "", rows[100 + i].tobytes())
                         for i in range(100)])  # fmt: skip
        return original(vis, size)

    part.owners.visible = racing  # type: ignore[method-assign]
    got, scores, _ = part.search(VIS, rows[0], ScanPolicy())
    assert got.size == scores.size
    assert got.max() < 100
    np.testing.assert_allclose(scores, part.matrix[got] @ rows[0], rtol=1e-5)


def test_vectors_of_racing_an_append_does_not_fail(
    make_partition: Callable[..., Partition],
) -> None:
    rows = np.random.default_rng(4).standard_normal((20, 16)).astype(np.float32)
    part = make_partition(rows[:10])
    original = part.owners.visible

    def racing(vis: Visibility, size: int | None = None) -> Any:
        out = original(vis, size)  # the mask covers 10 rows
        part.append([(100, "new", "u1", "user", "", rows[10].tobytes())])
        return out

    part.owners.visible = racing  # type: ignore[method-assign]
    assert "r0" in part.vectors_of(VIS, ["r0", "new"])


def test_exact_ties_break_the_same_way_with_and_without_estimates(
    make_partition: Callable[..., Partition],
) -> None:
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((20_000, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[rng.choice(20_000, 200, replace=False)] = rows[0]  # one text stored 200 times
    picked = []
    for policy in (ScanPolicy(estimate_rows=0), ScanPolicy(estimate_rows=16_384)):
        part = make_partition(rows)
        found, scores, estimated = part.search(VIS, rows[0], policy)
        picked.append(top_k(Scan([(part, found)], scores, rows[0], estimated), 10))
    assert [i for i, _ in picked[0]] == [i for i, _ in picked[1]]
    assert [i for i, _ in picked[0]] == sorted((i for i, _ in picked[0]), key=lambda i: int(i[1:]))


def test_forgetting_drops_derived_copies_and_cached_words(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "e.db")
    vis = Visibility.of(resolve(ctx))
    source = mem.remember(ctx, "my diagnosis is xyzzyplasia", type="fact",
                          consent_basis="the user asked us to keep it").record  # fmt: skip
    assert source is not None
    derived = mem.remember_global(ctx.tenant_id, "summary: a user has xyzzyplasia", type="fact",
                                  source={"kind": "consolidation", "ref": None,
                                          "derived_from": [source.id]}).record  # fmt: skip
    assert derived is not None
    assert probes.lexical(mem.store, vis, "xyzzyplasia", ALL, 5)  # both partitions are warm
    receipt = mem.erase_subject(ctx.tenant_id, ctx.user_id)
    assert receipt.verified
    assert receipt.derived == 1
    assert not mem.store._lexical_engine._cache._parts
    assert not mem.store._vector_engine._cache._parts
    hits = porter.cache_info().hits
    porter("xyzzyplasia")
    assert porter.cache_info().hits == hits, "an erased word is still cached"
