"""An embedder call bounded in time: ``embed_within(embedder, texts, seconds)``.

A recall must not wait on an embedding model that hangs (a remote endpoint that
accepts the connection and never answers, a local model stuck behind a lock):
its key and lexical channels can answer without a query vector. A write must not
wait for ever either: past the deadline it stores nothing and says why. The
thread and the bound on abandoned calls are ``engram.deadline``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engram.deadline import MAX_PENDING, call_within, pending
from engram.embed.base import Embedder
from engram.errors import EmbeddingTimeout

__all__ = ["MAX_PENDING", "embed_within", "pending"]


def embed_within(
    embedder: Embedder, texts: Sequence[str], seconds: float | None
) -> NDArray[np.float32]:
    """``embedder.embed(texts)``, or ``EmbeddingTimeout`` once ``seconds`` pass
    (None: the embedder is called directly, with no thread and no deadline)."""

    def late() -> EmbeddingTimeout:
        return EmbeddingTimeout(
            f"the embedder {embedder.model_id!r} did not answer within {seconds:g} s "
            "(embed_timeout_seconds); check the model or its server"
        )

    return call_within(lambda: embedder.embed(texts), seconds, late)
