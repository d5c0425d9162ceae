"""Fixtures shared by the store tests: file stores, and vector partitions built from
raw rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from engram import Engram
from engram.store.vectors import Partition


@pytest.fixture
def open_engine(open_mem: Callable[..., Engram]) -> Callable[..., Engram]:
    """``open_engine(path)``: a file store at ``path`` (default configuration)."""

    def _open(path: Path) -> Engram:
        return open_mem(f"sqlite:///{path}")

    return _open


def vector_partition(rows: np.ndarray, users: list[str] | None = None) -> Partition:
    """A vector partition of tenant-less rows r0, r1, ... (all of user u1 by default)."""
    part = Partition(dimension=rows.shape[1])
    owners = users or ["u1"] * len(rows)
    part.append([(i + 1, f"r{i}", owners[i], "user", "", rows[i].tobytes())
                 for i in range(len(rows))])  # fmt: skip
    return part


@pytest.fixture
def make_partition() -> Callable[..., Partition]:
    """``make_partition(rows, users=None)``: see ``vector_partition``."""
    return vector_partition
