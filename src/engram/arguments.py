"""Arguments of the facade's reads that take more than one check: a listing's page.

``Engram.list`` hands its arguments here and gets the storage ``Listing`` back, or
``InvalidArgument`` naming the bad one, so the facade stays a list of calls.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime

from engram import limits
from engram.config import Config
from engram.errors import InvalidArgument
from engram.store.contract import Listing
from engram.types import Status, parse_enum

__all__ = ["listing", "statuses"]

_STATUS_ALL = tuple(status.value for status in Status)
_MAX_LIMIT = 10_000


def statuses(status: str | Status | Sequence[str | Status] | None) -> tuple[str, ...]:
    """One status, a list of them, or None (every status), as stored values."""
    if status is None:
        return _STATUS_ALL
    if isinstance(status, str):
        return (parse_enum(Status, status, "status").value,)
    if not isinstance(status, Sequence):
        raise InvalidArgument("status must be a status, a list of statuses, or None")
    return tuple(parse_enum(Status, s, "status").value for s in status)


def listing(
    config: Config, type: str | None, status: str | Status | Sequence[str | Status] | None,
    limit: int, offset: int, now: datetime,
) -> Listing:  # fmt: skip
    """The page ``Engram.list`` asks for: a known type, statuses, a limit in
    [1, 10000] and an offset in [0, ``limits.MAX_OFFSET``]."""
    if type is not None:
        if not isinstance(type, str):
            raise InvalidArgument(f"type must be a string, got {builtins.type(type).__name__}")
        config.policy(type)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise InvalidArgument(f"limit must be an integer between 1 and {_MAX_LIMIT}")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidArgument("offset must be a non-negative integer")
    if not 0 <= offset <= limits.MAX_OFFSET:
        raise InvalidArgument(f"offset must be between 0 and {limits.MAX_OFFSET}")
    return Listing(statuses(status), type, limit, offset, now)
