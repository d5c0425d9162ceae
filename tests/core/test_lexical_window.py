"""FTS5 engine: an unselective query ranks a bounded window of its newest matches;
a selective one still ranks every match."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engram import Context, Engram
from engram.config import Config, StoreConfig
from engram.scope import resolve
from engram.store.lexical import rank_window
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "expired")


def test_rank_window_is_unbounded_for_rare_terms_only() -> None:
    assert rank_window({"a": 5, "b": 9}, ["a", "b"], cap=10, window=3) is None
    assert rank_window({"a": 5, "b": 11}, ["a", "b"], cap=10, window=3) == 8
    assert rank_window({"a": 11, "b": 11}, ["a", "b"], cap=10, window=3) == 3


def _store(open_mem: Callable[..., Engram], path: Path, window: int) -> Engram:
    store = StoreConfig(fts_term_cap=3, fts_rank_window=window, lexical_engine="fts5")
    config = Config(store=store)
    return open_mem(f"sqlite:///{path}", config=config)


def test_common_terms_rank_only_the_newest_matches(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    first = _store(open_mem, tmp_path / "w.db", window=2)
    best = "alpha beta"  # the shortest match: the best BM25 score, and the oldest
    first.remember(ctx, best, type="fact")
    first.remember_many(ctx, [{"content": f"alpha notes on item {i} beta and more", "type": "fact"}
                              for i in range(10)])  # fmt: skip
    vis = Visibility.of(resolve(ctx))
    windowed = [first.get(ctx, i).content for i, _ in first.store.lexical(vis, best, ALL, 1)]
    assert windowed
    assert windowed[0] != best
    wide = _store(open_mem, tmp_path / "w.db", window=100)
    assert [wide.get(ctx, i).content for i, _ in wide.store.lexical(vis, best, ALL, 1)] == [best]


def test_a_rare_term_still_ranks_every_match(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = _store(open_mem, tmp_path / "r.db", window=1)
    mem.remember(ctx, "gamma", type="fact")
    mem.remember_many(ctx, [{"content": f"gamma {i} then a longer tail of words", "type": "fact"}
                            for i in range(2)])  # fmt: skip
    vis = Visibility.of(resolve(ctx))
    assert [mem.get(ctx, i).content for i, _ in mem.store.lexical(vis, "gamma", ALL, 1)] == [
        "gamma"
    ]


def test_a_query_no_visible_record_matches_returns_nothing(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = _store(open_mem, tmp_path / "n.db", window=2)
    other = Context(tenant_id=ctx.tenant_id, user_id="someone-else", agent_id=ctx.agent_id)
    mem.remember(other, "delta epsilon", type="fact")
    assert mem.store.lexical(Visibility.of(resolve(ctx)), "delta epsilon", ALL, 5) == []
