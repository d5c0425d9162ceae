"""The audit chain: each entry's hash covers its fields and the previous hash.

Entries carry ids, operation, actor, reason code and time, never memory content,
so the log can outlive an erasure without keeping what was erased.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.store.rows import from_micros, to_micros

__all__ = ["GENESIS", "AuditEntry", "AuditReport", "entry_hash", "verify_chain"]

GENESIS = "0" * 64


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited change, before it is chained (``user_id`` None: a tenant-wide change)."""

    at: datetime
    tenant_id: str
    user_id: str | None
    actor: str
    operation: str
    record_ids: Sequence[str]
    reason: str


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The result of verifying the chain: ``ok`` or the first broken entry."""

    ok: bool
    entries: int
    first_bad_seq: int | None = None
    problem: str | None = None


def entry_hash(prev_hash: str, entry: AuditEntry) -> str:
    """SHA-256 over the previous hash and a canonical JSON of the entry (time as integer
    microseconds, no user as '': the stored form, which the chain has always hashed)."""
    body = json.dumps(
        [to_micros(entry.at), entry.tenant_id, entry.user_id or "", entry.actor, entry.operation,
         list(entry.record_ids), entry.reason],
        separators=(",", ":"),
    )  # fmt: skip
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def _moment(micros: int) -> datetime:
    """A stored audit time (never NULL) as a datetime."""
    moment = from_micros(int(micros))
    assert moment is not None
    return moment


def verify_chain(rows: Iterable[Mapping[str, Any]]) -> AuditReport:
    """Recompute every hash in sequence order and compare with what is stored."""
    prev = GENESIS
    count = 0
    for row in rows:
        count += 1
        entry = AuditEntry(
            at=_moment(row["at"]),
            tenant_id=row["tenant_id"],
            user_id=row["user_id"],
            actor=row["actor"],
            operation=row["operation"],
            record_ids=json.loads(row["record_ids"]),
            reason=row["reason"],
        )
        if row["prev_hash"] != prev:
            return AuditReport(False, count, row["seq"], "prev_hash does not match")
        if entry_hash(prev, entry) != row["hash"]:
            return AuditReport(False, count, row["seq"], "hash does not match its fields")
        prev = row["hash"]
    return AuditReport(True, count)
