"""Time-ordered unique ids (ULID layout): 48-bit milliseconds + 80 random bits.

Sorting ids sorts records by creation order, which keeps B-tree inserts local
and gives a stable tie-break wherever an order is needed. Within one process the
ids are strictly increasing even inside the same millisecond.
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
