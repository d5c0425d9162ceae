"""The parallel exact scan gives the same scores as the serial one."""

from __future__ import annotations

import numpy as np
import pytest

from engram.store.vectors import ScanPolicy


@pytest.mark.parametrize("rows", [0, 1, 7, 1000, 1001])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_blocks_score_exactly_like_one_pass(rows: int, threads: int) -> None:
    rng = np.random.default_rng(rows + threads)
    matrix = rng.standard_normal((rows, 24)).astype(np.float32)
    query = rng.standard_normal(24).astype(np.float32)
    serial = ScanPolicy(threads=1).scores(matrix, query)
    parallel = ScanPolicy(threads=threads, parallel_rows=1).scores(matrix, query)
    assert parallel.dtype == np.float32
    assert parallel.shape == (rows,)
    np.testing.assert_array_equal(parallel, serial)
    np.testing.assert_allclose(serial, matrix @ query, rtol=1e-5, atol=1e-5)


def test_a_view_of_visible_rows_is_scored_in_parallel_too() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((500, 16)).astype(np.float32)
    query = rng.standard_normal(16).astype(np.float32)
    rows = np.arange(0, 500, 3)
    got = ScanPolicy(threads=2, parallel_rows=2).scores(matrix[rows], query)
    np.testing.assert_array_equal(got, ScanPolicy().scores(matrix[rows], query))
