"""``alive_top``: the best ranked ids that survive the status check, asking about few."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from tests import probes

from engram import Context, Engram
from engram.scope import resolve
from engram.store.contract import LexicalProbe, RecentProbe, VectorProbe
from engram.store.predicate import Visibility
from engram.store.ranking import Ranking, alive_top


class Store:
    """Dead ids, and a record of what was read (mapped to records) and only checked."""

    def __init__(self, dead: set[str]) -> None:
        self.dead = dead
        self.reads: list[list[str]] = []
        self.checks: list[list[str]] = []

    def read(self, ids: list[str]) -> Mapping[str, str]:
        self.reads.append(list(ids))
        return {i: i.upper() for i in ids if i not in self.dead}

    def check(self, ids: list[str]) -> set[str]:
        self.checks.append(list(ids))
        return {i for i in ids if i not in self.dead}

    def top(self, limit: int, ranking: Ranking) -> list[tuple[str, float]]:
        return alive_top(limit, ranking, self.read, self.check)


def _ranking(n: int) -> tuple[Ranking, list[int]]:
    hits = [(f"r{i}", float(n - i)) for i in range(n)]
    depths: list[int] = []

    def top(k: int) -> list[tuple[str, float]]:
        depths.append(k)
        return hits[:k]

    return Ranking(top, n), depths


def test_when_all_survive_one_read_of_exactly_limit_ids_is_all() -> None:
    ranking, depths = _ranking(100)
    store = Store(set())
    assert store.top(5, ranking) == [(f"R{i}", float(100 - i)) for i in range(5)]
    assert store.reads == [[f"r{i}" for i in range(5)]]
    assert store.checks == []
    assert depths == [5]


def test_dead_ids_are_replaced_by_the_next_ones_in_rank_order() -> None:
    ranking, depths = _ranking(100)
    store = Store({"r1", "r3", "r6"})
    assert [h for h, _ in store.top(5, ranking)] == ["R0", "R2", "R4", "R5", "R7"]
    read = [i for batch in store.reads for i in batch]
    assert len(read) == len(set(read)), "an id was read twice"
    assert set(read) == {"r0", "r1", "r2", "r3", "r4", "r5", "r7"}, "only chosen ids are read"
    assert len(store.checks) == 1
    assert depths == [5, 20]


def test_many_dead_ids_cost_a_few_statements_not_one_each() -> None:
    """Retracted near-duplicates can fill the top of a ranking (found in review: the
    first version checked one dead id per statement)."""
    ranking, _ = _ranking(2000)
    store = Store({f"r{i}" for i in range(1, 1500)})
    assert [h for h, _ in store.top(3, ranking)] == ["R0", "R1500", "R1501"]
    assert len(store.reads) == 2
    assert len(store.checks) <= 6


def test_a_short_ranking_returns_what_survives() -> None:
    ranking, _ = _ranking(4)
    assert [h for h, _ in Store({"r2"}).top(10, ranking)] == ["R0", "R1", "R3"]
    assert Store(set()).top(3, Ranking.of([])) == []
    assert Store(set()).top(0, _ranking(5)[0]) == []
    assert [h for h, _ in Store({"r0", "r1"}).top(2, _ranking(2)[0])] == []


def test_a_deeper_ranking_may_reorder_its_prefix() -> None:
    """Int8 shortlists: a deeper pass can find a row the shallow one missed; the
    answer follows the deeper ranking."""
    shallow = [("a", 0.9), ("b", 0.8)]
    deep = [("a", 0.9), ("z", 0.85), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    ranking = Ranking(lambda k: (shallow if k <= 2 else deep)[:k], 5)
    store = Store({"b"})
    assert [h for h, _ in store.top(2, ranking)] == ["A", "Z"]


def test_a_record_that_dies_between_check_and_read_is_replaced() -> None:
    """A concurrent retraction between the check and the read: the next survivor
    takes its place (found in review: the answer came back short)."""
    ranking, _ = _ranking(10)
    store = Store({"r0"})
    real_check = store.check

    def check_then_die(ids: list[str]) -> set[str]:
        alive = real_check(ids)
        store.dead.add("r3")
        return alive

    assert [h for h, _ in alive_top(3, ranking, store.read, check_then_die)] == [
        "R1", "R2", "R4"]  # fmt: skip


def test_a_negative_limit_is_empty() -> None:
    assert Store(set()).top(-1, _ranking(5)[0]) == []


def test_records_a_request_already_read_are_not_read_again(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "k.db")
    vis = Visibility.of(resolve(ctx))
    mem.remember_many(ctx, [{"content": f"note {i} on the kernel", "type": "fact"}
                            for i in range(12)])  # fmt: skip
    query = mem.embedder.embed(["kernel note"])[0]
    model = mem.embedder.model_id
    first = probes.vector_hits(mem.store, vis, query, model, ("active",), 5)
    reads: list[dict[str, object]] = []

    def trace(sql: str, params: Mapping[str, object]) -> None:
        if "json_each(:ids)" in sql:
            reads.append(dict(params))

    every = RecentProbe(("active",), 12)  # reads every record, by scope, not by id
    vector = VectorProbe(query, model, ("active",), 5)
    words = LexicalProbe("kernel", ("active",), 8)
    mem.store.tracer = trace
    try:
        answers = mem.store.candidates(vis, [every, vector, words])
        assert reads == [], "every hit was known: nothing is read again"
        newest = mem.store.candidates(vis, [RecentProbe(("active",), 5), words])
    finally:
        mem.store.tracer = None
    again, found = answers[1], answers[2]
    assert not isinstance(again, Exception)
    assert not isinstance(found, Exception)
    assert [r.id for r, _ in again] == [r.id for r, _ in first]
    assert len(found) == 8
    known, hits = newest
    assert not isinstance(known, Exception)
    assert not isinstance(hits, Exception)
    assert len(hits) == 8
    assert len(reads) == 1
    read = set(json.loads(str(reads[0]["ids"])))
    assert not read & {r.id for r, _ in known}, "a known record was read"
