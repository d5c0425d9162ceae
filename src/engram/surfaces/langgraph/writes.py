"""The write side of ``EngramStore``: puts through Engram's write path, deletes as
``forget``, and TTLs as exact expiry times.

Every put of a batch is validated before anything is written. The puts, and the
TTL refreshes the batch's reads earned, then run in one transaction: each user's
puts are one ``remember_many`` (policy, decision, version chain, audit), and an
item with a TTL gets its ``expires_at`` set in the same transaction. A put the
write policy refuses (a secret, personal data without a consent basis, empty or
oversized content, chatter) or keeps only as disputed raises ``InvalidArgument``
with Engram's reason, and the transaction is rolled back: nothing of the batch's
puts is stored. Each delete is then a ``forget`` of its own (a hard delete of
every version, verified after commit).

Items are written with retention ``permanent``: LangGraph keeps an item until it
is deleted or its TTL lapses, so Engram's retention periods do not apply, and a
recall that touches an item never stretches its TTL (a permanent retention is
never renewed). The TTL alone decides: ``expires_at`` is the last put or
refreshing read plus ``ttl`` minutes. Setting it is audited (``RETAIN``, ids only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from langgraph.store.base import PutOp

from engram import limits
from engram.engram import Engram
from engram.errors import InvalidArgument, NotFound
from engram.scope import resolve
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Update
from engram.store.predicate import OwnerSlot, Visibility
from engram.surfaces.langgraph.items import (
    checked_value,
    content_of,
    envelope,
    stored,
    ttl_minutes,
)
from engram.surfaces.langgraph.namespaces import Identity, Placement, engram_key
from engram.surfaces.langgraph.reads import Found, Reader
from engram.types import Operation, Record, Status, WriteResult, as_seen
from engram.write.batch import actor

__all__ = ["Pending", "WriteOptions", "Writer"]

_KEPT = (Operation.ADD, Operation.SUPERSEDE, Operation.CONFIRM)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """How items are written: their Engram type, authority and consent basis, and the
    default fields their content is taken from (None: the item's text field or JSON)."""

    type_name: str = "fact"
    authority: str | None = None
    consent_basis: str | None = None
    fields: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Pending:
    """A put, validated: where it goes and what it stores."""

    namespace: tuple[str, ...]
    key: str
    placement: Placement
    value: dict[str, object]
    content: str
    ttl: float | None
    indexed: bool

    @property
    def where(self) -> str:
        """The item named in an error message (namespace and key, never content)."""
        return f"put {limits.shown(self.namespace)} / {limits.shown(self.key)}"


class Writer:
    """Writes for one store: its Engram instance, identity, reader and options."""

    def __init__(self, memory: Engram, identity: Identity, reader: Reader,
                 options: WriteOptions) -> None:  # fmt: skip
        self._memory = memory
        self._identity = identity
        self._reader = reader
        self._options = options

    def pending(self, op: PutOp) -> Pending:
        """Validate one put of a value (not a delete) before anything is written."""
        namespace, where = tuple(op.namespace), f"put {limits.shown(tuple(op.namespace))}"
        placement = self._identity.place(namespace)
        value: dict[str, object] = limits.json_value(
            checked_value(op.value, where), f"{where}: value"
        )  # canonical JSON
        if op.index is not False and op.index is not None and not isinstance(op.index, list):
            raise InvalidArgument(f"{where}: index must be None, False or a list of paths")
        fields = self._options.fields if op.index is None else op.index or None
        content = content_of(value, fields)
        return Pending(namespace, op.key, placement, value, content,
                       ttl_minutes(op.ttl, where), op.index is not False)  # fmt: skip

    def apply(self, puts: Sequence[Pending], deletes: Sequence[PutOp],
              refresh: Sequence[Found], now: datetime) -> None:  # fmt: skip
        """Refresh TTLs and write ``puts`` in one transaction, then ``deletes``."""
        if puts or refresh:
            with self._memory.store.transaction():
                self._refresh(refresh, now)
                for user in self._identity.all_users:
                    mine = [p for p in puts if p.placement.user_id == user]
                    if mine:
                        self._put(user, mine, now)
        for op in deletes:
            self._delete(op)

    def _put(self, user: str, puts: Sequence[Pending], now: datetime) -> None:
        """One user's puts as one ``remember_many``, then their expiry times."""
        current = self._reader.live(user, [(p.namespace, p.key) for p in puts], now)
        items = [self._item(p, current.get((p.namespace, p.key)), now) for p in puts]
        results = self._memory.remember_many(self._identity.context(user), items, now=now)
        for put, result in zip(puts, results, strict=True):
            _require_kept(put, result)
        timed = [(r.record, p.ttl) for p, r in zip(puts, results, strict=True)
                 if p.ttl is not None and r.record is not None]  # fmt: skip
        self._expire(user, timed, now, "ttl")

    def _item(self, put: Pending, previous: Record | None, now: datetime) -> dict[str, object]:
        """The ``remember`` arguments of a put; the item keeps its first creation time."""
        held = stored(previous) if previous is not None else None
        created = held.created_at if held is not None else now
        value = envelope(put.placement.path, put.key, put.value, created, put.ttl, put.indexed)
        return {
            "content": put.content, "type": self._options.type_name,
            "scope": put.placement.scope, "key": engram_key(put.namespace, put.key),
            "value": value, "retention": "permanent", "authority": self._options.authority,
            "consent_basis": self._options.consent_basis,
            "agent_scope": "agent" if self._identity.agent_id else None,
        }  # fmt: skip

    def _refresh(self, refresh: Sequence[Found], now: datetime) -> None:
        """Restart the TTL of items the batch read with ``refresh_ttl``."""
        for user in self._identity.all_users:
            timed = {hit.record.id: (hit.record, hit.held.ttl) for hit in refresh
                     if hit.record.user_id == user and hit.held.ttl is not None}  # fmt: skip
            self._expire(user, list(timed.values()), now, "ttl_refresh")

    def _expire(self, user: str, timed: Sequence[tuple[Record, float | None]], now: datetime,
                reason: str) -> None:  # fmt: skip
        """Set ``expires_at = now + ttl`` on live records, re-read under their slot
        locks inside the open transaction (a concurrent put may have replaced one)."""
        if not timed:
            return
        scope = resolve(self._identity.context(user))
        for record, _ in sorted(timed, key=lambda pair: (pair[0].scope, pair[0].key or "")):
            slot = OwnerSlot.of(record.tenant_id, record.user_id, record.agent_id, record.scope,
                                self._identity.agent_id)  # fmt: skip
            self._memory.store.lock_slot(slot, f"key:{record.key}")
        minutes = {record.id: ttl for record, ttl in timed if ttl is not None}
        fresh = self._memory.store.read(Visibility.of(scope), list(minutes))
        changes: list[Update | Audit] = [
            Update(r.replace(expires_at=now + timedelta(minutes=minutes[r.id])))
            for r in fresh if as_seen(r, now).status == Status.ACTIVE
        ]  # fmt: skip
        if changes:
            ids = [change.record.id for change in changes if isinstance(change, Update)]
            entry = AuditEntry(now, scope.tenant_id, scope.user_id, actor(scope), "RETAIN",
                               ids, reason)  # fmt: skip
            self._memory.store.apply([*changes, Audit(entry)])

    def _delete(self, op: PutOp) -> None:
        """Forget every stored version of the item (a no-op when there is none)."""
        namespace = tuple(op.namespace)
        user = self._identity.place(namespace).user_id
        gone: set[str] = set()
        for record in self._reader.stored_versions(user, namespace, op.key):
            if record.id in gone:
                continue
            try:
                receipt = self._memory.forget(self._identity.context(user), record.id)
            except NotFound:  # a concurrent delete got there first
                continue
            gone.update(receipt.deleted)


def _require_kept(put: Pending, result: WriteResult) -> None:
    """A put Engram did not store as the item's active value raises (rolling back)."""
    record = result.record
    if result.operation in _KEPT and record is not None and record.status == Status.ACTIVE:
        return
    if result.operation == Operation.REJECT:
        raise InvalidArgument(f"{put.where}: Engram's write policy refused it: {result.reason}")
    raise InvalidArgument(f"{put.where}: Engram did not store it as the current value "
                          f"({result.operation.value}: {result.reason})")  # fmt: skip
