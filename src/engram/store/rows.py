"""Translation between ``Record`` values and database rows, for every backend.

Times are stored as integer microseconds since the Unix epoch (UTC): exact,
compact and ordered. "No user" and "any agent" are stored as the empty string
(see ``predicate``) and come back as ``None``. ``fts_owner`` is a leftover column
of the removed FTS5 index, always written as ''.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from engram.store.predicate import NO_AGENT, NO_USER
from engram.types import Authority, Record, Retention, Sensitivity, Source, SourceKind, Status, Tier

__all__ = [
    "COLUMNS", "from_micros", "record_from_values", "record_to_row", "to_micros",
]  # fmt: skip

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# ``_EPOCH + _MICROSECOND * us`` is exact integer arithmetic, like ``timedelta(0, 0, us)``,
# and half its cost (0.5 us against 0.9: the read path converts several per record).
_MICROSECOND = timedelta(microseconds=1)

COLUMNS: tuple[str, ...] = (
    "id", "tenant_id", "user_id", "agent_id", "scope", "tier", "type", "key", "value",
    "content", "content_hash", "authority", "confidence", "source_kind", "source_ref",
    "derived_from", "observed_at", "valid_from", "valid_to", "created_at", "updated_at",
    "status", "version", "supersedes", "superseded_by", "contested_with", "sensitivity",
    "purpose", "consent_basis", "retention", "expires_at", "importance", "access_count",
    "last_accessed_at", "private", "embedding_model", "fts_owner",
)  # fmt: skip


def to_micros(value: datetime | None) -> int | None:
    """Aware datetime -> integer microseconds since the epoch."""
    if value is None:
        return None
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int | None) -> datetime | None:
    """Integer microseconds since the epoch -> aware UTC datetime."""
    if value is None:
        return None
    return _EPOCH + _MICROSECOND * value


def record_to_row(record: Record) -> dict[str, Any]:
    """Every column of ``records`` for one record."""
    user = record.user_id or NO_USER
    return {
        "id": record.id,
        "tenant_id": record.tenant_id,
        "user_id": user,
        "agent_id": record.agent_id or NO_AGENT,
        "scope": record.scope,
        "tier": record.tier.value,
        "type": record.type,
        "key": record.key,
        "value": None if record.value is None else json.dumps(record.value, sort_keys=True),
        "content": record.content,
        "content_hash": record.content_hash,
        "authority": record.authority.value,
        "confidence": record.confidence,
        "source_kind": record.source.kind.value,
        "source_ref": record.source.ref,
        "derived_from": json.dumps(list(record.source.derived_from)),
        "observed_at": to_micros(record.observed_at),
        "valid_from": to_micros(record.valid_from),
        "valid_to": to_micros(record.valid_to),
        "created_at": to_micros(record.created_at),
        "updated_at": to_micros(record.updated_at),
        "status": record.status.value,
        "version": record.version,
        "supersedes": record.supersedes,
        "superseded_by": record.superseded_by,
        "contested_with": record.contested_with,
        "sensitivity": record.sensitivity.value,
        "purpose": record.purpose,
        "consent_basis": record.consent_basis,
        "retention": record.retention.value,
        "expires_at": to_micros(record.expires_at),
        "importance": record.importance,
        "access_count": record.access_count,
        "last_accessed_at": to_micros(record.last_accessed_at),
        "private": int(record.private),
        "embedding_model": record.embedding_model,
        "fts_owner": "",  # the column of the removed FTS5 index (schema 0011)
    }


def _lookup(enum: type[Any]) -> dict[str, Any]:
    return {member.value: member for member in enum}


_TIERS, _AUTHORITIES, _STATUSES = _lookup(Tier), _lookup(Authority), _lookup(Status)
_SENSITIVITIES, _RETENTIONS, _KINDS = _lookup(Sensitivity), _lookup(Retention), _lookup(SourceKind)
_PLAIN_SOURCES = {value: Source(kind) for value, kind in _KINDS.items()}  # no ref, derived


def _slot_builder(cls: type[Any]) -> Callable[..., Any]:
    """A constructor of the frozen, slotted dataclass ``cls`` taking every field by
    keyword (all of them: no defaults), that sets the slots directly.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    (about 0.3 us a field: 11 us of the 36 of a ``Record``), and the read path
    builds hundreds of records per recall. The generated function fills a draft:
    an instance of a plain class with the very same slots, whose attribute stores
    are the interpreter's fastest (a member descriptor's ``__set__`` called per
    field cost 3.6 us of a record's 4.7), and then gives it ``cls`` as its class,
    which Python allows between classes of one layout. So the record holds the
    same values in the same slots as ``__init__`` would put there
    (``tests/core/test_rows_decode`` compares every field, with its type), without
    defaults or checks: the caller passes them all.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    if tuple(getattr(cls, "__slots__", ())) != tuple(names):
        raise TypeError(f"{cls.__name__} must be a slotted dataclass with no other slots")
    draft = type(f"_{cls.__name__}Draft", (), {"__slots__": tuple(names)})
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls, "draft": draft}
    body = "".join(f"    obj.{name} = {name}\n" for name in names)
    code = (
        f"def build(*, {', '.join(names)}):\n    obj = new(draft)\n{body}"
        "    obj.__class__ = cls\n    return obj\n"
    )
    exec(code, scope)  # generated from the dataclass's own field names
    built: Callable[..., Any] = scope["build"]
    return built


