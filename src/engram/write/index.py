"""Step 5 of the write path: the vector for each new version, and index rebuilds.

Vectors are computed in one batch before the write transaction opens (the
embedder may be slow and must not hold the database lock), then inserted by
``commit`` in the same transaction as the record. A store whose vectors come
from another model gets no new vectors until ``rebuild`` re-embeds everything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engram.embed import Embedder
from engram.embed.deadline import embed_within
from engram.errors import EmbeddingError, EngramError
from engram.store.contract import Maintenance
from engram.store.open import Backend

__all__ = ["RebuildReport", "embed_contents", "rebuild", "vectors_enabled"]


@dataclass(frozen=True, slots=True)
class RebuildReport:
    """What an index rebuild did."""

    records: int
    vectors: int
    model: str


def vectors_enabled(store: Maintenance, embedder: Embedder) -> bool:
    """True when new vectors may be stored: no vectors yet, or same model."""
    current = store.vector_model()
    return current is None or current == embedder.model_id


def embed_contents(
    embedder: Embedder, texts: Sequence[str], timeout: float | None = None
) -> NDArray[np.float32]:
    """One batch call for every text that will need a vector, its answer checked,
    waited for at most ``timeout`` seconds (``EmbeddingTimeout`` past it).

    Any embedder may be passed in, so its answer is checked before it can be
    stored: one row per text, ``embedder.dimension`` finite floats each. A vector
    of the wrong size would make every later vector search of its partition fail.
    Whatever goes wrong is ``EmbeddingError`` (a bulk write reports the chunks
    already committed as ``PartialWrite``)."""
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    try:
        answer = embed_within(embedder, list(texts), timeout)
        matrix = np.ascontiguousarray(answer, dtype=np.float32)
    except EngramError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"the embedder {embedder.model_id!r} failed: {exc!r}") from exc
    expected = (len(texts), embedder.dimension)
    if matrix.shape != expected:
        raise EmbeddingError(f"the embedder {embedder.model_id!r} returned shape "
                             f"{matrix.shape} for {expected[0]} texts of dimension "
                             f"{expected[1]}")  # fmt: skip
    if not np.isfinite(matrix).all():
        raise EmbeddingError(f"the embedder {embedder.model_id!r} returned NaN or infinity")
    return matrix


def rebuild(store: Backend, embedder: Embedder, batch: int = 256,
            progress: Callable[[int], None] | None = None) -> RebuildReport:  # fmt: skip
    """Regenerate the lexical and vector indexes from the records table, atomically.

    ``progress`` is called with the size of each batch once it is re-embedded (the
    command line draws its progress line from it)."""
    records = vectors = 0
    with store.transaction():
        store.rebuild_lexical()
        store.reset_vectors()
        for chunk in store.iter_all(batch):
            records += len(chunk)
            matrix = embed_contents(embedder, [r.content for r in chunk])
            tagged = [r.replace(embedding_model=embedder.model_id) for r in chunk]
            store.put_vectors(tagged, matrix)
            vectors += len(chunk)
            if progress is not None:
                progress(len(chunk))
    return RebuildReport(records=records, vectors=vectors, model=embedder.model_id)
