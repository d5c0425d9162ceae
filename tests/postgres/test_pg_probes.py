"""Every probe kind on PostgreSQL, and scope isolation: no probe and no read ever
returns another tenant's, another user's, another agent's or an unnamed scope's
record; a scope holding 1 % of the vectors still gets k results."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from pg_records import DIM, MODEL, later, make_record, vector_for

from engram.errors import IndexMismatch
from engram.store import contract
from engram.store.postgres import PostgresConfig, PostgresStore
from engram.store.predicate import OwnerSlot, Visibility
from engram.types import Record, Status

VIS = Visibility("acme", "u1", "coder", ("session:s1", None, None, None))
ACTIVE = ("active",)
TEXT = "green tea every morning"


def _world(store: Any) -> tuple[set[str], set[str], dict[str, Record]]:
    """Records the caller may see and records it must never see, all alike (same
    key, words, nearly the same vector, one minute apart)."""
    base = vector_for(TEXT)
    rng = np.random.default_rng(7)
    owners: dict[str, dict[str, Any]] = {
        "mine": {}, "session": {"scope": "session:s1"}, "my agent": {"agent": "coder"},
        "global": {"scope": "global"}, "other session": {"scope": "session:s2"},
        "other agent": {"agent": "a2"}, "other user": {"user": "u2"},
        "other tenant": {"tenant": "globex"},
    }  # fmt: skip
    visible, hidden, made = set(), set(), {}
    for i, (name, owner) in enumerate(owners.items()):
        record = make_record(f"{TEXT} ({name})", key="drink", at=later(i), **owner)
        noise = rng.standard_normal(DIM).astype(np.float32) * 0.01
        store.apply([contract.Insert(record, base + noise)])
        (visible if i < 4 else hidden).add(record.id)
        made[name] = record
    return visible, hidden, made


def _probes(anchor: Record) -> list[contract.Probe]:
    slot = OwnerSlot("acme", "u1", "", "user", writer_agent="coder")
    return [
        contract.KeyProbe(ACTIVE, 20, keys=("drink",)),
        contract.KeyProbe(ACTIVE, 20, types=("fact",)),
        contract.KeyProbe(ACTIVE, 20),
        contract.RecentProbe(ACTIVE, 20),
        contract.RecentProbe(ACTIVE, 20, types=("fact",)),
        contract.LexicalProbe("tea in the morning", ACTIVE, 20),
        contract.VectorProbe(vector_for(TEXT), MODEL, ACTIVE, 20),
        contract.NeighbourProbe((anchor,), ("fact",), ACTIVE, timedelta(hours=1), 10),
        contract.SlotProbe(slot, ACTIVE, key="drink"),
        contract.SlotProbe(slot, ACTIVE, content_hash=anchor.content_hash),
    ]


def test_every_probe_answers_only_within_the_callers_scope(store: Any) -> None:
    visible, hidden, made = _world(store)
    mine = made["mine"]
    results = store.candidates(VIS, _probes(mine))
    for probe, hits in zip(_probes(mine), results, strict=True):
        assert not isinstance(hits, Exception), (probe, hits)
        ids = {record.id for record, _ in hits}
        assert ids, probe
        assert not ids & hidden, (type(probe).__name__, ids & hidden)
    key, _, _, recent, _, lexical, vector, neighbours, by_key, by_hash = (
        {r.id for r, _ in hits} for hits in results
    )
    assert key == recent == lexical == vector == visible
    # the same scope as the anchor ("user"), the anchor itself left out
    assert neighbours == {made["my agent"].id}
    # the slot's own records and the writing agent's, in the slot's scope
    assert by_key == {mine.id, made["my agent"].id}
    assert by_hash == {mine.id}


def test_reads_listing_history_and_vectors_never_cross_scopes(store: Any) -> None:
    visible, hidden, _ = _world(store)
    everything = sorted(visible | hidden)
    assert {r.id for r in store.read(VIS, everything)} == visible
    assert {r.id for r in store.listing(VIS, contract.Listing())} == visible
    assert set(store.vectors(VIS, everything, MODEL)) == visible
    assert all(store.history(VIS, record_id) == [] for record_id in hidden)
    other = Visibility("globex", "u1", "coder", ("session:s1", None, None, None))
    assert {r.id for r in store.read(other, everything)} <= hidden


def test_scores_rank_best_first(store: Any) -> None:
    close = make_record("tea tea tea with lemon", at=later(1))
    far = make_record("coffee, and once a week some tea", at=later(2))
    store.apply([contract.Insert(close, vector_for("tea")), contract.Insert(far, vector_for("x"))])
    lexical, vector = store.candidates(VIS, [
        contract.LexicalProbe("tea", ACTIVE, 5),
        contract.VectorProbe(vector_for("tea"), MODEL, ACTIVE, 5),
    ])  # fmt: skip
    assert [r.id for r, _ in lexical] == [close.id, far.id]
    assert lexical[0][1] > lexical[1][1] > 0
    assert [r.id for r, _ in vector] == [close.id, far.id]
    assert vector[0][1] == pytest.approx(1.0, abs=1e-5)


def test_probes_filter_by_status(store: Any) -> None:
    retracted = make_record(TEXT, key="drink", status=Status.RETRACTED)
    store.apply([contract.Insert(retracted, vector_for(TEXT))])
    results = store.candidates(VIS, _probes(retracted)[:7])
    assert all(hits == [] for hits in results)


def test_a_vector_probe_of_another_model_is_refused(store: Any) -> None:
    record = make_record("anything")
    store.apply([contract.Insert(record, vector_for("anything"))])
    (answer,) = store.candidates(VIS, [contract.VectorProbe(vector_for("a"), "other", ACTIVE, 3)])
    assert isinstance(answer, IndexMismatch)
    other = make_record("second").replace(embedding_model="other")
    with pytest.raises(IndexMismatch):
        store.apply([contract.Insert(other, vector_for("second"))])


def _bulk(store: Any, user: str, count: int, rng: np.random.Generator) -> None:
    for start in range(0, count, 500):
        batch = []
        for i in range(start, min(count, start + 500)):
            vector = rng.standard_normal(DIM).astype(np.float32)
            record = make_record(f"{user} memory {i}", user=user, at=later(i))
            batch.append(contract.Insert(record, vector / np.linalg.norm(vector)))
        store.apply(batch)


def _exact(store: Any, vis: Visibility, query: np.ndarray, k: int) -> list[str]:
    rows = store.listing(vis, contract.Listing())
    found = store.vectors(vis, [r.id for r in rows], MODEL)
    ids = list(found)
    scores = np.stack([found[i] for i in ids]) @ query
    return [ids[j] for j in np.argsort(-scores)[:k]]


@pytest.mark.parametrize(("max_scan", "exact_below"), [(20_000, 0), (40, 0), (20_000, 1_000)])
def test_a_scope_holding_one_percent_of_the_vectors_still_gets_k_results(
    pg_url: str, max_scan: int, exact_below: int
) -> None:
    """With ``exact_below_rows`` above the scope's size the answer is exact; without
    it, the index walk (or its exact fallback) still finds k of the scope's rows."""
    config = PostgresConfig(hnsw_max_scan_tuples=max_scan, exact_below_rows=exact_below)
    store = PostgresStore.open(pg_url, config)
    try:
        rng = np.random.default_rng(1)
        _bulk(store, "crowd", 4000, rng)
        _bulk(store, "rare", 40, rng)
        with store.connection("analyze") as conn:
            conn.execute("ANALYZE records")
        rare = Visibility("acme", "rare", "", (None, None, None, None))
        for _ in range(5):
            query = rng.standard_normal(DIM).astype(np.float32)
            query /= np.linalg.norm(query)
            (hits,) = store.candidates(rare, [contract.VectorProbe(query, MODEL, ACTIVE, 10)])
            assert len(hits) == 10
            assert {r.user_id for r, _ in hits} == {"rare"}
            recall = len({r.id for r, _ in hits} & set(_exact(store, rare, query, 10))) / 10
            assert recall >= (1.0 if exact_below else 0.9)
            scores = [score for _, score in hits]
            assert scores == sorted(scores, reverse=True)
    finally:
        store.close()


