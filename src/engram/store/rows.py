"""Translation between ``Record`` values and database rows, for every backend.

Times are stored as integer microseconds since the Unix epoch (UTC): exact,
compact and ordered. "No user" and "any agent" are stored as the empty string
(see ``predicate``) and come back as ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from engram.store.predicate import NO_AGENT, NO_USER, owner_token
from engram.types import Authority, Record, Retention, Sensitivity, Source, SourceKind, Status, Tier

__all__ = ["COLUMNS", "from_micros", "record_from_row", "record_to_row", "to_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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
    return _EPOCH + timedelta(microseconds=value)


def _required_time(value: int) -> datetime:
    result = from_micros(value)
    assert result is not None
    return result


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
        "fts_owner": owner_token(record.tenant_id, user),
    }


def record_from_row(row: Mapping[str, Any]) -> Record:
    """A ``Record`` from a row holding at least ``COLUMNS``."""
    source = Source(
        kind=SourceKind(row["source_kind"]),
        ref=row["source_ref"],
        derived_from=tuple(json.loads(row["derived_from"])),
    )
    return Record(
        id=row["id"],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"] or None,
        agent_id=row["agent_id"] or None,
        scope=row["scope"],
        tier=Tier(row["tier"]),
        type=row["type"],
        key=row["key"],
        value=None if row["value"] is None else json.loads(row["value"]),
        content=row["content"],
        authority=Authority(row["authority"]),
        confidence=row["confidence"],
        source=source,
        observed_at=_required_time(row["observed_at"]),
        valid_from=from_micros(row["valid_from"]),
        valid_to=from_micros(row["valid_to"]),
        created_at=_required_time(row["created_at"]),
        updated_at=_required_time(row["updated_at"]),
        status=Status(row["status"]),
        version=row["version"],
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
        sensitivity=Sensitivity(row["sensitivity"]),
        purpose=row["purpose"],
        consent_basis=row["consent_basis"],
        retention=Retention(row["retention"]),
        expires_at=from_micros(row["expires_at"]),
        importance=row["importance"],
        access_count=row["access_count"],
        last_accessed_at=from_micros(row["last_accessed_at"]),
        private=bool(row["private"]),
        embedding_model=row["embedding_model"],
        content_hash=row["content_hash"],
        contested_with=row["contested_with"],
    )
