"""Import, step 1: one exported row validated into what the importer may write.

Every field of a row is checked as ``remember`` checks it (``build_proposal``
and ``engram.limits``), ownership comes from the importing context, never from
the row, and authority is capped by provenance: an import may not claim
``explicit_admin`` (only ``remember_global`` writes it), and a row whose source
kind caps its authority (a document at ``tool_observation``) is lowered to that
cap, so an export made before the cap existed still imports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram import limits
from engram.clock import require_aware
from engram.config import Config
from engram.errors import EngramError, InvalidArgument
from engram.scope import Scope, parse_scope
from engram.types import Authority, Proposal, Record, Sensitivity, Source, Status, parse_enum
from engram.write.commit import Owner
from engram.write.proposal import build_proposal, content_hash
from engram.write.provenance import DEFAULT_AUTHORITY, capped_authority

__all__ = [
    "CURRENT",
    "HISTORY",
    "ImportRow",
    "check_links",
    "history_record",
    "parse_row",
    "remap_source",
]

CURRENT = frozenset({Status.ACTIVE})
HISTORY = frozenset({Status.SUPERSEDED, Status.RETRACTED, Status.EXPIRED, Status.DISPUTED})
_MAX_VERSION = 2**31 - 1
_PROPOSAL_FIELDS = ("type", "key", "value", "confidence", "sensitivity", "purpose",
                    "consent_basis", "retention", "importance", "private")  # fmt: skip
_DEFAULTS: Mapping[str, Any] = {"confidence": 1.0, "sensitivity": "low", "importance": 0.5,
                                "private": False}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ImportRow:
    """One validated row: the proposal the write path sees, plus its place in history."""

    index: int
    original_id: str | None
    status: Status
    scope: str
    bound_to_agent: bool
    proposal: Proposal
    digest: str
    version: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    supersedes: str | None
    superseded_by: str | None
    contested_with: str | None

    def with_sensitivity(self, sensitivity: Sensitivity) -> ImportRow:
        """This row with the sensitivity the write policy raised it to."""
        if sensitivity == self.proposal.sensitivity:
            return self
        proposal = dataclasses.replace(self.proposal, sensitivity=sensitivity)
        return dataclasses.replace(self, proposal=proposal)


def parse_row(config: Config, scope: Scope, index: int, row: object) -> ImportRow:
    """Validate row ``index``; any problem is ``InvalidArgument("import row <index>: ...")``."""
    try:
        return _parse(config, scope, index, row)
    except EngramError as exc:
        raise InvalidArgument(f"import row {index}: {exc}") from None


def _parse(config: Config, scope: Scope, index: int, row: object) -> ImportRow:
    if not isinstance(row, Mapping):
        raise InvalidArgument(f"must be a mapping (as returned by export), got {_kind(row)}")
    if not all(isinstance(name, str) for name in row):
        raise InvalidArgument("field names must be strings")
    proposal = _proposal(config, row)
    created = _time(row, "created_at") or proposal.observed_at
    if created is None:
        raise InvalidArgument("created_at or observed_at is required")
    status = parse_enum(Status, row.get("status", "active"), "status")
    if status not in CURRENT | HISTORY:
        raise InvalidArgument(f"status {status.value} cannot be imported")
    agent = row.get("agent_id")
    return ImportRow(
        index=index, original_id=_link(row, "id"), status=status,
        scope=parse_scope(row.get("scope", "user"), scope),
        bound_to_agent=agent is not None and bool(limits.identifier(agent, "agent_id")),
        proposal=proposal, digest=content_hash(proposal.content),
        version=_count(row.get("version", 1), "version", 1, _MAX_VERSION),
        created_at=created, updated_at=_time(row, "updated_at") or created,
        expires_at=_time(row, "expires_at"), supersedes=_link(row, "supersedes"),
        superseded_by=_link(row, "superseded_by"), contested_with=_link(row, "contested_with"),
    )  # fmt: skip


def _proposal(config: Config, row: Mapping[str, Any]) -> Proposal:
    """The row as ``remember`` would take it, its authority capped by its source kind."""
    if "content" not in row:
        raise InvalidArgument("content is required")
    source = Source.coerce(row.get("source"))
    fields = {name: row.get(name, _DEFAULTS.get(name)) for name in _PROPOSAL_FIELDS}
    return build_proposal(
        config, row["content"], authority=_authority(source, row.get("authority")),
        valid_from=_time(row, "valid_from"), valid_to=_time(row, "valid_to"),
        observed_at=_time(row, "observed_at"), source=source, **fields,
    )  # fmt: skip


def _authority(source: Source, claimed: object) -> Authority:
    if claimed is None:
        return DEFAULT_AUTHORITY[source.kind]
    authority = parse_enum(Authority, claimed, "authority")
    if authority == Authority.EXPLICIT_ADMIN:
        raise InvalidArgument(
            "authority explicit_admin is reserved to remember_global; an import cannot claim it"
        )
    return capped_authority(source.kind, authority)


def check_links(rows: Sequence[ImportRow]) -> None:
    """Refuse an export whose ``supersedes`` links would make a chain that is not a
    simple line: a row superseding itself, two rows superseding the same version
    (a fork) or a loop of rows. The first offending row is named."""
    by_id = {row.original_id: row for row in rows if row.original_id is not None}
    parent_of: dict[str, int] = {}
    for row in rows:
        if row.supersedes is None:
            continue
        if row.supersedes == row.original_id:
            raise InvalidArgument(f"import row {row.index}: it supersedes itself")
        first = parent_of.setdefault(row.supersedes, row.index)
        if first != row.index:
            raise InvalidArgument(f"import row {row.index}: it supersedes the same version as "
                                  f"row {first} (a fork)")  # fmt: skip
    for row in rows:
        _no_loop(row, by_id)


def _no_loop(row: ImportRow, by_id: Mapping[str, ImportRow]) -> None:
    """Follow ``row``'s predecessors within the export; a return to ``row`` is a loop."""
    seen = {row.index}
    link = row.supersedes
    while link is not None and link in by_id:
        step = by_id[link]
        if step.index in seen:
            raise InvalidArgument(f"import row {row.index}: its supersedes links form a loop "
                                  f"through row {step.index}")  # fmt: skip
        seen.add(step.index)
        link = step.supersedes


