"""Administrative reads over a tenant: its users, and one user's audit log.

The audit log stores storage encodings (integer microseconds, a JSON array of
ids); this module turns them into plain values for surfaces such as the
dashboard. Entries carry ids, operations and reason codes, never content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engram.errors import InvalidArgument
from engram.scope import Context, resolve
from engram.store.contract import Maintenance
from engram.store.predicate import Subject, Tenant

__all__ = ["AuditLogEntry", "audit_log", "user_ids"]

MAX_USERS = 10_000


@dataclass(frozen=True, slots=True)
class AuditLogEntry:
    """One audit entry as a surface shows it (``user`` is the audit pseudonym)."""

    seq: int
    at: datetime
    actor: str
    operation: str
    record_ids: tuple[str, ...]
    reason: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``at`` as ISO 8601)."""
        return {"seq": self.seq, "at": self.at.isoformat(), "actor": self.actor,
                "operation": self.operation, "record_ids": list(self.record_ids),
                "reason": self.reason, "hash": self.hash}  # fmt: skip


def user_ids(store: Maintenance, tenant_id: str, limit: int = 1000) -> list[str]:
    """The tenant's users that own at least one record, in id order."""
    tenant = resolve(Context(tenant_id=tenant_id, user_id="admin")).tenant_id
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_USERS:
        raise InvalidArgument(f"limit must be an integer between 1 and {MAX_USERS}")
    return store.subject_users(Tenant(tenant))[:limit]


def audit_log(store: Maintenance, tenant_id: str, user_id: str) -> list[AuditLogEntry]:
    """One user's audit entries, oldest first (empty after their erasure: the
    entries remain in the chain but can no longer be linked to them)."""
    scope = resolve(Context(tenant_id=tenant_id, user_id=user_id))
    subject = Subject(scope.tenant_id, scope.user_id)
    return [_entry(row) for row in store.audit_entries(subject)]


def _entry(row: dict[str, Any]) -> AuditLogEntry:
    ids = row["record_ids"]
    parsed = json.loads(ids) if isinstance(ids, str) else list(ids or [])
    at = row["at"]
    moment = at if isinstance(at, datetime) else datetime.fromtimestamp(int(at) / 1e6, UTC)
    return AuditLogEntry(int(row["seq"]), moment, str(row["actor"]), str(row["operation"]),
                         tuple(str(i) for i in parsed), str(row["reason"] or ""),
                         str(row["hash"]))  # fmt: skip
