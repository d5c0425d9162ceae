"""Working memory in Redis (the server deployment): one string key per item, native TTL.

Keys embed the full scope, each component percent-escaped (``escape``: only
``A-Z a-z 0-9 _ . - ~`` stay as they are), so ``:`` separates components and
nothing else, and a component can never look like two::

    <prefix>:wm:<tenant>:<user>:<agent or ''>:<session|task>:<id>:<key>   the item
    <prefix>:wmi:<tenant>:<user>:<agent or ''>:<session|task>:<id>        its index

An item is a small hash (value, set and expiry times) with ``PEXPIRE <ttl>``:
Redis deletes it on time by itself (Redis 7 has no per-field TTL, hence a key
per item rather than a hash per scope). The index is a sorted set of
the scope's keys scored by expiry (milliseconds, Redis's clock), so ``list`` and
``clear`` never ``SCAN``; it expires with its last item. Writes run as Lua
scripts, atomic against concurrent writers: a set purges expired index entries,
enforces ``max_items``, writes the item and indexes it in one step. Time is
Redis's clock (``TIME``), not the injected one: it decides expiry, and it
stamps ``set_at`` and ``expires_at``, so what an item says is what Redis does.
Erasing a user ``SCAN``s for the prefix ``<prefix>:wm:<tenant>:<user>:`` (and
``wmi``), exact because of the escaping. Scripts build item keys from the
scope prefix: one Redis, not a cluster.

Connection and timeout errors become ``Unavailable`` naming host and port; no
message repeats the URL's password.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from engram.errors import InvalidArgument, StoreError, Unavailable
from engram.store import erasure
from engram.store.erasure import Scrub
from engram.working import redis_persistence
from engram.working.base import WorkingItem, WorkingScope
from engram.working.config import WorkingConfig
from engram.working.redis_url import RedisTarget

__all__ = ["RedisWorking", "escape", "index_key", "item_key"]

T = TypeVar("T")

_SET = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  local count = redis.call('ZCARD', KEYS[2])
  if count >= tonumber(ARGV[4]) then return {-count, now} end
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', now, 'e', now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], tonumber(last[2]))
return {1, now}
"""
_DELETE = """
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
"""
_CLEAR = """
local live = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  live = live + redis.call('DEL', ARGV[1] .. member)
end
redis.call('DEL', KEYS[1])
return live
"""


_FIELDS = ("v", "s", "e")


def escape(part: str) -> str:
    """One key component, percent-escaped: injective, and free of ``:`` and of the
    glob characters ``SCAN MATCH`` reads (``* ? [ ] \\``)."""
    return quote(part, safe="")


def _scope_path(scope: WorkingScope) -> str:
    parts = (scope.tenant_id, scope.user_id, scope.agent_id or "", scope.kind, scope.scope_id)
    return ":".join(escape(part) for part in parts)


def item_key(prefix: str, scope: WorkingScope, key: str) -> str:
    """The Redis key of one item."""
    return f"{prefix}:wm:{_scope_path(scope)}:{escape(key)}"


def index_key(prefix: str, scope: WorkingScope) -> str:
    """The Redis key of a scope's index (a sorted set of escaped item keys)."""
    return f"{prefix}:wmi:{_scope_path(scope)}"


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


