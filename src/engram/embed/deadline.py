"""An embedder call bounded in time: ``embed_within(embedder, texts, seconds)``.

A recall must not wait on an embedding model that hangs (a remote endpoint that
accepts the connection and never answers, a local model stuck behind a lock):
the key and lexical channels can answer without a query vector. Python cannot
interrupt a thread, so the call runs on a daemon thread of its own and the
caller stops waiting at the deadline (``EmbeddingTimeout``); the abandoned call
finishes, or not, on its own, and its answer is dropped. A daemon thread never
holds up the process's exit.

Abandoned calls still hold a thread each, so at most ``MAX_PENDING`` may be in
flight at once: past that a call fails at once with ``EmbeddingTimeout`` instead
of starting yet another thread behind an embedder that is not answering.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engram.embed.base import Embedder
from engram.errors import EmbeddingTimeout

__all__ = ["MAX_PENDING", "embed_within", "pending"]

MAX_PENDING = 32  # embedder calls running at once under a deadline, abandoned ones included

_lock = threading.Lock()
_running = 0


def pending() -> int:
    """How many deadline-bounded embedder calls are running now (abandoned ones too)."""
    with _lock:
        return _running


class _Call:
    """One embedder call on its own thread: its answer or its exception."""

    def __init__(self, embedder: Embedder, texts: Sequence[str]) -> None:
        self.embedder = embedder
        self.texts = texts
        self.done = threading.Event()
        self.answer: NDArray[np.float32] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        global _running
        try:
            self.answer = self.embedder.embed(self.texts)
        except BaseException as exc:  # handed to the caller, who re-raises it
            self.error = exc
        finally:
            with _lock:
                _running -= 1
            self.done.set()


def _start(call: _Call, seconds: float) -> None:
    """Start ``call``'s thread, or refuse when too many calls are still running."""
    global _running
    with _lock:
        if _running >= MAX_PENDING:
            raise EmbeddingTimeout(
                f"the embedder {call.embedder.model_id!r} has {_running} calls still running "
                f"past their deadline ({seconds:g} s); it is not answering"
            )
        _running += 1
    try:
        threading.Thread(target=call.run, name="engram-embed", daemon=True).start()
    except BaseException:
        with _lock:
            _running -= 1
        raise


def embed_within(
    embedder: Embedder, texts: Sequence[str], seconds: float | None
) -> NDArray[np.float32]:
    """``embedder.embed(texts)``, or ``EmbeddingTimeout`` once ``seconds`` pass.

    ``seconds=None`` calls the embedder directly, with no thread and no deadline."""
    if seconds is None:
        return embedder.embed(texts)
    call = _Call(embedder, texts)  # as given: the embedder refuses a bare str itself
    _start(call, seconds)
    if not call.done.wait(seconds):
        raise EmbeddingTimeout(
            f"the embedder {embedder.model_id!r} did not answer within {seconds:g} s "
            "(embed_timeout_seconds); check the model or its server"
        )
    if call.error is not None:
        raise call.error
    assert call.answer is not None
    return call.answer
