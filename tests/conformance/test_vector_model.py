"""Vectors of different embedding models are never mixed; the index is rebuildable."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from tests import probes

from engram import Context, Engram, IndexMismatch, Status
from engram.embed import HashingEmbedder
from engram.scope import resolve
from engram.store.predicate import Visibility

ACTIVE = (Status.ACTIVE.value,)
TEXTS = [
    "The payments service is written in Kotlin.",
    "The search service is written in Rust.",
    "Weekly demos happen on Thursday afternoon.",
]


def _vector(mem: Engram, vis: Visibility, text: str, k: int = 10) -> list[str]:
    query = mem.embedder.embed([text])[0]
    return [i for i, _ in probes.vector(mem.store, vis, query, mem.embedder.model_id, ACTIVE, k)]


def _write_with_384(url: str, open_mem: Callable[..., Engram], ctx: Context) -> list[str]:
    mem = open_mem(url)
    assert mem.embedder.model_id == "hashing-v2-384"
    ids = []
    for i, text in enumerate(TEXTS):
        w = mem.remember(ctx, text, key=f"fact.{i}" if i == 0 else None, value=i)
        assert w.record is not None
        assert w.record.embedding_model == "hashing-v2-384"
        ids.append(w.record.id)
    assert _vector(mem, Visibility.of(resolve(ctx)), "Kotlin payments")[0] == ids[0]
    mem.close()
    return ids


def test_another_model_is_refused_until_the_index_is_rebuilt(
    shared_url: str, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    ids = _write_with_384(shared_url, open_mem, ctx)
    mem = open_mem(shared_url, embedder=HashingEmbedder(dimension=128))
    vis = Visibility.of(resolve(ctx))
    with pytest.raises(IndexMismatch, match="engram index rebuild") as info:
        _vector(mem, vis, "Kotlin payments")
    assert "hashing-v2-384" in str(info.value)
    assert "hashing-v2-128" in str(info.value)
    assert [r.id for r in probes.by_key(mem.store, vis, ["fact.0"], ACTIVE, 10)] == [ids[0]]
    assert [i for i, _ in probes.lexical(mem.store, vis, "Rust search", ACTIVE, 10)] == [ids[1]]
    late = mem.remember(ctx, "The billing service is written in Kotlin too.")
    assert late.record is not None
    assert late.record.embedding_model is None
    assert mem.get(ctx, ids[0]).content == TEXTS[0]

    report = mem.rebuild_index()

    assert (report.records, report.vectors, report.model) == (4, 4, "hashing-v2-128")
    assert mem.store.vector_model() == "hashing-v2-128"
    found = _vector(mem, vis, "Kotlin payments service")
    assert set(found) == {*ids, late.record.id}
    assert found[0] == ids[0]
    assert mem.get(ctx, late.record.id).embedding_model == "hashing-v2-128"
    new = mem.remember(ctx, "The ledger service is written in Kotlin.").record
    assert new is not None
    assert new.embedding_model == "hashing-v2-128"
    assert new.id in _vector(mem, vis, "ledger Kotlin", k=1)


def test_the_cli_rebuild_switches_the_model(
    sqlite_file_url: str, open_mem: Callable[..., Engram], ctx: Context
) -> None:
    ids = _write_with_384(sqlite_file_url, open_mem, ctx)
    script = (
        "import sys; from engram import Engram; from engram.embed import HashingEmbedder;"
        "m = Engram.open(sys.argv[1], embedder=HashingEmbedder(dimension=64));"
        "print(m.rebuild_index().model); m.close()"
    )
    done = subprocess.run([sys.executable, "-c", script, sqlite_file_url], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hashing-v2-64"
    again = subprocess.run(
        [sys.executable, "-m", "engram", "--db", sqlite_file_url, "--embedder", "hashing",
         "index", "rebuild"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "model hashing-v2-384" in again.stdout
    mem = open_mem(sqlite_file_url)
    assert _vector(mem, Visibility.of(resolve(ctx)), "Kotlin payments")[0] == ids[0]


def test_a_rebuild_on_every_backend_keeps_search_working(mem: Engram, ctx: Context) -> None:
    for text in TEXTS:
        mem.remember(ctx, text)
    vis = Visibility.of(resolve(ctx))
    before = _vector(mem, vis, "Rust search service")
    lexical = probes.lexical(mem.store, vis, "service", ACTIVE, 10)
    report = mem.rebuild_index()
    assert report.records == 3
    assert _vector(mem, vis, "Rust search service") == before
    assert probes.lexical(mem.store, vis, "service", ACTIVE, 10) == lexical


class _WrongEmbedder:
    """The hashing embedder's name and size, but a broken answer of kind ``mode``."""

    def __init__(self, mode: str) -> None:
        self._inner = HashingEmbedder()
        self.mode = mode
        self.model_id = self._inner.model_id
        self.dimension = self._inner.dimension

    def embed(self, texts: list[str]) -> object:
        matrix = self._inner.embed(texts)
        if self.mode == "narrow":
            return matrix[:, :100].copy()
        if self.mode == "short":
            return matrix[:0]
        if self.mode == "nan":
            return matrix * float("nan")
        raise RuntimeError("the custom embedder crashed")


@pytest.mark.parametrize("mode", ["narrow", "short", "nan", "crash"])
def test_a_broken_embedder_answer_stores_nothing_and_breaks_no_recall(
    store_url: str, open_mem: Callable[..., Engram], ctx: Context, mode: str
) -> None:
    from engram import EmbeddingError

    good = open_mem(store_url)
    good.remember(ctx, "The staging cluster is named heron.")
    bad = Engram(good.store, _WrongEmbedder(mode), good.config, good.clock)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError):
        bad.remember(ctx, "Deploys happen on Tuesdays at noon.")
    assert [r.content for r in good.list(ctx)] == ["The staging cluster is named heron."]
    result = good.recall(ctx, "What is the staging cluster called?")
    assert "heron" in result.prompt
