"""Working memory's knobs: time to live, size bounds, and the Redis namespace.

Kept apart from ``engram.config`` (which holds one ``WorkingConfig`` as
``Config.working``) so that the working-memory backends import no more than this.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from engram.errors import ConfigError
from engram.limits import MAX_IDENTIFIER_CHARS, MAX_VALUE_BYTES

__all__ = ["WorkingConfig"]

_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class WorkingConfig:
    """Bounds of session and task working memory (``Engram.working``).

    ``default_ttl_hours`` is the time to live of an item set without a ``ttl``;
    no item may live longer than ``max_ttl_hours``. A key is at most
    ``max_key_chars`` printable characters; a value at most ``max_value_bytes`` of
    compact UTF-8 JSON; one session (or task) holds at most ``max_items`` live
    items, so ``list`` and recall stay bounded. ``purge_interval_seconds`` is how
    often a SQLite write also deletes every scope's expired items (each write
    always purges its own scope's). ``recall_type`` is the memory type working
    items take in a recall block (its section; it must be one of the recall's
    ``working_types`` for the working channel to read them). ``redis_prefix``
    namespaces the Redis keys (``<prefix>:wm:...``); ``redis_timeout_seconds``
    bounds a connection attempt and each command.
    """

    default_ttl_hours: float = 24.0
    max_ttl_hours: float = 168.0
    max_key_chars: int = MAX_IDENTIFIER_CHARS
    max_value_bytes: int = MAX_VALUE_BYTES
    max_items: int = 1000
    purge_interval_seconds: float = 60.0
    recall_type: str = "task_state"
    redis_prefix: str = "engram"
    redis_timeout_seconds: float = 2.0

    def __post_init__(self) -> None:
        """Refuse values that would make every later call fail or never expire."""
        if not 0 < self.max_ttl_hours < math.inf:
            raise ConfigError("working.max_ttl_hours must be finite and > 0")
        if not 0 < self.default_ttl_hours <= self.max_ttl_hours:
            raise ConfigError("working.default_ttl_hours must be in (0, max_ttl_hours]")
        if not 1 <= self.max_key_chars <= MAX_IDENTIFIER_CHARS:
            raise ConfigError(f"working.max_key_chars must be in [1, {MAX_IDENTIFIER_CHARS}]")
        if not 1 <= self.max_value_bytes <= MAX_VALUE_BYTES:
            raise ConfigError(f"working.max_value_bytes must be in [1, {MAX_VALUE_BYTES}]")
        if not 1 <= self.max_items <= 100_000:
            raise ConfigError("working.max_items must be in [1, 100000]")
        if not 0 < self.purge_interval_seconds < math.inf:
            raise ConfigError("working.purge_interval_seconds must be finite and > 0")
        if not 0 < self.redis_timeout_seconds <= 300:
            raise ConfigError("working.redis_timeout_seconds must be in (0, 300]")
        if not _PREFIX.fullmatch(self.redis_prefix):
            raise ConfigError("working.redis_prefix must be 1-64 of A-Z a-z 0-9 _ . -")
