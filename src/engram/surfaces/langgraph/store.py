"""``EngramStore``: LangGraph's ``BaseStore`` with Engram as the system of record.

LangGraph's store has two abstract methods, ``batch`` and ``abatch``; every
convenience (``get``, ``put``, ``search``, ``delete``, ``list_namespaces`` and
their async twins) is written once on top of them. Here ``batch`` does what
LangGraph's own stores do: the reads of a batch see the store as it was before
the batch, and its puts are applied afterwards, the last put of a
``(namespace, key)`` winning. ``abatch`` runs the same code in a worker thread,
so the event loop never waits on the database or the embedder.

How namespaces map onto Engram's tenants, users and scopes is in
``surfaces.langgraph.namespaces``; how items become records in ``items``; how
writes, deletes and TTLs behave in ``writes``. docs/langgraph.md says it all for
users of the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from engram import limits
from engram.engram import Engram
from engram.errors import ConfigError, InvalidArgument
from engram.surfaces.langgraph.items import check_filter, ttl_minutes
from engram.surfaces.langgraph.namespaces import Identity, InvalidNamespace
from engram.surfaces.langgraph.reads import Found, Reader
from engram.surfaces.langgraph.writes import Pending, WriteOptions, Writer

__all__ = ["EngramStore"]

_TTL_KEYS = frozenset({"refresh_on_read", "default_ttl", "omit_expired"})
_INDEX_KEYS = frozenset({"fields", "dims"})
_MAX_PAGE = 10_000


class EngramStore(BaseStore):
    """A LangGraph store whose items are governed Engram memories.

    ``memory`` is an open ``Engram``; the store acts for ``tenant_id`` and either one
    ``user_id`` or the ``users`` whose id the namespace label at ``user_at`` names,
    through ``agent_id`` and the named scopes given (``project_id``,
    ``repository_id``, ``task_id``, ``session_id``). Items are memories of ``type``
    written with ``authority`` (None: the SDK's default for a conversation) and
    ``consent_basis``. ``index`` takes LangGraph's ``fields`` (which parts of an item
    become its text; Engram embeds with its own embedder). ``ttl`` is LangGraph's
    ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``).
    """

    supports_ttl = True

    def __init__(
        self, memory: Engram, tenant_id: str, *, user_id: str | None = None,
        users: Iterable[str] | None = None, user_at: int = 0, agent_id: str | None = None,
        project_id: str | None = None, repository_id: str | None = None,
        task_id: str | None = None, session_id: str | None = None, type: str = "fact",
        authority: str | None = None, consent_basis: str | None = None,
        index: IndexConfig | None = None, ttl: TTLConfig | None = None,
    ) -> None:  # fmt: skip
        if not isinstance(memory, Engram):
            raise InvalidArgument(f"memory must be an open engram.Engram, got "
                                  f"{_kind(memory)}")  # fmt: skip
        self.identity = Identity.of(
            tenant_id, user_id=user_id, users=users, user_at=user_at, agent_id=agent_id,
            project_id=project_id, repository_id=repository_id, task_id=task_id,
            session_id=session_id,
        )  # fmt: skip
        if not isinstance(type, str):
            raise InvalidArgument("type must be the name of an Engram memory type")
        memory.config.policy(type)  # an unknown type is a ConfigError now, not at a put
        self.memory = memory
        self.ttl_config = _ttl_config(ttl)
        self.index_config = _index_config(index)
        fields = self.index_config.get("fields") if self.index_config else None
        options = WriteOptions(type, authority, consent_basis, tuple(fields) if fields else None)
        self._reader = Reader(memory, self.identity, type)
        self._writer = Writer(memory, self.identity, self._reader, options)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``; results in order (None for each put)."""
        ops = list(ops)
        puts, deletes = self._writes(ops)
        now = self.memory.clock.now()
        results: list[Result] = []
        refresh: list[Found] = []
        for op in ops:
            result, read = self._read(op, now)
            results.append(result)
            refresh += [hit for hit in read if _refreshes(op)]
        self._writer.apply(puts, deletes, refresh, now)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread: the event loop is never blocked."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- helpers -----------------------------------------------------------------

    def _writes(self, ops: list[Op]) -> tuple[list[Pending], list[PutOp]]:
        """Every op checked, and the batch's puts (last one per item) validated, before
        anything is read or written."""
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for index, op in enumerate(ops):
            _check(op, index)
            if isinstance(op, PutOp):
                last.pop((tuple(op.namespace), op.key), None)
                last[(tuple(op.namespace), op.key)] = op
            else:
                self._check_read(op)
        puts = [self._writer.pending(op) for op in last.values() if op.value is not None]
        deletes = [op for op in last.values() if op.value is None]
        for op in deletes:
            self.identity.place(op.namespace)  # a delete for a foreign user is Forbidden
        return puts, deletes

    def _check_read(self, op: Op) -> None:
        if isinstance(op, GetOp):
            self.identity.place(op.namespace)
        elif isinstance(op, SearchOp):
            self.identity.users_for([MatchCondition("prefix", tuple(op.namespace_prefix))])
        elif isinstance(op, ListNamespacesOp):
            self.identity.users_for(tuple(op.match_conditions or ()))

    def _read(self, op: Op, now: datetime) -> tuple[Result, list[Found]]:
        """One read's result and the items it read (for TTL refreshes)."""
        if isinstance(op, GetOp):
            namespace = tuple(op.namespace)
            user = self.identity.place(namespace).user_id
            record = self._reader.live(user, [(namespace, op.key)], now).get((namespace, op.key))
            hit = self._reader.get(namespace, record)
            return (hit.item, [hit]) if hit is not None else (None, [])
        if isinstance(op, SearchOp):
            found = self._reader.search(op, now)
            return [hit.item for hit in found], found
        if isinstance(op, ListNamespacesOp):
            return self._reader.namespaces(op), []
        return None, []


