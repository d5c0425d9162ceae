"""A deterministic, dependency-free embedder built by feature hashing.

It is the test embedder: vectors depend only on the text, never on the process
(``blake2b``, not Python's salted ``hash()``), so fixtures and property tests are
reproducible, and texts that share words or word pieces score higher than
unrelated texts. It is not a semantic model: synonyms do not meet.

Features of a text, after NFKC normalisation and case folding:

- word unigrams, weight 1.0: ``\\w+`` runs with their combining marks, cut into
  character bigrams where a script is written without spaces (``scripts.units``);
- word bigrams, weight 0.6, so word order counts a little;
- character 3-grams inside ``<word>``, weight 0.25, so inflections
  (``sits`` / ``sitting``) still overlap.

Each feature is hashed to a bucket and a sign (the signed hashing trick, which
keeps collisions unbiased), weighted by ``1 + log(tf)`` and the row normalised.

Version 2 changed the words: version 1 split words at combining marks (a Hindi
or Thai word fell into fragments) and took a whole Chinese or Japanese clause for
one word. Text without such marks or scripts embeds exactly as in version 1.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from hashlib import blake2b
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from engram import scripts
from engram.embed.base import checked_texts, empty_matrix, normalise_rows
from engram.errors import InvalidArgument

__all__ = ["HashingEmbedder", "forget_cached_features"]

_VERSION = 2
_WORD = re.compile(f"(?:\\w[{scripts.MARKS}]*)+")
# Prefix letter of each feature kind -> its weight.
_KIND_WEIGHTS = {"w": 1.0, "b": 0.6, "c": 0.25}


@lru_cache(maxsize=1 << 17)
def _feature_hash(feature: str) -> int:
    """Return a stable unsigned 64-bit hash of ``feature`` (cached: words repeat)."""
    digest = blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def forget_cached_features() -> None:
    """Drop the cached feature hashes: their keys are words, word pairs and trigrams
    of embedded texts (called after a forget or an erasure)."""
    _feature_hash.cache_clear()


def _char_trigrams(word: str) -> list[str]:
    """Return the character 3-grams of ``<word>`` (boundary marks included)."""
    marked = f"<{word}>"
    return [marked[i : i + 3] for i in range(len(marked) - 2)]


def _words(text: str) -> list[str]:
    """``\\w+`` runs with their combining marks; a run holding a script without
    spaces becomes its ``scripts.units`` (words and character bigrams)."""
    out: list[str] = []
    for word in _WORD.findall(text):
        if scripts.UNSPACED_CHAR.search(word):
            out += scripts.units(word)
        else:
            out.append(word)
    return out


def _features(text: str) -> Counter[str]:
    """Count the kind-prefixed features of one text."""
    words = _words(unicodedata.normalize("NFKC", text).casefold())
    counts = Counter("w" + word for word in words)
    counts.update(f"b{left} {right}" for left, right in pairwise(words))
    counts.update("c" + gram for word in words for gram in _char_trigrams(word))
    return counts


class HashingEmbedder:
    """Feature-hashing embedder; deterministic across processes and machines.

    Args:
        dimension: number of hash buckets, i.e. the vector length (>= 16).

    Raises:
        InvalidArgument: ``dimension`` is not an integer of at least 16.
    """

    __slots__ = ("_dimension",)
    may_block = False  # in-process computation: no deadline thread (engram.embed.deadline)

    def __init__(self, dimension: int = 384) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 16:
            raise InvalidArgument(f"dimension must be an integer >= 16, got {dimension!r}")
        self._dimension = dimension

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimension={self._dimension})"

    @property
    def model_id(self) -> str:
        """``hashing-v<version>-<dimension>``; changes whenever vectors would."""
        return f"hashing-v{_VERSION}-{self._dimension}"

    @property
    def dimension(self) -> int:
        """Vector length, as given to the constructor."""
        return self._dimension

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts``; see :class:`engram.embed.base.Embedder`.

        Empty or punctuation-only texts give zero rows.
        """
        texts = checked_texts(texts)
        if not texts:
            return empty_matrix(self._dimension)
        rows, hashes, values = self._scatter_lists(texts)
        return self._accumulate(len(texts), rows, hashes, values)

    @staticmethod
    def _scatter_lists(
        texts: Sequence[str],
    ) -> tuple[list[int], list[int], list[float]]:
        """Flatten every (row, feature hash, weight) triple of the batch."""
        rows: list[int] = []
        hashes: list[int] = []
        values: list[float] = []
        for row, text in enumerate(texts):
            for feature, tf in _features(text).items():
                rows.append(row)
                hashes.append(_feature_hash(feature))
                values.append(_KIND_WEIGHTS[feature[0]] * (1.0 + math.log(tf)))
        return rows, hashes, values

    def _accumulate(
        self, count: int, rows: list[int], hashes: list[int], values: list[float]
    ) -> NDArray[np.float32]:
        """Add the signed weights into their buckets with one scatter-add."""
        matrix = np.zeros((count, self._dimension), dtype=np.float64)
        if rows:
            hash_array = np.array(hashes, dtype=np.uint64)
            buckets = (hash_array % np.uint64(self._dimension)).astype(np.intp)
            signs = np.where(hash_array >> np.uint64(63), -1.0, 1.0)
            np.add.at(matrix, (np.array(rows, dtype=np.intp), buckets), signs * values)
        return normalise_rows(matrix)
