"""An embedder call bounded in time: ``embed_within(embedder, texts, seconds)``.

A recall must not wait on an embedding model that hangs (a remote endpoint that
accepts the connection and never answers, a local model stuck behind a lock):
its key and lexical channels can answer without a query vector. A write must not
wait for ever either: past the deadline it stores nothing and says why. The
thread and the bound on abandoned calls are ``engram.deadline``'s.

An embedder whose class says ``may_block = False`` computes in process and
never waits on anything (the hashing, local and multilingual models): it is
called directly, without the thread (measured: 0.1-0.4 ms a call on two busy
cores, more than the hashing embedder's whole work). Any other embedder (an
HTTP endpoint, a custom class that does not say) gets the deadline.
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
    (None, or an embedder that cannot block: called directly, no thread)."""
    if seconds is None or not getattr(embedder, "may_block", True):
        return embedder.embed(texts)

    def late() -> EmbeddingTimeout:
        return EmbeddingTimeout(
            f"the embedder {embedder.model_id!r} did not answer within {seconds:g} s "
            "(embed_timeout_seconds); check the model or its server"
        )

    return call_within(lambda: embedder.embed(texts), seconds, late)
