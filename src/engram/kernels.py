"""Dense products on the request path, on the calling thread only.

BLAS is the wrong tool for a request's small products: OpenBLAS spreads a
150 x 384 product over every core, and its spinning workers turned 0.2 ms into
10 ms at p95 on a busy machine. ``einsum`` starts no threads but runs scalar
loops. SimSIMD's kernels start no threads either (unless asked), release the GIL
and use the CPU's vector units: about twice ``einsum``'s speed for float32 and
five times for int8 (``store.quantize``). Without ``simsimd`` installed,
everything falls back to ``einsum``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["available", "pairwise_dots", "simd_dots"]


def _load() -> Any:
    try:
        import simsimd
    except ImportError:  # pragma: no cover - the einsum fallback is tested directly
        return None
    return simsimd


_KERNELS: Any = _load()


def available() -> bool:
    """True when SimSIMD's kernels are installed."""
    return _KERNELS is not None


def pairwise_dots(
    a: NDArray[np.float32], b: NDArray[np.float32], *, simd: bool = True
) -> NDArray[np.float32]:
    """``a @ b.T`` as float32, on this thread; ``simd=False`` forces ``einsum``."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if not (simd and available()) or a.size == 0 or b.size == 0:
        out = np.empty((a.shape[0], b.shape[0]), dtype=np.float32)
        np.einsum("ik,jk->ij", a, b, out=out)
        return out
    return simd_dots(a, b)


def simd_dots(a: NDArray[Any], b: NDArray[Any], threads: int = 1) -> NDArray[np.float32]:
    """SimSIMD's ``a @ b.T`` (float32 or int8 rows) as a float32 array.

    Never with ``out=``: SimSIMD 6.5 returns None from that form without taking a
    reference, so every call drops one from None's count, and the interpreter
    aborts once it reaches zero (seen at exit after a long benchmark). A test
    pins the count.
    """
    result = _KERNELS.cdist(a, b, metric="dot", threads=threads, out_dtype="float32")
    return np.asarray(result, dtype=np.float32).reshape(a.shape[0], b.shape[0])
