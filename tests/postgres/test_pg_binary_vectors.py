"""The binary vectors of the PostgreSQL multi-row insert, and batched slot probes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.postgres.pg_records import DIM, make_record, vector_for

from engram.errors import StoreError
from engram.store.contract import Insert
from engram.store.predicate import Visibility
from engram.types import Status

VIS = Visibility("acme", "u1", "", (None, None, None, None))


def _ins(store: Any, changes: list[Insert]) -> None:
    with store.transaction():
        store.apply(changes)


def test_mixed_none_and_vectors(store: Any) -> None:
    a, b, c = make_record("a one"), make_record("b two", embedded=False), make_record("c three")
    _ins(store, [Insert(a, vector_for("a one")), Insert(b, None), Insert(c, vector_for("c three"))])
    got = store.vectors(VIS, [a.id, b.id, c.id], "hashing-384")
    assert np.allclose(got[a.id], vector_for("a one"))


def test_all_none(store: Any) -> None:
    a, b = make_record("x one", embedded=False), make_record("y two", embedded=False)
    _ins(store, [Insert(a, None), Insert(b, None)])
    assert len(store.read(VIS, [a.id, b.id])) == 2


def test_float64_vector(store: Any) -> None:
    a, b = make_record("f one"), make_record("f two")
    _ins(
        store,
        [
            Insert(a, vector_for("f one").astype(np.float64)),
            Insert(b, vector_for("f two").astype(np.float64)),
        ],
    )
    got = store.vectors(VIS, [a.id], "hashing-384")
    assert np.allclose(got[a.id], vector_for("f one"))


def test_nan_vector_is_refused_and_nothing_written(store: Any) -> None:
    a, b = make_record("n one"), make_record("n two")
    bad = vector_for("n two").copy()
    bad[3] = np.nan
    with pytest.raises(StoreError, match="NaN not allowed"):
        _ins(store, [Insert(a, vector_for("n one")), Insert(b, bad)])
    assert store.read(VIS, [a.id, b.id]) == []


def test_wrong_dimension_refused(store: Any) -> None:
    a, b = make_record("d one"), make_record("d two")
    _ins(store, [Insert(make_record("d zero"), vector_for("d zero"))])
    with pytest.raises(StoreError, match="expected 384 dimensions"):
        _ins(store, [Insert(a, vector_for("d one")), Insert(b, np.ones(DIM + 1, np.float32))])
    assert store.read(VIS, [a.id, b.id]) == []


def test_batched_slot_probes_answer_as_alone(store: Any) -> None:
    from engram.store.contract import SlotProbe
    from engram.store.predicate import OwnerSlot

    slot = OwnerSlot.of("acme", "u1", "coder", "user", "coder")
    rows = [make_record(f"v{i}", key="k", version=i, agent="coder") for i in (1, 3, 2)]
    rows = [r.replace(status=Status.SUPERSEDED) if r.version < 3 else r for r in rows]
    twins = [make_record("same text", agent=a) for a in ("coder", None, "other")]
    _ins(store, [Insert(r, None) for r in [*rows, *twins]])
    statuses = ("active", "superseded")
    runs = [
        [SlotProbe(slot, statuses, key="k"), SlotProbe(slot, statuses, key="none")],
        [
            SlotProbe(slot, statuses, content_hash=twins[0].content_hash),
            SlotProbe(slot, ("active",), key="k"),
        ],
    ]
    for probes in runs:
        alone = store.candidates(slot.visibility, probes)
        with store.transaction():
            batched = store.candidates(slot.visibility, probes)
        ids = lambda answers: [[r.id for r, _ in a] for a in answers]  # noqa: E731
        assert ids(batched) == ids(alone)
        assert ids(alone) != [[], []]


def test_a_failed_run_of_slot_probes_is_asked_again_probe_by_probe(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the one statement of a run of slot probes fails, no probe gets an error
    that was not its own: each is asked again alone and answers."""
    from engram.store.contract import SlotProbe
    from engram.store.postgres import slot_batch
    from engram.store.predicate import OwnerSlot

    slot = OwnerSlot.of("acme", "u1", "coder", "user", "coder")
    _ins(store, [Insert(make_record("keyed", key="k", agent="coder"), None)])
    probes = [SlotProbe(slot, ("active",), key="k"), SlotProbe(slot, ("active",), key="none")]
    alone = [[r.id for r, _ in a] for a in store.candidates(slot.visibility, probes)]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the batched statement failed")

    monkeypatch.setattr(slot_batch, "answer", broken)
    with store.transaction():
        answers = store.candidates(slot.visibility, probes)
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert [[r.id for r, _ in a] for a in answers] == alone
    assert alone[0]
    assert not alone[1]
