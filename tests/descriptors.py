"""Test helper: how many of this process's file descriptors are open on one file
(Linux ``/proc/self/fd``), for the tests that a store closes what it opened."""

from __future__ import annotations

import os

__all__ = ["open_descriptors"]


def open_descriptors(path: str) -> int:
    """How many of this process's descriptors are open on the file at ``path``."""
    target, count = os.path.realpath(path), 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}") == target
        except OSError:  # closed since the listing
            continue
    return count
