"""The contract every embedder meets, and the row normalisation they share.

Embedders are batch-first: one call turns many texts into one float32 matrix, so
the write path embeds a whole batch of proposals at once and recall scores every
candidate with a single matrix product. Rows are L2-normalised so that a dot
product *is* the cosine similarity.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from engram.errors import InvalidArgument

__all__ = [
    "Embedder",
    "Wrapped",
    "checked_texts",
    "empty_matrix",
    "is_embedder",
    "normalise_rows",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension.

    On Python 3.11 ``isinstance(obj, Embedder)`` reads every property, which for
    an embedder that learns its dimension lazily means a request; use
    :func:`is_embedder` to check without side effects.
    """

    @property
    def model_id(self) -> str:
        """Stable identifier stored next to each vector (e.g. ``"hashing-v2-384"``).

        Two embedders with the same ``model_id`` must produce comparable vectors;
        the store refuses to mix vectors of different ids.
        """
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` in order.

        Returns a C-contiguous float32 matrix of shape ``(len(texts), dimension)``
        whose rows are L2-normalised (a zero row is allowed for an empty text);
        an empty input gives shape ``(0, dimension)``.

        Raises:
            InvalidArgument: ``texts`` is a bare string or holds non-strings.
            EmbeddingError: the model or service could not produce vectors.
        """
        ...


def is_embedder(obj: object) -> bool:
    """True if ``obj`` has the Embedder members, checked without evaluating properties."""
    members = ("model_id", "dimension", "embed")
    return all(
        inspect.getattr_static(obj, name, None) is not None for name in members
    ) and callable(getattr(obj, "embed", None))


def checked_texts(texts: Sequence[str]) -> list[str]:
    """Return ``texts`` as a list, refusing a bare string or non-string items.

    A ``str`` is itself a sequence of strings, so ``embed("hello")`` would
    otherwise embed five one-letter texts.

    Raises:
        InvalidArgument: ``texts`` is a string or holds something else than strings.
    """
    if isinstance(texts, str):
        raise InvalidArgument("embed() takes a sequence of texts, not a single str")
    items = list(texts)
    if not all(isinstance(text, str) for text in items):
        raise InvalidArgument("embed() takes strings only")
    return items


def empty_matrix(dimension: int) -> NDArray[np.float32]:
    """Return the ``(0, dimension)`` float32 matrix for an empty batch."""
    return np.zeros((0, dimension), dtype=np.float32)


def normalise_rows(matrix: NDArray[np.floating]) -> NDArray[np.float32]:
    """Scale each row to unit L2 norm; all-zero rows stay zero.

    Returns a new C-contiguous float32 array, so callers may hand it out freely.
    """
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return np.ascontiguousarray(rows / norms, dtype=np.float32)


class Wrapped:
    """An embedder standing for ``inner`` (same model id and dimension, so its
    vectors are ``inner``'s); subclasses change how ``embed`` is reached: timing,
    caching, delaying or failing it in tests and benchmarks."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        """The wrapped model's id."""
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        """The wrapped model's dimension."""
        return self.inner.dimension

    @property
    def may_block(self) -> bool:
        """Whether a call may wait on something outside the process (the wrapped
        model's answer; True when it does not say): see ``engram.embed.deadline``."""
        return bool(getattr(self.inner, "may_block", True))

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed through the wrapped model."""
        return self.inner.embed(texts)
