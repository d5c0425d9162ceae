"""Working memory: session- and task-scoped state with a time to live.

``Engram.working(ctx)`` returns a ``WorkingMemory`` (set / get / list / delete /
clear) bound to the caller's session or task; see ``engram.working.base`` for
the scoping rules. Backends: ``SQLiteWorking`` (embedded default, same file as
the records) and ``RedisWorking`` (server deployments, native TTL).
"""

from engram.working.base import (
    ScopedWorking,
    WorkingItem,
    WorkingMemory,
    WorkingScope,
    WorkingStore,
    scope_for,
)
from engram.working.config import WorkingConfig
from engram.working.open import open_working
from engram.working.redis_store import RedisWorking
from engram.working.redis_url import RedisTarget
from engram.working.sqlite import SQLiteWorking

__all__ = [
    "RedisTarget",
    "RedisWorking",
    "SQLiteWorking",
    "ScopedWorking",
    "WorkingConfig",
    "WorkingItem",
    "WorkingMemory",
    "WorkingScope",
    "WorkingStore",
    "open_working",
    "scope_for",
]