_new_record: Callable[..., Record] = _slot_builder(Record)


def _source(kind: str, ref: str | None, derived: str) -> Source:
    if ref is None and derived == "[]":
        return _PLAIN_SOURCES[kind]  # immutable, so one per kind is shared
    return Source(_KINDS[kind], ref, () if derived == "[]" else tuple(json.loads(derived)))


def record_from_values(v: Sequence[Any]) -> Record:
    """A ``Record`` from a row whose first values are ``COLUMNS``, in that order.

    The read path decodes thousands of rows per second, so this indexes by
    position, maps enum values through dictionaries and builds the record with
    ``_slot_builder``'s constructor.
    """
    created = _EPOCH + _MICROSECOND * v[19]
    return _new_record(
        id=v[0], tenant_id=v[1], user_id=v[2] or None, agent_id=v[3] or None, scope=v[4],
        tier=_TIERS[v[5]], type=v[6], key=v[7],
        value=None if v[8] is None else json.loads(v[8]),
        content=v[9], content_hash=v[10], authority=_AUTHORITIES[v[11]], confidence=v[12],
        source=_source(v[13], v[14], v[15]),
        observed_at=_EPOCH + _MICROSECOND * v[16],
        valid_from=None if v[17] is None else _EPOCH + _MICROSECOND * v[17],
        valid_to=None if v[18] is None else _EPOCH + _MICROSECOND * v[18],
        created_at=created,  # a record never updated shares its creation time (immutable)
        updated_at=created if v[20] == v[19] else _EPOCH + _MICROSECOND * v[20],
        status=_STATUSES[v[21]], version=v[22], supersedes=v[23], superseded_by=v[24],
        contested_with=v[25], sensitivity=_SENSITIVITIES[v[26]], purpose=v[27],
        consent_basis=v[28], retention=_RETENTIONS[v[29]],
        expires_at=None if v[30] is None else _EPOCH + _MICROSECOND * v[30],
        importance=v[31], access_count=v[32],
        last_accessed_at=None if v[33] is None else _EPOCH + _MICROSECOND * v[33],
        private=bool(v[34]), embedding_model=v[35],
    )  # fmt: skip


def due_cursor(after: Record | None) -> tuple[int, str]:
    """Where a page of due records (``Maintenance.due``) resumes: after ``after``'s
    (expires_at, id), in stored form; from the start for None."""
    if after is None or after.expires_at is None:
        return (-(2**62), "")
    return (to_micros(after.expires_at) or 0, after.id)