class RedisWorking:
    """``WorkingStore`` on Redis, through redis-py (the ``redis`` extra)."""

    def __init__(self, target: RedisTarget, config: WorkingConfig | None = None) -> None:
        self.config = config or WorkingConfig()
        self.target = target
        self._prefix = self.config.redis_prefix
        self._client: Any = target.client(self.config.redis_timeout_seconds)
        self._call(self._client.ping)
        self._set = self._client.register_script(_SET)
        self._delete = self._client.register_script(_DELETE)
        self._clear = self._client.register_script(_CLEAR)

    def _call(self, action: Callable[[], T]) -> T:
        """Run one Redis command; its errors become Engram errors without secrets."""
        from redis import exceptions

        try:
            return action()
        except exceptions.AuthenticationError as exc:
            raise Unavailable(f"working memory: Redis at {self.target.where} refused the "
                              f"credentials ({self.target.redact(exc)})") from None  # fmt: skip
        except (exceptions.ConnectionError, exceptions.TimeoutError) as exc:
            raise Unavailable(f"working memory: Redis at {self.target.where} is unreachable "
                              f"({self.target.redact(exc)})") from None  # fmt: skip
        except exceptions.RedisError as exc:
            raise StoreError(f"working memory: Redis at {self.target.where} failed "
                             f"({self.target.redact(exc)})") from None  # fmt: skip

    def put(self, scope: WorkingScope, key: str, value: str, ttl: timedelta,
            now: datetime) -> WorkingItem:  # fmt: skip
        """Set ``key`` for ``ttl`` (``PEXPIRE``) and index it, atomically."""
        keys = [item_key(self._prefix, scope, key), index_key(self._prefix, scope)]
        args = [escape(key), value, _ms(ttl), self.config.max_items]
        done, at_ms = (int(n) for n in self._call(lambda: self._set(keys=keys, args=args)))
        if done < 0:
            raise InvalidArgument(
                f"this {scope.kind}'s working memory holds {-done} items, the limit; "
                "delete or clear some first"
            )
        return WorkingItem(key, json.loads(value), _at(at_ms), _at(at_ms + _ms(ttl)), scope)

    def fetch(self, scope: WorkingScope, key: str, now: datetime) -> WorkingItem | None:
        """The item under ``key`` while Redis still holds it."""
        name = item_key(self._prefix, scope, key)
        return _item(key, self._call(lambda: self._client.hmget(name, _FIELDS)), scope)

    def items(self, scope: WorkingScope, now: datetime) -> list[WorkingItem]:
        """The scope's live items, most recently set first (then by key)."""
        index = index_key(self._prefix, scope)
        members: list[bytes] = self._call(lambda: self._client.zrange(index, 0, -1))
        if not members:
            return []
        base = index.replace(":wmi:", ":wm:", 1) + ":"
        keys = [base + member.decode() for member in members]
        pipe = self._client.pipeline(transaction=False)
        for name in keys:
            pipe.hmget(name, _FIELDS)
        rows: list[list[bytes | None]] = self._call(pipe.execute)
        found = (_item(unquote(m.decode()), fields, scope)
                 for m, fields in zip(members, rows, strict=True))  # fmt: skip
        live = [item for item in found if item is not None]
        return sorted(live, key=lambda item: (-item.set_at.timestamp(), item.key))

    def remove(self, scope: WorkingScope, key: str, now: datetime) -> bool:
        """Delete ``key`` and its index entry; True when Redis still held it."""
        keys = [item_key(self._prefix, scope, key), index_key(self._prefix, scope)]
        return int(self._call(lambda: self._delete(keys=keys, args=[escape(key)]))) > 0

    def clear(self, scope: WorkingScope, now: datetime) -> int:
        """Delete the scope's items and index; the number Redis still held."""
        index = index_key(self._prefix, scope)
        base = index.replace(":wmi:", ":wm:", 1) + ":"
        return int(self._call(lambda: self._clear(keys=[index], args=[base])))

    def _subject_patterns(self, tenant_id: str, user_id: str) -> tuple[str, str]:
        path = f"{escape(tenant_id)}:{escape(user_id)}:*"
        return f"{self._prefix}:wm:{path}", f"{self._prefix}:wmi:{path}"

    def _scan(self, pattern: str) -> list[bytes]:
        return list(self._call(lambda: list(self._client.scan_iter(match=pattern, count=1000))))

    def erase_subject(self, tenant_id: str, user_id: str) -> int:
        """Delete every item and index of one user of one tenant; the items deleted."""
        items_pattern, index_pattern = self._subject_patterns(tenant_id, user_id)
        erased = self._delete_all(self._scan(items_pattern))
        self._delete_all(self._scan(index_pattern))
        return erased

    def _delete_all(self, keys: list[bytes]) -> int:
        """``DEL`` in batches of 500 keys; how many existed."""
        batches = [keys[start : start + 500] for start in range(0, len(keys), 500)]
        return sum(int(self._call(partial(self._client.delete, *batch))) for batch in batches)

    def subject_residue(self, tenant_id: str, user_id: str) -> int:
        """Keys (items and indexes) of that user still in Redis."""
        return sum(len(self._scan(p)) for p in self._subject_patterns(tenant_id, user_id))

    def scrub(self, strings: Sequence[str], erased: bool) -> Scrub:
        """Once its keys are deleted Redis holds no erased value in memory; what it may
        still hold is on disk, in its persistence (RDB snapshot, append-only file).
        When items were ``erased`` and persistence is on, rewrite both now and wait
        (``redis_persistence``); ``redis persistence`` fails when that could not be
        confirmed. Not checked (not named) where ``CONFIG`` is not allowed."""
        wanted = erasure.windows(strings)
        if not erased:
            return Scrub((), (), wanted.strings, wanted.short)
        try:
            wait = self.config.redis_timeout_seconds * 5
            done = self._call(lambda: redis_persistence.rewrite(self._client, wait))
        except StoreError:
            return Scrub((), (), wanted.strings, wanted.short)
        failed = () if done else (redis_persistence.CHECK,)
        return Scrub((redis_persistence.CHECK,), failed, wanted.strings, wanted.short)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _item(key: str, fields: list[bytes | None], scope: WorkingScope) -> WorkingItem | None:
    """The item from its hash fields (value, set, expiry), or None when it is gone."""
    value, set_ms, end_ms = fields
    if value is None or set_ms is None or end_ms is None:
        return None
    return WorkingItem(key, json.loads(value), _at(int(set_ms)), _at(int(end_ms)), scope)
