"""Clocks: where "now" comes from, injectable so tests and replays can fix it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from engram import limits
from engram.errors import InvalidArgument

__all__ = ["Clock", "FrozenClock", "SystemClock", "require_aware"]


@runtime_checkable
class Clock(Protocol):
    """Anything that can tell the current, timezone-aware time."""

    def now(self) -> datetime:
        """Return the current time (timezone-aware)."""
        ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


class FrozenClock:
    """A clock that only moves when told to; for tests, replays and benchmarks."""

    def __init__(self, start: datetime) -> None:
        self._now = require_aware(start, "start")

    def now(self) -> datetime:
        """Return the frozen time."""
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when``."""
        self._now = require_aware(when, "when")

    def advance(self, **delta: float) -> datetime:
        """Move forward by a ``timedelta(**delta)`` and return the new time."""
        self._now = self._now + timedelta(**delta)
        return self._now


def require_aware(value: datetime, name: str) -> datetime:
    """Reject naive datetimes (Engram never guesses a timezone) and ones so close to
    ``datetime.min``/``max`` that a retention period or a time-zone shift would overflow."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{name} must be timezone-aware (e.g. datetime.now(UTC))")
    return limits.check_moment(value, name).astimezone(UTC)
