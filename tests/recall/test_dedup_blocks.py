"""Near-duplicate detection compares a block of rows only with the members of
stronger candidates; the pairs it reports are exactly those of the whole matrix."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.kernels import pairwise_dots
from engram.recall.dedup import _close


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=130), st.integers(min_value=0, max_value=2**31),
       st.floats(min_value=-0.2, max_value=0.9))  # fmt: skip
def test_blocks_find_the_pairs_of_the_whole_matrix(count: int, seed: int, cosine: float) -> None:
    rng = np.random.default_rng(seed)
    rows = sorted(rng.choice(count + 10, size=count, replace=False).tolist())
    owner = sorted(rng.integers(0, count + 10, size=count + 5).tolist())
    queries = rng.standard_normal((len(rows), 16)).astype(np.float32)
    matrix = rng.standard_normal((len(owner), 16)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    whole = pairwise_dots(queries, matrix) >= cosine
    whole &= np.array(owner)[None, :] < np.array(rows)[:, None]
    assert np.array_equal(_close(queries, matrix, rows, owner, cosine), whole)