def _kind(value: object) -> str:
    """The class name of ``value`` (``type`` is shadowed by the constructor's argument)."""
    return value.__class__.__name__


def _refreshes(op: Op) -> bool:
    return isinstance(op, (GetOp, SearchOp)) and bool(op.refresh_ttl)


def _check(op: object, index: int) -> None:
    """An op LangGraph's own methods would have let through, with sane bounds."""
    if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
        raise InvalidArgument(f"op {index} is not a LangGraph store operation: "
                              f"{_kind(op)}")  # fmt: skip
    try:
        validate_op_namespace(op)
    except ValueError as exc:
        raise InvalidNamespace(str(exc)) from None
    if isinstance(op, (GetOp, PutOp)):
        if not isinstance(op.key, str):
            raise InvalidArgument(f"op {index}: key must be a string")
        limits.text(op.key, f"op {index}: key", limits.MAX_IDENTIFIER_CHARS * 5)
    if isinstance(op, PutOp):
        if not op.namespace:
            raise InvalidNamespace(f"op {index}: a namespace cannot be empty")
        if op.namespace[0] == "langgraph":
            raise InvalidNamespace(f"op {index}: a namespace's root label cannot be 'langgraph'")
    if isinstance(op, SearchOp):
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidArgument(f"op {index}: query must be a string or None")
        check_filter(op.filter, f"op {index}")
    if isinstance(op, (SearchOp, ListNamespacesOp)):
        _page(op.limit, op.offset, index)
    if isinstance(op, ListNamespacesOp) and op.max_depth is not None:
        if isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int):
            raise InvalidArgument(f"op {index}: max_depth must be a positive integer or None")
        if op.max_depth < 1:
            raise InvalidArgument(f"op {index}: max_depth must be a positive integer or None")


def _page(limit: object, offset: object, index: int) -> None:
    for name, number, low in (("limit", limit, 0), ("offset", offset, 0)):
        if isinstance(number, bool) or not isinstance(number, int):
            raise InvalidArgument(f"op {index}: {name} must be an integer")
        if not low <= number <= (_MAX_PAGE if name == "limit" else limits.MAX_OFFSET):
            raise InvalidArgument(f"op {index}: {name} is out of range: {number}")


def _ttl_config(ttl: object) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, checked: a sweeper is Engram's, not the store's."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigError("ttl must be a LangGraph TTLConfig (a dict)")
    unknown = set(ttl) - _TTL_KEYS
    if unknown:
        raise ConfigError(
            f"ttl has keys EngramStore does not take: {sorted(map(str, unknown))}; expired "
            "items are never returned, and Engram's retention sweep deletes them "
            "(there is no sweep_interval_minutes)"
        )
    ttl_minutes(ttl.get("default_ttl"), "ttl.default_ttl")
    if not isinstance(ttl.get("refresh_on_read", True), bool):
        raise ConfigError("ttl.refresh_on_read must be True or False")
    return TTLConfig(**ttl)  # type: ignore[typeddict-item]


def _index_config(index: object) -> IndexConfig | None:
    """LangGraph's ``IndexConfig``: only ``fields`` is used; Engram embeds itself."""
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise ConfigError("index must be a LangGraph IndexConfig (a dict)")
    unknown = set(index) - _INDEX_KEYS
    if unknown:
        raise ConfigError(
            f"index has keys EngramStore does not take: {sorted(map(str, unknown))}; Engram "
            "embeds every item with the embedder it was opened with (Engram.open(embedder=))"
        )
    fields = index.get("fields")
    if fields is not None and (isinstance(fields, str) or not all(
            isinstance(f, str) for f in fields)):  # fmt: skip
        raise ConfigError("index.fields must be a list of LangGraph paths such as ['text']")
    return IndexConfig(**index)  # type: ignore[typeddict-item]
