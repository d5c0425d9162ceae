"""Working memory: session- and task-scoped state that expires by itself.

``Engram.working(ctx)`` returns a ``WorkingMemory`` bound to one scope: the
caller's tenant, user and agent (or no agent) and one session or one task. A
handle reads and writes only that scope; there is no call that names another.

Which scope: ``kind="task"`` needs ``ctx.task_id``, ``kind="session"`` needs
``ctx.session_id``; with no ``kind`` the task is used when the context names
one, else the session. A context that names neither is refused
(``InvalidArgument``): working memory without a session or task would outlive
the work it belongs to. Project and repository ids do not scope working memory.

A backend (``WorkingStore``) stores items under the FULL scope (tenant, user,
agent, kind, id, key): SQLite as separate columns of one primary key, Redis as
escaped components of one key string, so no item of one scope can be read,
listed, overwritten or cleared through another.

Every argument is checked here, once for every backend: a key is 1 to
``max_key_chars`` printable characters without surrounding whitespace; a value
is JSON (``engram.limits.json_value``) of at most ``max_value_bytes``; a ``ttl``
is a ``timedelta`` or a number of seconds between 1 ms and ``max_ttl_hours``.
"""

from __future__ import annotations

import builtins
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from engram import limits
from engram.clock import Clock
from engram.errors import InvalidArgument
from engram.scope import Scope
from engram.store.erasure import Scrub
from engram.working.config import WorkingConfig

__all__ = [
    "KINDS",
    "ScopedWorking",
    "ScrubbedWorking",
    "WorkingItem",
    "WorkingMemory",
    "WorkingScope",
    "WorkingStore",
    "check_key",
    "check_ttl",
    "check_value",
    "scope_for",
]

KINDS = ("task", "session")
_MILLISECOND = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class WorkingScope:
    """The one scope a handle is bound to; ``agent_id`` None means "no agent"."""

    tenant_id: str
    user_id: str
    agent_id: str | None
    kind: str  # "session" or "task"
    scope_id: str

    @property
    def scope(self) -> str:
        """The scope value records use for the same place: ``session:<id>``, ``task:<id>``."""
        return f"{self.kind}:{self.scope_id}"


@dataclass(frozen=True, slots=True)
class WorkingItem:
    """One live item: its key and JSON value, when it was set and when it expires."""

    key: str
    value: Any
    set_at: datetime
    expires_at: datetime
    scope: WorkingScope


class WorkingMemory(Protocol):
    """Session or task state bound to one scope, with a time to live."""

    @property
    def scope(self) -> WorkingScope:
        """The scope every call of this handle reads and writes."""
        ...

    def set(self, key: str, value: Any, ttl: timedelta | float | None = None) -> WorkingItem:
        """Store ``value`` under ``key`` (replacing it) for ``ttl`` (default from config)."""
        ...

    def get(self, key: str) -> WorkingItem | None:
        """The live item under ``key``, or None (never set, deleted or expired)."""
        ...

    def list(self) -> builtins.list[WorkingItem]:
        """Every live item of the scope, most recently set first."""
        ...

    def delete(self, key: str) -> bool:
        """Remove ``key``; True when a live item was removed."""
        ...

    def clear(self) -> int:
        """Remove every item of the scope; how many live items were removed."""
        ...