def _lexical(store: PostgresStore, text: str, limit: int) -> list[str]:
    (hits,) = store.candidates(VIS, [contract.LexicalProbe(text, ACTIVE, limit)])
    assert not isinstance(hits, Exception)
    return [record.id for record, _ in hits]


def test_a_bounded_lexical_probe_ranks_at_most_its_bound_of_matches(pg_url: str) -> None:
    """``lexical_rank_rows`` bounds the matches ranked; a caller with no more
    matches than the bound gets exactly the unbounded answer."""
    wide = PostgresStore.open(pg_url, PostgresConfig(lexical_rank_rows=0))
    narrow = PostgresStore.open(pg_url, PostgresConfig(lexical_rank_rows=4))
    try:
        for i in range(12):  # the longer the content, the lower its rank
            filler = " ".join(["filler"] * (i % 5))
            wide.apply([contract.Insert(make_record(f"kettle {filler} n{i}", at=later(i)))])
        wide.apply([contract.Insert(make_record("a teapot note", at=later(20)))])
        everything = _lexical(wide, "kettle", 20)
        assert len(everything) == 12
        assert len(_lexical(narrow, "kettle", 20)) == 4  # four matches ranked, not twelve
        assert set(_lexical(narrow, "kettle", 20)) < set(everything)
        assert _lexical(narrow, "teapot", 20) == _lexical(wide, "teapot", 20)  # one match
        assert _lexical(narrow, "kettle", 3) != []
    finally:
        wide.close()
        narrow.close()
