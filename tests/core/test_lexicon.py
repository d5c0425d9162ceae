"""The in-memory BM25 engine: tokens, scores, visibility, freshness, status, erasure."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from tests import probes

from engram import Context, Engram
from engram.config import StoreConfig
from engram.scope import resolve
from engram.store.lexicon import Bm25, LexicalPartition, porter, query_terms, search, tokens
from engram.store.predicate import Visibility

ALL = ("active", "superseded", "expired")
ME = Visibility("t", "u1", "", (None, None, None, None))


def test_tokens_fold_case_and_diacritics_drop_stopwords_and_keep_repeats() -> None:
    assert tokens("Zoë's CAFÉ and the café") == ["zoe", "cafe", "cafe"]
    assert query_terms("the café, the CAFE") == ["cafe"]
    assert tokens("the and of") == []


def _partition(texts: list[tuple[str, str]]) -> LexicalPartition:
    """Rows of (user, content) in one partition of tenant t (user "" is tenant-wide)."""
    part = LexicalPartition()
    part.append([(i + 1, f"r{i}", user, "user" if user else "global", "", text)
                 for i, (user, text) in enumerate(texts)])  # fmt: skip
    return part


def _bm25(tf: int, length: int, df: int, n: int, avg: float) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg))


def test_scores_are_bm25_over_the_visible_rows() -> None:
    part = _partition([("u1", "kernel panic kernel"), ("u1", "scheduler latency"),
                       ("u1", "kernel update notes today")])  # fmt: skip
    [(_, rows, scores)] = search([part], ME, ["kernel"], Bm25())
    got = dict(zip(rows.tolist(), scores.tolist(), strict=True))
    avg = (3 + 2 + 4) / 3  # "kernel update notes today": four tokens
    assert got[0] == pytest.approx(_bm25(2, 3, 2, 3, avg), rel=1e-5)
    assert got[2] == pytest.approx(_bm25(1, 4, 2, 3, avg), rel=1e-5)
    assert set(got) == {0, 2}


def test_records_the_caller_cannot_see_change_no_score() -> None:
    alone = _partition([("u1", "kernel panic"), ("u1", "other words entirely")])
    crowded = _partition([("u1", "kernel panic"), ("u1", "other words entirely")]
                         + [("u2", f"kernel kernel {i}") for i in range(20)])  # fmt: skip
    [(_, rows_a, scores_a)] = search([alone], ME, ["kernel"], Bm25())
    [(_, rows_c, scores_c)] = search([crowded], ME, ["kernel"], Bm25())
    assert rows_a.tolist() == rows_c.tolist() == [0]
    assert scores_a.tolist() == pytest.approx(scores_c.tolist(), rel=1e-6)


def test_statistics_span_the_callers_partitions() -> None:
    mine = _partition([("u1", "kernel notes"), ("u1", "plain text")])
    tenant_wide = _partition([("", "kernel guide"), ("", "kernel faq"), ("", "style rules")])
    found = search([mine, tenant_wide], ME, ["kernel"], Bm25())
    assert [rows.tolist() for _, rows, _ in found] == [[0], [0, 1]]
    n, df = 5, 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    assert found[0][2][0] == pytest.approx(idf * 2.2 / (1 + 1.2), rel=1e-5)  # length == avg


def _contents(mem: Engram, ctx: Context, hits: list[tuple[str, float]]) -> list[str]:
    return [mem.get(ctx, i).content for i, _ in hits]


def test_writes_and_forgets_reach_a_cached_partition(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "w.db")
    vis = Visibility.of(resolve(ctx))
    first = mem.remember(ctx, "the zebra crossing is closed", type="fact").record
    assert first is not None
    assert _contents(mem, ctx, probes.lexical(mem.store, vis, "zebra", ALL, 5)) == [first.content]
    mem.remember(ctx, "a zebra escaped the zoo", type="fact")
    assert len(probes.lexical(mem.store, vis, "zebra", ALL, 5)) == 2
    mem.forget(ctx, first.id)
    assert _contents(mem, ctx, probes.lexical(mem.store, vis, "zebra", ALL, 5)) == [
        "a zebra escaped the zoo"
    ]


def test_status_is_filtered_and_the_ranking_deepens(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "s.db")
    vis = Visibility.of(resolve(ctx))
    for i in range(30):  # thirty versions of one key: only the last is active
        mem.remember(ctx, f"deploy target is region {i} deploy deploy", type="fact",
                     key="deploy.target")  # fmt: skip
    mem.remember(ctx, "deploy notes for the team wiki page", type="fact")
    active = probes.lexical(mem.store, vis, "deploy", ("active",), 2)
    assert len(active) == 2
    assert len(probes.lexical(mem.store, vis, "deploy", ALL, 50)) == 31


def test_erasure_drops_the_partition_from_memory(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "e.db")
    vis = Visibility.of(resolve(ctx))
    mem.remember(ctx, "private diagnosis note", type="fact")
    assert probes.lexical(mem.store, vis, "diagnosis", ALL, 5)
    key = (ctx.tenant_id, ctx.user_id, "lexical")
    assert key in mem.store._lexical_engine._cache._parts
    mem.erase_subject(ctx.tenant_id, ctx.user_id)
    assert key not in mem.store._lexical_engine._cache._parts
    assert probes.lexical(mem.store, vis, "diagnosis", ALL, 5) == []


def test_the_exact_match_comes_first(
    tmp_path: Path, ctx: Context, open_engine: Callable[..., Engram]
) -> None:
    mem = open_engine(tmp_path / "x.db")
    vis = Visibility.of(resolve(ctx))
    mem.remember_many(ctx, [{"content": f"release {i} shipped on time", "type": "fact"}
                            for i in range(20)])  # fmt: skip
    mem.remember(ctx, "the release of the billing service slipped", type="fact")
    hits = probes.lexical(mem.store, vis, "billing release slipped", ALL, 3)
    assert _contents(mem, ctx, hits)[0] == "the release of the billing service slipped"


@pytest.mark.parametrize(
    "option",
    [{"lexical_engine": "fts5"}, {"fts_term_cap": 5}, {"fts_rank_window": 5},
     {"fts_prefilter_below_share": 0.5}, {"term_count_cache": 0}],
)  # fmt: skip
def test_the_removed_fts5_engine_options_are_refused_by_name(option: dict[str, object]) -> None:
    with pytest.raises(TypeError, match=next(iter(option))):
        StoreConfig(**option)  # type: ignore[arg-type]


def test_postings_stop_at_the_rows_a_mask_covers() -> None:
    part = _partition([("u1", "kernel a"), ("u1", "other"), ("u1", "kernel b")])
    rows, freqs = part.postings("kernel", below=2)
    assert rows.tolist() == [0]
    assert freqs.tolist() == [1.0]
    assert part.postings("kernel", below=3)[0].tolist() == [0, 2]
    assert part.postings("absent", below=3)[0].size == 0


def test_searching_while_another_thread_appends_is_safe() -> None:
    part = _partition([("u1", "kernel seed")])
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for start in range(2, 4000, 50):
                part.append([(start + i, f"w{start + i}", "u1", "user", "", "kernel grows")
                             for i in range(50)])  # fmt: skip
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    while not done.is_set():
        for _, rows, scores in search([part], ME, ["kernel"], Bm25()):
            assert rows.size == scores.size
    thread.join()
    assert not errors
    [(_, rows, _)] = search([part], ME, ["kernel"], Bm25())
    assert rows.size == part.size


def test_porter_stems_inflections_together_in_every_thread() -> None:
    assert {porter(w) for w in ("discussed", "discussion", "discussing")} == {"discuss"}
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.extend(
        tokens("adopting adoption " * 50))) for _ in range(4)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(results) == {"adopt"}
