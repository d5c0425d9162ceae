"""Int8 codes for a first, cheap pass of an exact vector search.

A float32 scan of a large partition is bound by memory bandwidth (100K x 384 rows
are 154 MB). The same rows as int8 codes are a quarter of that, and SimSIMD's
integer kernels score them about five times faster. The codes only choose
candidates: the store rescores an over-fetched shortlist with the float32 rows, so
every score a caller sees is exact and only the shortlist is an estimate.

Each row gets its own scale (its largest magnitude maps to 127), so rows of any
norm or sparsity keep full precision. Without ``simsimd`` installed, ``available``
is false and the store scans float32 rows only.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engram import kernels

__all__ = ["available", "encode", "estimate"]

_LEVELS = 127.0


def available() -> bool:
    """True when the int8 kernels are installed."""
    return kernels.available()


def encode(
    rows: NDArray[np.float32],
) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Int8 codes and per-row scales with ``rows ~= codes * scales[:, None]``.

    An all-zero row gets scale 1 and zero codes (it scores 0, as it should).
    """
    peaks = np.abs(rows).max(axis=1) if rows.size else np.zeros(len(rows), np.float32)
    scales = (peaks / _LEVELS).astype(np.float32)
    scales[scales == 0] = 1.0
    codes = np.rint(rows / scales[:, None]).astype(np.int8)
    return codes, scales


def estimate(
    codes: NDArray[np.int8],
    scales: NDArray[np.float32],
    query: NDArray[np.float32],
    threads: int = 1,
) -> NDArray[np.float32]:
    """Estimated ``rows @ query`` from the codes (the kernel releases the GIL)."""
    if codes.shape[0] == 0:
        return np.empty(0, dtype=np.float32)
    query_codes, query_scale = encode(query.reshape(1, -1))
    estimates = kernels.simd_dots(query_codes, codes, max(1, threads)).reshape(-1)
    estimates *= scales
    estimates *= query_scale[0]
    return estimates