def _time(row: Mapping[str, Any], name: str) -> datetime | None:
    raw = row.get(name)
    if raw is None:
        return None
    if isinstance(raw, str):
        if len(raw) > 64:
            raise InvalidArgument(f"{name} is not an ISO 8601 time")
        try:
            raw = datetime.fromisoformat(raw)
        except ValueError:
            raise InvalidArgument(f"{name} {limits.shown(raw)} is not an ISO 8601 time") from None
    if not isinstance(raw, datetime):
        raise InvalidArgument(f"{name} must be an ISO 8601 time, got {_kind(raw)}")
    return require_aware(raw, name)


def _link(row: Mapping[str, Any], name: str) -> str | None:
    raw = row.get(name)
    return None if raw is None else limits.identifier(raw, name)


def _count(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer between {low} and {high}")
    return value


def _kind(value: object) -> str:
    return type(value).__name__


def history_record(
    row: ImportRow, record_id: str, owner: Owner, ids: Mapping[str, str], config: Config,
    model: str | None,
) -> Record:  # fmt: skip
    """A history (or disputed) row as the inactive version it was, under ``owner``, with
    links remapped through ``ids`` (a link to a row not imported is dropped). Usage
    counters start at zero: they describe use in this store, not the exporter's."""
    p = row.proposal
    type_policy = config.policy(p.type)

    def link(value: str | None) -> str | None:
        return ids.get(value) if value else None

    return Record(
        id=record_id, tenant_id=owner.tenant_id, user_id=owner.user_id,
        agent_id=owner.agent_id, scope=owner.scope, tier=type_policy.tier, type=p.type,
        key=p.key, value=p.value, content=p.content, authority=p.authority,
        confidence=p.confidence, source=remap_source(p.source, ids),
        observed_at=p.observed_at or row.created_at, valid_from=p.valid_from,
        valid_to=p.valid_to, created_at=row.created_at, updated_at=row.updated_at,
        status=row.status, version=row.version, supersedes=link(row.supersedes),
        superseded_by=link(row.superseded_by), sensitivity=p.sensitivity, purpose=p.purpose,
        consent_basis=p.consent_basis, retention=p.retention or type_policy.retention,
        expires_at=row.expires_at, importance=p.importance, access_count=0,
        last_accessed_at=None, private=p.private, embedding_model=model,
        content_hash=row.digest, contested_with=link(row.contested_with),
    )  # fmt: skip


def remap_source(source: Source, ids: Mapping[str, str]) -> Source:
    """``source`` with every imported id in ``derived_from`` replaced by its new id."""
    return Source(source.kind, source.ref, tuple(ids.get(i, i) for i in source.derived_from))