class WorkingStore(Protocol):
    """A backend: items under full scopes. Arguments arrive checked (``ScopedWorking``)."""

    def put(self, scope: WorkingScope, key: str, value: str, ttl: timedelta,
            now: datetime) -> WorkingItem:  # fmt: skip
        """Set ``key`` to the JSON text ``value`` until ``now + ttl``."""
        ...

    def fetch(self, scope: WorkingScope, key: str, now: datetime) -> WorkingItem | None:
        """The item under ``key`` if it is live at ``now``."""
        ...

    def items(self, scope: WorkingScope, now: datetime) -> list[WorkingItem]:
        """The scope's live items, most recently set first."""
        ...

    def remove(self, scope: WorkingScope, key: str, now: datetime) -> bool:
        """Delete ``key``; True when it was live."""
        ...

    def clear(self, scope: WorkingScope, now: datetime) -> int:
        """Delete the scope's items; the number that were live."""
        ...

    def erase_subject(self, tenant_id: str, user_id: str) -> int:
        """Delete every item of one user of one tenant, in every agent, session and task."""
        ...

    def subject_residue(self, tenant_id: str, user_id: str) -> int:
        """How many items (live or not yet purged) of that user remain (0 after erasure)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class ScrubbedWorking(Protocol):
    """A backend that can also show physically that erased texts are gone (both
    built-in ones; a custom ``WorkingStore`` without it is checked by rows only)."""

    def scrub(self, strings: Sequence[str], erased: bool) -> Scrub:
        """After an erasure: what the backend checked for ``strings`` beyond its rows
        (``erased``: items were deleted, so persisted copies must be rewritten)."""
        ...


def scope_for(scope: Scope, kind: str | None) -> WorkingScope:
    """The working scope of a resolved caller: its task or session (see module notes)."""
    if kind is not None and kind not in KINDS:
        raise InvalidArgument(f"kind must be 'session', 'task' or None, got {limits.shown(kind)}")
    chosen = kind or ("task" if scope.task_id else "session")
    ident = scope.task_id if chosen == "task" else scope.session_id
    if ident is None:
        wanted = "task_id" if kind == "task" else "session_id" if kind else "session_id or task_id"
        raise InvalidArgument(
            f"working memory is scoped to a session or a task: set {wanted} on the Context"
        )
    return WorkingScope(scope.tenant_id, scope.user_id, scope.agent_id, chosen, ident)


def check_key(key: object, config: WorkingConfig) -> str:
    """A key: printable, no surrounding whitespace, 1 to ``max_key_chars`` characters."""
    checked = limits.identifier(key, "key")
    if len(checked) > config.max_key_chars:
        raise InvalidArgument(f"key must be at most {config.max_key_chars} characters long")
    return checked


def check_value(value: object, config: WorkingConfig) -> str:
    """The canonical compact JSON text of ``value``, within ``max_value_bytes``."""
    canonical = limits.json_value(value, "value")
    text = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(text.encode())
    if size > config.max_value_bytes:
        raise InvalidArgument(
            f"value is {size} bytes of JSON; working memory holds at most "
            f"{config.max_value_bytes} per item"
        )
    return text


def check_ttl(ttl: object, config: WorkingConfig) -> timedelta:
    """A time to live in whole milliseconds: ``None`` (the default), a ``timedelta`` or
    seconds, from 1 ms to ``max_ttl_hours``."""
    if ttl is None:
        return timedelta(hours=config.default_ttl_hours) // _MILLISECOND * _MILLISECOND
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise InvalidArgument(f"ttl must be a timedelta, seconds or None, got {type(ttl).__name__}")
    if not math.isfinite(seconds) or not 0.001 <= seconds <= config.max_ttl_hours * 3600:
        raise InvalidArgument(
            f"ttl must be between 1 ms and {config.max_ttl_hours:g} hours, got {limits.shown(ttl)}"
        )
    return timedelta(milliseconds=round(seconds * 1000))


class ScopedWorking:
    """``WorkingMemory`` over any ``WorkingStore``: checks every argument, reads the clock."""

    def __init__(self, store: WorkingStore, scope: WorkingScope, config: WorkingConfig,
                 clock: Clock, on_remove: Callable[[], None] | None = None) -> None:  # fmt: skip
        self._store, self._scope, self._config, self._clock = store, scope, config, clock
        # called after a delete or clear: drops process caches that may hold the text
        self._on_remove = on_remove or (lambda: None)

    @property
    def scope(self) -> WorkingScope:
        """The scope every call of this handle reads and writes."""
        return self._scope

    def set(self, key: str, value: Any, ttl: timedelta | float | None = None) -> WorkingItem:
        """Store ``value`` under ``key`` (replacing it) for ``ttl`` (default from config)."""
        checked = check_key(key, self._config)
        text, life = check_value(value, self._config), check_ttl(ttl, self._config)
        return self._store.put(self._scope, checked, text, life, self._clock.now())

    def get(self, key: str) -> WorkingItem | None:
        """The live item under ``key``, or None (never set, deleted or expired)."""
        return self._store.fetch(self._scope, check_key(key, self._config), self._clock.now())

    def list(self) -> builtins.list[WorkingItem]:
        """Every live item of the scope, most recently set first."""
        return self._store.items(self._scope, self._clock.now())

    def delete(self, key: str) -> bool:
        """Remove ``key``; True when a live item was removed."""
        removed = self._store.remove(self._scope, check_key(key, self._config), self._clock.now())
        self._on_remove()
        return removed

    def clear(self) -> int:
        """Remove every item of the scope; how many live items were removed."""
        removed = self._store.clear(self._scope, self._clock.now())
        self._on_remove()
        return removed
