"""Value types shared by every layer: the memory record, its enums, write results.

All are frozen so that a record handed to a caller can never be mutated behind
the store's back; changes go through the write path and produce new values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

__all__ = [
    "Authority",
    "Operation",
    "Proposal",
    "Record",
    "Retention",
    "Sensitivity",
    "ShareGrant",
    "Source",
    "SourceKind",
    "Status",
    "Tier",
    "Turn",
    "WriteResult",
    "as_seen",
    "parse_enum",
]


class Tier(StrEnum):
    """How long-lived and how structured a memory is."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class Authority(StrEnum):
    """Who stands behind a memory; decides conflicts before recency does."""

    EXPLICIT_USER = "explicit_user"
    EXPLICIT_ADMIN = "explicit_admin"
    CONFIRMED_SYSTEM = "confirmed_system"
    TOOL_OBSERVATION = "tool_observation"
    MODEL_INFERENCE = "model_inference"
    DERIVED_SUMMARY = "derived_summary"
    SHARED = "shared"


class Status(StrEnum):
    """Lifecycle state of one version of a memory."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    RETRACTED = "retracted"
    EXPIRED = "expired"
    DISPUTED = "disputed"
    DELETED = "deleted"


class Retention(StrEnum):
    """How long a memory may be kept; each maps to a duration in configuration."""

    TRANSIENT = "transient"
    SESSION = "session"
    SHORT_TERM = "short_term"
    MEDIUM_TERM = "medium_term"
    LONG_TERM = "long_term"
    PERMANENT = "permanent"


class Sensitivity(StrEnum):
    """How harmful disclosure would be; sensitive data needs a consent basis."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class SourceKind(StrEnum):
    """Where a memory came from; untrusted kinds cannot carry instructions."""

    CONVERSATION = "conversation"
    TOOL = "tool"
    DOCUMENT = "document"
    IMPORT = "import"
    CONSOLIDATION = "consolidation"
    SHARE = "share"


class Operation(StrEnum):
    """What the write path decided to do with a proposed memory."""

    ADD = "ADD"
    CONFIRM = "CONFIRM"
    SUPERSEDE = "SUPERSEDE"
    RETRACT = "RETRACT"
    EXPIRE = "EXPIRE"
    DELETE = "DELETE"
    REJECT = "REJECT"
    DISPUTE = "DISPUTE"
    CONTEST = "CONTEST"


E = TypeVar("E", bound=StrEnum)


def parse_enum(enum: type[E], value: object, field_name: str) -> E:
    """Accept an enum member or its string value; raise a clear error otherwise."""
    from engram.errors import InvalidArgument
    from engram.limits import shown

    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        try:
            return enum(value)
        except ValueError:
            pass
    allowed = ", ".join(member.value for member in enum)
    raise InvalidArgument(f"{field_name} must be one of: {allowed}; got {shown(value)}")


