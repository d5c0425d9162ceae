"""Model vectors of the benchmark corpus, computed once and kept in a cache file.

A local sentence model embeds about 60-100 texts a second on this machine, so
100K corpus memories take half an hour: benchmarks that need the default
embedder's vectors (``pg_vectors.py --embedder local``) read them from a
``.npy`` file beside a ``.json`` of what it holds (corpus seed, count, model),
filled in steps so an interrupted run resumes from the last one saved::

    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/vector_cache.py \
        --count 100000 --cache ~/.cache/engram-bench

Memory ``i`` of ``Corpus(seed)`` is the same text on every run, so the file is
valid for any benchmark that asks for the first ``count`` memories of that seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from corpus import Corpus
from engram.embed import Embedder, LocalEmbedder

__all__ = ["cache_paths", "corpus_vectors"]

CHUNK = 2_000  # texts per embedding call
SAVE_EVERY = 20_000  # texts between writes of the cache file (each rewrites it whole)


def cache_paths(cache: Path, seed: int, model_id: str) -> tuple[Path, Path]:
    """The matrix file and its description for one corpus seed and model."""
    stem = f"corpus-{seed}-{model_id.replace('/', '_')}"
    return cache / f"{stem}.npy", cache / f"{stem}.json"


def corpus_vectors(count: int, cache: Path, seed: int = 7,
                   embedder: Embedder | None = None) -> NDArray[np.float32]:  # fmt: skip
    """The vectors of the first ``count`` memories of ``Corpus(seed)``, embedding
    (and saving every ``SAVE_EVERY``) only those the cache does not hold yet."""
    model = embedder or LocalEmbedder()
    matrix_path, meta_path = cache_paths(cache, seed, model.model_id)
    cache.mkdir(parents=True, exist_ok=True)
    held = _held(matrix_path, meta_path, model)
    if held.shape[0] >= count:
        return held[:count]
    corpus = Corpus(seed=seed)
    blocks = [held]
    done, started = held.shape[0], time.perf_counter()
    while done < count:
        size = min(CHUNK, count - done)
        texts = [item["content"] for item in corpus.items(done, size)]
        blocks.append(model.embed(texts).astype(np.float32))
        done += size
        if done == count or done % SAVE_EVERY < CHUNK:  # a resume point, not every chunk
            blocks = [np.concatenate(blocks)]
            _save(blocks[0], matrix_path, meta_path, seed, model)
        rate = (done - held.shape[0]) / (time.perf_counter() - started)
        print(f"  embedded {done:,}/{count:,} ({rate:.0f}/s)", file=sys.stderr, flush=True)
    return np.concatenate(blocks)[:count]


def _held(matrix_path: Path, meta_path: Path, model: Embedder) -> NDArray[np.float32]:
    if not (matrix_path.exists() and meta_path.exists()):
        return np.zeros((0, model.dimension), dtype=np.float32)
    meta = json.loads(meta_path.read_text())
    if meta.get("model_id") != model.model_id:
        raise SystemExit(f"{matrix_path} holds {meta.get('model_id')}, not {model.model_id}")
    return np.asarray(np.load(matrix_path), dtype=np.float32)


def _save(matrix: NDArray[np.float32], matrix_path: Path, meta_path: Path, seed: int,
          model: Embedder) -> None:  # fmt: skip
    """Write the matrix first, then the description, each by rename (never half a file)."""
    partial = matrix_path.with_suffix(".partial.npy")
    np.save(partial, matrix)
    partial.replace(matrix_path)
    meta = {"seed": seed, "count": int(matrix.shape[0]), "model_id": model.model_id}
    meta_path.with_suffix(".partial").write_text(json.dumps(meta))
    meta_path.with_suffix(".partial").replace(meta_path)


def main(argv: list[str]) -> None:
    """Fill the cache for ``--count`` memories."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "engram-bench")
    args = parser.parse_args(argv[1:])
    matrix = corpus_vectors(args.count, args.cache, args.seed)
    print(f"{matrix.shape[0]:,} vectors in {cache_paths(args.cache, args.seed, 'x')[0].parent}")


if __name__ == "__main__":
    main(sys.argv)
