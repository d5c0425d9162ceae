"""Export and import of a caller's memories with their full history.

Export yields plain JSON-friendly rows (every status, version links intact).
Import re-homes rows under the importing context: tenant, user and agent come
from the context, never from the rows, so a payload cannot widen ownership.
Ids are re-issued and every link (supersedes, superseded_by, contested_with,
derived_from) is remapped. Rows are validated first; a malformed row aborts the
whole import with an error naming it, and nothing is written. Content that the
write policy now rejects (e.g. a secret) is skipped and reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.config import Config
from engram.embed import Embedder
from engram.errors import EngramError, InvalidArgument
from engram.ids import new_id
from engram.scope import GLOBAL, Scope, parse_scope
from engram.store.audit import AuditEntry
from engram.store.base import Store
from engram.store.rows import to_micros
from engram.types import Record, Source, Status, parse_enum
from engram.write import policy
from engram.write.index import embed_contents, vectors_enabled
from engram.write.policy import VerdictKind
from engram.write.proposal import build_proposal, content_hash

__all__ = ["ImportReport", "export_rows", "import_rows"]


@dataclass(frozen=True, slots=True)
class ImportReport:
    """How many rows were imported, and which were skipped with why."""

    imported: int
    skipped: tuple[tuple[int, str], ...]
    id_map: Mapping[str, str]


def export_rows(records: Iterable[Record]) -> list[dict[str, Any]]:
    """JSON-friendly rows of every given record."""
    return [record.to_dict() for record in records]


def _time(row: Mapping[str, Any], name: str) -> datetime | None:
    raw = row.get(name)
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        raise InvalidArgument(f"{name} {raw!r} is not an ISO 8601 time") from None


def _parse(config: Config, scope: Scope, index: int, row: Mapping[str, Any]) -> Record:
    try:
        return _record(config, scope, row)
    except (EngramError, KeyError, TypeError) as exc:
        raise InvalidArgument(f"import row {index}: {exc}") from None


def _record(config: Config, scope: Scope, row: Mapping[str, Any]) -> Record:
    target = parse_scope(row.get("scope", "user"), scope)
    p = build_proposal(
        config, row["content"], type=row.get("type"), key=row.get("key"),
        value=row.get("value"), authority=row.get("authority", "explicit_user"),
        confidence=row.get("confidence", 1.0), valid_from=_time(row, "valid_from"),
        valid_to=_time(row, "valid_to"), observed_at=_time(row, "observed_at"),
        source=row.get("source"), sensitivity=row.get("sensitivity", "low"),
        purpose=row.get("purpose"), consent_basis=row.get("consent_basis"),
        retention=row.get("retention"), importance=row.get("importance", 0.5),
        private=bool(row.get("private", False)),
    )  # fmt: skip
    created = _time(row, "created_at") or p.observed_at
    if created is None:
        raise InvalidArgument("created_at or observed_at is required")
    policy_ = config.policy(p.type)
    return Record(
        id=str(row.get("id") or new_id()), tenant_id=scope.tenant_id, user_id=scope.user_id,
        agent_id=scope.agent_id if row.get("agent_id") else None, scope=target,
        tier=policy_.tier, type=p.type, key=p.key, value=p.value, content=p.content,
        authority=p.authority, confidence=p.confidence, source=p.source,
        observed_at=p.observed_at or created, valid_from=p.valid_from, valid_to=p.valid_to,
        created_at=created, updated_at=_time(row, "updated_at") or created,
        status=parse_enum(Status, row.get("status", "active"), "status"),
        version=int(row.get("version", 1)), supersedes=row.get("supersedes"),
        superseded_by=row.get("superseded_by"), sensitivity=p.sensitivity,
        purpose=p.purpose, consent_basis=p.consent_basis,
        retention=p.retention or policy_.retention, expires_at=_time(row, "expires_at"),
        importance=p.importance, access_count=int(row.get("access_count", 0)),
        last_accessed_at=_time(row, "last_accessed_at"), private=p.private,
        embedding_model=None, content_hash=content_hash(p.content),
        contested_with=row.get("contested_with"),
    )  # fmt: skip


def _remap(record: Record, ids: Mapping[str, str], model: str | None) -> Record:
    def link(value: str | None) -> str | None:
        return ids.get(value) if value else None

    source = Source(record.source.kind, record.source.ref,
                    tuple(ids.get(i, i) for i in record.source.derived_from))  # fmt: skip
    return record.replace(id=ids[record.id], supersedes=link(record.supersedes),
                          superseded_by=link(record.superseded_by),
                          contested_with=link(record.contested_with), source=source,
                          embedding_model=model)  # fmt: skip


def import_rows(
    store: Store, embedder: Embedder, config: Config, scope: Scope,
    rows: Sequence[Mapping[str, Any]], now: datetime,
) -> ImportReport:  # fmt: skip
    """Validate every row, then insert the accepted ones in one transaction."""
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise InvalidArgument("rows must be a list of mappings (as returned by export)")
    skipped: list[tuple[int, str]] = []
    parsed: list[tuple[int, Record]] = []
    for index, row in enumerate(rows):
        if isinstance(row, Mapping) and row.get("scope") == GLOBAL:
            skipped.append((index, "global records belong to the tenant; an admin imports them"))
        else:
            parsed.append((index, _parse(config, scope, index, row)))
    keep = []
    for index, record in parsed:
        proposal = build_proposal(config, record.content, type=record.type,
                                  sensitivity=record.sensitivity, source=record.source,
                                  consent_basis=record.consent_basis)  # fmt: skip
        verdict = policy.evaluate(proposal, config.write)
        if verdict.kind == VerdictKind.REJECT:
            skipped.append((index, verdict.reason))
        else:
            keep.append(record.replace(sensitivity=verdict.sensitivity))
    ids = {record.id: new_id() for record in keep}
    use_vectors = vectors_enabled(store, embedder)
    model = embedder.model_id if use_vectors else None
    matrix = embed_contents(embedder, [r.content for r in keep]) if use_vectors else None
    with store.transaction():
        for i, record in enumerate(keep):
            store.insert(_remap(record, ids, model), None if matrix is None else matrix[i])
        store.append_audit(AuditEntry(to_micros(now) or 0, scope.tenant_id, scope.user_id,
                                      scope.agent_id or scope.user_id, "IMPORT",
                                      list(ids.values()), "import"))  # fmt: skip
    return ImportReport(len(keep), tuple(sorted(skipped)), ids)