@dataclass(frozen=True, slots=True)
class Source:
    """Provenance: what kind of source, which passage of it, and what it was derived from."""

    kind: SourceKind = SourceKind.CONVERSATION
    ref: str | None = None
    derived_from: tuple[str, ...] = ()

    @classmethod
    def coerce(cls, value: Source | Mapping[str, Any] | None) -> Source:
        """Build a checked Source from a mapping such as ``{"kind": "tool", "ref": "D1:3"}``."""
        from engram.errors import InvalidArgument

        if value is None:
            return cls()
        if isinstance(value, Source):
            return _checked_source(value.kind, value.ref, value.derived_from)
        if not isinstance(value, Mapping):
            raise InvalidArgument("source must be a mapping with kind, ref, derived_from")
        unknown = set(value) - {"kind", "ref", "derived_from"}
        if unknown:
            raise InvalidArgument(f"source has unknown fields: {sorted(map(repr, unknown))}")
        derived = value.get("derived_from")
        return _checked_source(value.get("kind", "conversation"), value.get("ref"),
                               () if derived is None else derived)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping for JSON export."""
        return {"kind": self.kind.value, "ref": self.ref, "derived_from": list(self.derived_from)}


def _checked_source(kind: object, ref: object, derived: object) -> Source:
    """A Source whose fields are within ``engram.limits``: a known kind, a printable ref of
    at most 1,000 characters ("" counts as none), at most 256 valid record ids."""
    from engram import limits
    from engram.errors import InvalidArgument

    if ref is not None and not isinstance(ref, str):
        raise InvalidArgument("source.ref must be a string")
    text = limits.label(ref, "source.ref", limits.MAX_SOURCE_REF_CHARS) if ref else None
    ids = limits.identifiers(derived, "source.derived_from", limits.MAX_DERIVED_FROM)
    return Source(parse_enum(SourceKind, kind, "source.kind"), text, ids)


@dataclass(frozen=True, slots=True)
class Record:
    """One version of one memory, exactly as stored (docs/contract.md section 2)."""

    id: str
    tenant_id: str
    user_id: str | None
    agent_id: str | None
    scope: str
    tier: Tier
    type: str
    key: str | None
    value: Any
    content: str
    authority: Authority
    confidence: float
    source: Source
    observed_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None
    created_at: datetime
    updated_at: datetime
    status: Status
    version: int
    supersedes: str | None
    superseded_by: str | None
    sensitivity: Sensitivity
    purpose: str | None
    consent_basis: str | None
    retention: Retention
    expires_at: datetime | None
    importance: float
    access_count: int
    last_accessed_at: datetime | None
    private: bool
    embedding_model: str | None
    content_hash: str
    contested_with: str | None = None

    def replace(self, **changes: Any) -> Record:
        """A copy with some fields changed (records are immutable)."""
        return dataclasses.replace(self, **changes)

    def is_valid_at(self, when: datetime) -> bool:
        """True when ``valid_from <= when < valid_to``; unknown bounds are open."""
        if self.valid_from is not None and when < self.valid_from:
            return False
        return self.valid_to is None or when < self.valid_to

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly mapping; datetimes as ISO 8601 strings. (Every REST
        answer converts its records here: the field names are listed once, and plain
        values skip the type tests.)"""
        out: dict[str, Any] = {}
        for name in _RECORD_FIELDS:
            raw = getattr(self, name)
            if raw is None or type(raw) in _PLAIN:
                out[name] = raw
            elif isinstance(raw, datetime):
                out[name] = raw.isoformat()
            elif isinstance(raw, Source):
                out[name] = raw.to_dict()
            elif isinstance(raw, StrEnum):
                out[name] = raw.value
            else:
                out[name] = raw
        return out


_RECORD_FIELDS = tuple(item.name for item in dataclasses.fields(Record))
_PLAIN = frozenset({str, int, float, bool})


@dataclass(frozen=True, slots=True)
class ShareGrant:
    """An administrator's permission, inside one tenant: agent ``from_agent`` may share
    its memories of type ``type`` with agent ``to_agent`` (``Engram.grant_share``).

    Grants are tenant data: no grant names another tenant's agent, so no share can
    cross tenants."""

    tenant_id: str
    from_agent: str
    to_agent: str
    type: str
    granted_at: datetime


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What ``remember`` and the correction calls decided, and why.

    ``passages`` is empty for one memory; for long content stored as passages it
    holds every passage's id in order (the first is ``record``, whose operation and
    reason stand for the group)."""

    operation: Operation
    record: Record | None
    reason: str
    superseded: list[str] = field(default_factory=list)
    related: list[str] = field(default_factory=list)
    passages: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Turn:
    """One conversation turn handed to a proposer."""

    role: str
    text: str
    time: datetime | None = None
    ref: str | None = None


@dataclass(frozen=True, slots=True)
class Proposal:
    """A candidate memory before policy and decision: what a proposer or caller offers.

    Fields mirror ``remember``'s keyword arguments after validation; the write path
    turns an accepted proposal into a ``Record``.
    """

    content: str
    type: str
    scope: str = "user"
    key: str | None = None
    value: Any = None
    authority: Authority = Authority.EXPLICIT_USER
    confidence: float = 1.0
    observed_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    source: Source = field(default_factory=Source)
    sensitivity: Sensitivity = Sensitivity.LOW
    purpose: str | None = None
    consent_basis: str | None = None
    retention: Retention | None = None
    importance: float = 0.5
    private: bool = False
    agent_scope: str | None = None  # "user", "agent", or None for the default rule


def as_seen(record: Record, now: datetime) -> Record:
    """``record`` as callers see it at ``now``: an active or disputed memory past its
    retention (``expires_at``) is ``expired``. Storage keeps the stored status until
    the lifecycle sweep removes the record; every read path reports this one."""
    due = record.expires_at is not None and record.expires_at <= now
    if due and record.status in (Status.ACTIVE, Status.DISPUTED):
        return record.replace(status=Status.EXPIRED)
    return record
