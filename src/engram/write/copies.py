"""Share copies follow their original: what retires a memory retires its copies.

A copy another agent received (``lifecycle.share``) says what the original
said when it was shared. When the original stops being current, the copy must
not stay current behind it: a retraction or a new version (a correction, a
supersede through ``remember``) retracts every live copy, an expiry expires
them, transitively (a copy shared on again). Forgetting the original deletes
its copies through the derived closure of ``lifecycle.forget``.

``follow`` runs inside the caller's transaction, after the change to the
original, so both land together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, CopiesOf, Store, UnlinkContests, Update
from engram.store.predicate import Tenant
from engram.types import Operation, Record, Status

__all__ = ["follow", "live_copies"]

_LIVE = (Status.ACTIVE, Status.DISPUTED)


def live_copies(store: Store, tenant_id: str, originals: Sequence[str]) -> list[Record]:
    """The active or disputed share copies of ``originals`` and of those copies."""
    tenant, found, seen = Tenant(tenant_id), [], set(originals)
    frontier = list(originals)
    while frontier:
        fresh = [c for c in store.copies(tenant, CopiesOf(tuple(frontier))) if c.id not in seen]
        seen.update(c.id for c in fresh)
        frontier = [c.id for c in fresh]
        found += [c for c in fresh if c.status in _LIVE]
    return found


def _retired(copy: Record, status: Status, now: datetime) -> Record:
    if status != Status.EXPIRED:
        return copy.replace(status=status, contested_with=None, updated_at=now)
    end = copy.valid_to if copy.valid_to and copy.valid_to < now else now
    if copy.valid_from is not None and end < copy.valid_from:
        end = copy.valid_from
    return copy.replace(status=status, valid_to=end, contested_with=None, updated_at=now)


def follow(
    store: Store, tenant_id: str, originals: Sequence[str], status: Status, code: str,
    actor: str, now: datetime,
) -> list[str]:  # fmt: skip
    """Give every live copy of ``originals`` ``status`` (retracted or expired), end the
    contests they were in, and audit it under ``code``; the ids changed."""
    if not originals:
        return []
    found = live_copies(store, tenant_id, originals)
    if not found:
        return []
    ids = [c.id for c in found]
    operation = Operation.EXPIRE if status == Status.EXPIRED else Operation.RETRACT
    changes: list[Change] = [Update(_retired(c, status, now)) for c in found]
    changes.append(UnlinkContests(Tenant(tenant_id), tuple(ids), now))
    for user in sorted({c.user_id or "" for c in found}):
        named = [c.id for c in found if (c.user_id or "") == user]
        changes.append(Audit(AuditEntry(now, tenant_id, user or None, actor, operation.value,
                                        named, code)))  # fmt: skip
    store.apply(changes)
    return ids
