"""Int8 shortlists change nothing a caller sees: same ids, exact scores, same scope;
the SIMD kernels agree with numpy."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests import probes

from engram import Context, Engram, kernels
from engram.config import Config, SQLiteConfig, StoreConfig
from engram.scope import resolve
from engram.store import quantize
from engram.store.predicate import Visibility
from engram.store.vectors import Partition, Scan, ScanPolicy, best_positions, top_k

ALL = ("active", "superseded", "expired")


def test_codes_reconstruct_rows_within_half_a_step() -> None:
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((50, 32)).astype(np.float32)
    rows[3] = 0.0
    codes, scales = quantize.encode(rows)
    assert codes.dtype == np.int8
    assert scales[3] == 1.0
    assert not codes[3].any()
    error = np.abs(codes * scales[:, None] - rows)
    assert (error <= scales[:, None] / 2 + 1e-6).all()


def test_estimates_track_exact_scores() -> None:
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((400, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    query = rows[7] + 0.1 * rng.standard_normal(64).astype(np.float32)
    codes, scales = quantize.encode(rows)
    estimates = quantize.estimate(codes, scales, query)
    np.testing.assert_allclose(estimates, rows @ query, atol=0.02)
    assert quantize.estimate(codes[:0], scales[:0], query).shape == (0,)


@pytest.mark.parametrize("n", [10, 20_000, 100_000])
@pytest.mark.parametrize("m", [1, 24, 300])
def test_best_positions_are_the_top_scores(n: int, m: int) -> None:
    rng = np.random.default_rng(n + m)
    scores = rng.standard_normal(n).astype(np.float32)
    got = best_positions(scores, m)
    assert got.size == min(m, n) == len(set(got.tolist()))
    assert np.sort(scores[got])[::-1].tolist() == np.sort(scores)[::-1][: min(m, n)].tolist()


def test_best_positions_with_heavy_ties_falls_back_correctly() -> None:
    scores = np.zeros(50_000, dtype=np.float32)
    scores[[5, 70, 49_999]] = [3.0, 2.0, 1.0]
    got = best_positions(scores, 10)
    assert got.size == 10
    assert {5, 70, 49_999} <= set(got.tolist())


def test_an_estimated_scan_ranks_by_exact_scores(make_partition: Callable[..., Partition]) -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((3000, 48)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    part = make_partition(rows, ["u1"] * 3000)
    vis = Visibility("t", "u1", "", (None, None, None, None))
    query = rows[11] + 0.2 * rng.standard_normal(48).astype(np.float32)
    exact_rows, exact_scores, estimated = part.search(vis, query, ScanPolicy())
    assert not estimated
    est_rows, est_scores, estimated = part.search(vis, query, ScanPolicy(estimate_rows=1))
    assert estimated
    assert not np.array_equal(est_scores, exact_scores)  # really estimates
    want = top_k(Scan([(part, exact_rows)], exact_scores, query), 20)
    got = top_k(Scan([(part, est_rows)], est_scores, query, estimated=True), 20)
    assert [i for i, _ in got] == [i for i, _ in want]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-6)


def test_visible_rows_follow_the_caller_and_appends(
    make_partition: Callable[..., Partition],
) -> None:
    rows = np.eye(4, dtype=np.float32)
    part = make_partition(rows[:3], ["u1", "u2", "u1"])
    u1 = Visibility("t", "u1", "", (None, None, None, None))
    u2 = Visibility("t", "u2", "", (None, None, None, None))
    assert part.visible_rows(u1).tolist() == [0, 2]
    assert part.visible_rows(u2).tolist() == [1]
    part.append([(9, "r3", "u1", "user", "", rows[3].tobytes())])
    assert part.visible_rows(u1).tolist() == [0, 2, 3]


@pytest.fixture
def stores(
    open_mem: Callable[..., Engram], tmp_path: Path
) -> tuple[Engram, Engram, Context, Context]:
    url = f"sqlite:///{tmp_path}/v.db"

    def config(rows: int) -> Config:
        return Config(store=StoreConfig(sqlite=SQLiteConfig(vector_estimate_rows=rows)))

    exact = open_mem(url, config=config(0))
    estimated = open_mem(url, config=config(1))
    alice = Context(tenant_id="acme", user_id="alice", agent_id="coder")
    bob = Context(tenant_id="acme", user_id="bob", agent_id="coder")
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(300)]
    for who in (alice, bob):
        exact.remember_many(who, [
            {"content": " ".join(rng.choice(words, 6, replace=False)), "type": "fact"}
            for _ in range(400)])  # fmt: skip
    return exact, estimated, alice, bob


def test_store_vector_search_is_the_same_with_estimates(
    stores: tuple[Engram, Engram, Context, Context],
) -> None:
    exact, estimated, alice, bob = stores
    model = exact.embedder.model_id
    for who in (alice, bob):
        vis = Visibility.of(resolve(who))
        for text in ("w1 w2 w3", "w10 w200 w77 w5", "w299"):
            query = exact.embedder.embed([text])[0]
            want = probes.vector(exact.store, vis, query, model, ALL, 15)
            got = probes.vector(estimated.store, vis, query, model, ALL, 15)
            assert [i for i, _ in got] == [i for i, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-6)
            assert {estimated.get(who, i).user_id for i, _ in got} == {who.user_id}


def test_without_the_int8_kernels_the_scan_is_exact(
    stores: tuple[Engram, Engram, Context, Context], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, estimated, alice, _ = stores
    monkeypatch.setattr(quantize, "available", lambda: False)
    assert not ScanPolicy(estimate_rows=1).estimates(10)
    vis = Visibility.of(resolve(alice))
    query = estimated.embedder.embed(["w1 w2"])[0]
    assert probes.vector(estimated.store, vis, query, estimated.embedder.model_id, ALL, 5)


@pytest.mark.parametrize("shape", [(0, 8, 5), (1, 8, 1), (40, 384, 37)])
def test_pairwise_dots_match_einsum_with_and_without_simd(shape: tuple[int, int, int]) -> None:
    rows, dim, cols = shape
    rng = np.random.default_rng(rows + cols)
    a = rng.standard_normal((rows, dim)).astype(np.float32)
    b = rng.standard_normal((cols, dim)).astype(np.float32)
    want = a @ b.T
    for simd in (True, False):
        got = kernels.pairwise_dots(a, b, simd=simd)
        assert got.dtype == np.float32
        assert got.shape == (rows, cols)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_vectors_of_from_memory_equal_the_stored_ones_and_stay_scoped(
    stores: tuple[Engram, Engram, Context, Context],
) -> None:
    warm, cold, alice, bob = stores
    model = warm.embedder.model_id
    a_vis, b_vis = Visibility.of(resolve(alice)), Visibility.of(resolve(bob))
    query = warm.embedder.embed(["w1 w2"])[0]
    ids = [i for i, _ in probes.vector(warm.store, a_vis, query, model, ALL, 30)]
    ids += [i for i, _ in probes.vector(warm.store, b_vis, query, model, ALL, 30)] + ["missing"]
    assert warm.store._vector_engine.cached(a_vis, ids, model) is not None  # partitions are warm
    for vis in (a_vis, b_vis):
        got = warm.store.vectors(vis, ids, model)
        want = cold.store.vectors(vis, ids, model)  # nothing cached there: SQLite
        assert sorted(got) == sorted(want)
        assert len(got) == 30
        for record_id, vector in got.items():
            np.testing.assert_array_equal(vector, want[record_id])
    record = warm.remember(alice, "w1 w2 brand new", type="fact").record
    assert record is not None
    added = record.id
    assert warm.store._vector_engine.cached(a_vis, [added], model) is None  # stale: SQLite answers
    assert list(warm.store.vectors(a_vis, [added], model)) == [added]


def test_the_simd_kernels_keep_none_alive() -> None:
    """SimSIMD's ``out=`` form dropped a reference to None on every call, which
    aborts the interpreter once None's count reaches zero; the kernels avoid it."""
    rng = np.random.default_rng(9)
    rows = rng.standard_normal((64, 32)).astype(np.float32)
    codes, scales = quantize.encode(rows)
    before = sys.getrefcount(None)
    for _ in range(500):
        kernels.pairwise_dots(rows[:3], rows)
        quantize.estimate(codes, scales, rows[0])
    assert sys.getrefcount(None) >= before - 50  # other code may drop a few; not 1,000


def test_a_large_append_is_encoded_in_chunks_like_a_small_one(
    monkeypatch: pytest.MonkeyPatch, make_partition: Callable[..., Partition]
) -> None:
    rng = np.random.default_rng(11)
    rows = rng.standard_normal((50, 8)).astype(np.float32)
    whole = make_partition(rows, ["u1"] * 50)
    monkeypatch.setattr("engram.store.vectors._APPEND_CHUNK", 7)
    chunked = make_partition(rows, ["u1"] * 50)
    np.testing.assert_array_equal(chunked.matrix[:50], whole.matrix[:50])
    np.testing.assert_array_equal(chunked.codes[:50], whole.codes[:50])
    np.testing.assert_array_equal(chunked.scales[:50], whole.scales[:50])
    assert chunked.ids == whole.ids
