"""Engram: governed long-term memory for AI agents.

The public surface is ``Engram`` (open a store, remember, recall, correct,
forget...), ``Context`` (who is asking), ``Budget`` (how much memory a prompt
may take), ``WorkingMemory`` (session and task state with a time to live,
``Engram.working``) and the value and error types below.
"""

from engram.clock import Clock, FrozenClock, SystemClock
from engram.config import Budget, Config, TypePolicy
from engram.engram import Engram
from engram.errors import (
    ConfigError,
    Conflict,
    EmbeddingError,
    EngramError,
    Forbidden,
    IncompleteIdentity,
    IndexMismatch,
    InvalidArgument,
    MigrationError,
    NotFound,
    PartialWrite,
    StoreError,
    Unavailable,
)
from engram.scope import Context, Scope
from engram.types import (
    Authority,
    Operation,
    Record,
    Retention,
    Sensitivity,
    Source,
    SourceKind,
    Status,
    Tier,
    Turn,
    WriteResult,
)
from engram.working import WorkingConfig, WorkingItem, WorkingMemory

__all__ = [
    "Authority",
    "Budget",
    "Clock",
    "Config",
    "ConfigError",
    "Conflict",
    "Context",
    "EmbeddingError",
    "Engram",
    "EngramError",
    "Forbidden",
    "FrozenClock",
    "IncompleteIdentity",
    "IndexMismatch",
    "InvalidArgument",
    "MigrationError",
    "NotFound",
    "Operation",
    "PartialWrite",
    "Record",
    "Retention",
    "Scope",
    "Sensitivity",
    "Source",
    "SourceKind",
    "Status",
    "StoreError",
    "SystemClock",
    "Tier",
    "Turn",
    "TypePolicy",
    "Unavailable",
    "WorkingConfig",
    "WorkingItem",
    "WorkingMemory",
    "WriteResult",
]

__version__ = "0.1.0"
