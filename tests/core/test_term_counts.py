"""FTS5 engine: cached term counts never make lexical recall miss or leak, and erasure
clears them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engram import Context, Engram
from engram.config import Config, StoreConfig
from engram.scope import resolve
from engram.store.predicate import Visibility
from engram.store.term_counts import IndexVersion, TermCountCache

ALL = ("active", "superseded", "expired")


def test_counts_are_reused_exactly_or_when_common_and_nothing_was_removed() -> None:
    cache = TermCountCache()
    then = IndexVersion(changes=10, deletes=2)
    cache.remember(("t", "u"), {"rare": 3, "common": 50, "none": 0}, then)
    words = ["rare", "common", "none", "unseen"]
    assert cache.known(("t", "u"), words, then, cap=20) == {"rare": 3, "common": 50, "none": 0}
    assert cache.known(("t", "u"), words, IndexVersion(11, 2), cap=20) == {"common": 50}
    assert cache.known(("t", "u"), words, IndexVersion(11, 3), cap=20) == {}
    assert cache.known(("t", "other"), words, then, cap=20) == {}


def test_the_cache_is_bounded_and_erasure_drops_a_tenant() -> None:
    cache = TermCountCache(max_entries=2)
    now = IndexVersion(1, 0)
    cache.remember(("t", "u"), {"a": 1, "b": 1, "c": 1}, now)
    assert cache.known(("t", "u"), ["a", "b", "c"], now, cap=5) == {"b": 1, "c": 1}
    cache.remember(("s", "u"), {"a": 1}, now)
    cache.drop_tenant("t")
    assert cache.known(("t", "u"), ["b", "c"], now, cap=5) == {}
    assert cache.known(("s", "u"), ["a"], now, cap=5) == {"a": 1}
    off = TermCountCache(max_entries=0)
    off.remember(("t", "u"), {"a": 1}, now)
    assert off.known(("t", "u"), ["a"], now, cap=5) == {}


def _store(open_mem: Callable[..., Engram], path: Path) -> Engram:
    store = StoreConfig(fts_term_cap=3, lexical_engine="fts5")
    return open_mem(f"sqlite:///{path}", config=Config(store=store))


def test_a_term_first_counted_as_absent_is_found_once_written(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = _store(open_mem, tmp_path / "a.db")
    mem.remember(ctx, "alpha beta gamma", type="fact")
    vis = Visibility.of(resolve(ctx))
    assert mem.store.lexical(vis, "zeta", ALL, 5) == []  # counted 0, and cached
    mem.remember(ctx, "zeta arrives later", type="fact")
    assert [mem.get(ctx, i).content for i, _ in mem.store.lexical(vis, "zeta", ALL, 5)] == [
        "zeta arrives later"
    ]


def test_inside_a_transaction_counts_see_its_writes_and_are_not_kept(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = _store(open_mem, tmp_path / "t.db")
    vis = Visibility.of(resolve(ctx))
    mem.remember(ctx, "alpha", type="fact")
    with mem.store.transaction():
        mem.remember(ctx, "omega inside", type="fact")
        assert len(mem.store.lexical(vis, "omega", ALL, 5)) == 1
        assert mem.store._term_cache.known(
            (vis.tenant_id, vis.user_id), ["omega"], IndexVersion(0, 0), cap=3
        ) == {}  # fmt: skip
    assert len(mem.store.lexical(vis, "omega", ALL, 5)) == 1


def test_erasing_a_subject_drops_its_cached_terms(
    open_mem: Callable[..., Engram], tmp_path: Path, ctx: Context
) -> None:
    mem = _store(open_mem, tmp_path / "e.db")
    mem.remember(ctx, "diagnosis kept private", type="fact")
    vis = Visibility.of(resolve(ctx))
    assert mem.store.lexical(vis, "diagnosis", ALL, 5)
    owner = (vis.tenant_id, vis.user_id)
    totals = mem.store._index_totals()
    now = IndexVersion(totals["fts_changes"], totals["fts_deletes"])
    assert mem.store._term_cache.known(owner, ["diagnosis"], now, cap=3) == {"diagnosis": 1}
    mem.erase_subject(ctx.tenant_id, ctx.user_id)
    assert mem.store._term_cache.known(owner, ["diagnosis"], now, cap=3) == {}
    assert mem.store.lexical(vis, "diagnosis", ALL, 5) == []
