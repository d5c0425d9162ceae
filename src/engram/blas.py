"""One BLAS thread for the small matrix products of a request.

The read and write paths multiply small matrices (a few hundred candidates by
384 dimensions: dedup, MMR, near-duplicate checks). OpenBLAS splits even those
across every core and its workers spin afterwards, so on a busy two-core machine
a 0.2 ms product took 10 ms at p95. ``one_thread()`` caps BLAS to one thread for
the duration of a call and restores the previous setting afterwards. The large
exact vector scans do not use BLAS (see ``store.vectors.ScanPolicy``).

Without ``threadpoolctl`` installed this is a no-op.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["one_thread"]

_lock = threading.Lock()
_controller: list[Any] = []


def _get_controller() -> Any:
    """The process's threadpoolctl controller, created once (it inspects loaded
    libraries, which takes milliseconds); None without threadpoolctl."""
    with _lock:
        if not _controller:
            try:
                from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

                _controller.append(ThreadpoolController())
            except ImportError:  # optional: only a speed-up
                _controller.append(None)
        return _controller[0]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Cap BLAS libraries to one thread inside the block."""
    controller = _get_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield
