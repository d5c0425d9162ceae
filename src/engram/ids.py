"""Time-ordered unique ids (ULID layout): 48-bit milliseconds + 80 random bits.

Sorting ids sorts records by creation order, which keeps B-tree inserts local
and gives a stable tie-break wherever an order is needed. Within one process the
ids are strictly increasing even inside the same millisecond.

Across processes ids stay unique because each process draws its own 80 random
bits at the start of each millisecond. A process made by ``os.fork()`` (a
pre-fork server's workers, ``multiprocessing`` with the ``fork`` start method)
would otherwise continue from its parent's state: within the same millisecond
both would increment the same counter and mint the same ids. So the child forgets
the state (and gets a fresh lock, which the parent may have held while forking)
before it runs any code of its own (``os.register_at_fork``).
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS = 80
_lock = threading.Lock()
_state = {"millis": 0, "rand": 0}


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def _reset_after_fork() -> None:
    """In a forked child: a new lock, and no millisecond seen yet, so the next id
    draws fresh random bits instead of incrementing the parent's."""
    global _lock
    _lock = threading.Lock()
    _state["millis"], _state["rand"] = 0, 0


def new_id() -> str:
    """Return a 26-character id that sorts after every id made before it in-process."""
    millis = time.time_ns() // 1_000_000
    with _lock:
        if millis <= _state["millis"]:
            millis = _state["millis"]
            rand = (_state["rand"] + 1) % (1 << _RANDOM_BITS)
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1
        _state["millis"], _state["rand"] = millis, rand
    return _encode(millis, 10) + _encode(rand, 16)


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_reset_after_fork)
