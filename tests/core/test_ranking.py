"""``alive_top``: the best ranked ids that survive the status check, asking about few."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from engram import Context, Engram
from engram.scope import resolve
from engram.store.predicate import Visibility
from engram.store.ranking import Ranking, alive_top


class Checker:
    """A status check over a fixed set of dead ids that records what it was asked."""

    def __init__(self, dead: set[str]) -> None:
        self.dead = dead
        self.asked: list[list[str]] = []

    def __call__(self, ids: list[str]) -> Mapping[str, str]:
        self.asked.append(list(ids))
        return {i: i.upper() for i in ids if i not in self.dead}


def _ranking(n: int) -> tuple[Ranking, list[int]]:
    hits = [(f"r{i}", float(n - i)) for i in range(n)]
    depths: list[int] = []

    def top(k: int) -> list[tuple[str, float]]:
        depths.append(k)
        return hits[:k]

    return Ranking(top, n), depths


def test_when_all_survive_the_check_runs_once_on_exactly_limit_ids() -> None:
    ranking, depths = _ranking(100)
    check = Checker(set())
    hits = alive_top(5, ranking, check)
    assert hits == [(f"R{i}", float(100 - i)) for i in range(5)]
    assert check.asked == [[f"r{i}" for i in range(5)]]
    assert depths == [5]


def test_dead_ids_are_replaced_by_the_next_ones_in_rank_order() -> None:
    ranking, depths = _ranking(100)
    check = Checker({"r1", "r3", "r6"})
    hits = alive_top(5, ranking, check)
    assert [h for h, _ in hits] == ["R0", "R2", "R4", "R5", "R7"]
    asked = [i for batch in check.asked for i in batch]
    assert len(asked) == len(set(asked)), "an id was checked twice"
    assert set(asked) == {f"r{i}" for i in range(8)}
    assert depths == [5, 20]


def test_a_short_ranking_returns_what_survives() -> None:
    ranking, _ = _ranking(4)
    assert [h for h, _ in alive_top(10, ranking, Checker({"r2"}))] == ["R0", "R1", "R3"]
    assert alive_top(3, Ranking.of([]), Checker(set())) == []
    assert alive_top(0, _ranking(5)[0], Checker(set())) == []


def test_a_deeper_ranking_may_reorder_its_prefix() -> None:
    """Int8 shortlists: a deeper pass can find a row the shallow one missed; the
    answer follows the deeper ranking and reuses the earlier checks."""
    shallow = [("a", 0.9), ("b", 0.8)]
    deep = [("a", 0.9), ("z", 0.85), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    ranking = Ranking(lambda k: (shallow if k <= 2 else deep)[:k], 5)
    check = Checker({"b"})
    assert [h for h, _ in alive_top(2, ranking, check)] == ["A", "Z"]
    asked = [i for batch in check.asked for i in batch]
    assert sorted(asked) == ["a", "b", "z"]


def test_records_a_request_already_read_are_not_read_again(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "k.db")
    vis = Visibility.of(resolve(ctx))
    mem.remember_many(ctx, [{"content": f"note {i} on the kernel", "type": "fact"}
                            for i in range(12)])  # fmt: skip
    query = mem.embedder.embed(["kernel note"])[0]
    model = mem.embedder.model_id
    first = mem.store.vector_hits(vis, query, model, ("active",), 5)
    known = {r.id: r for r, _ in first}
    reads: list[dict[str, object]] = []

    def trace(sql: str, params: Mapping[str, object]) -> None:
        if "json_each(:ids)" in sql:
            reads.append(dict(params))

    mem.store.tracer = trace
    try:
        again = mem.store.vector_hits(vis, query, model, ("active",), 5, known=known)
        assert [r.id for r, _ in again] == [r.id for r, _ in first]
        assert reads == [], "every hit was known: nothing is read"
        words = mem.store.lexical_hits(vis, "kernel", ("active",), 8, known=known)
    finally:
        mem.store.tracer = None
    assert len(words) == 8
    assert len(reads) == 1
    assert not set(json.loads(str(reads[0]["ids"]))) & set(known), "a known record was read"
