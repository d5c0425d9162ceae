"""What consolidation derived from a memory follows it when it stops being true.

A summary says what its episodes said, and a fact extracted from an episode says
what the episode said. When the episode is retracted (it never happened) or
expires, neither may stay current behind it: every live summary derived from it
(authority ``derived_summary``) is retracted, and so is every live extracted
fact (source kind ``consolidation``) that no user or admin stated themselves.
The retracted summaries' episodes lose their consolidation marks
(``Reconsolidate``), so the next run summarises the group's surviving episodes
again, without the retracted one. The share copies of what is retracted follow
(``write.copies``).

``follow_derived`` runs inside the caller's transaction, after the change to the
source, so everything lands together or not at all. It reads the derived
records under the caller's visibility: what the caller cannot see is left alone.
"""

from __future__ import annotations

from datetime import datetime

from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, Reconsolidate, UnlinkContests, Update
from engram.store.open import Backend
from engram.store.predicate import Tenant, Visibility
from engram.types import Authority, Operation, Record, SourceKind, Status
from engram.write import copies

__all__ = ["follow_derived"]

_LIVE = (Status.ACTIVE, Status.DISPUTED)
_STATED = (Authority.EXPLICIT_USER, Authority.EXPLICIT_ADMIN)


def _follows(record: Record) -> bool:
    """A live consolidation product: a summary, or an extracted fact no one stated."""
    if record.status not in _LIVE or record.source.kind != SourceKind.CONSOLIDATION:
        return False
    return record.authority not in _STATED  # a summary's is ``derived_summary``


def follow_derived(
    store: Backend, vis: Visibility, source: Record, code: str, actor: str, now: datetime
) -> list[str]:
    """Retract what consolidation derived from ``source`` (see the module), release the
    summaries' episodes to the next run, audit it under ``code``; the ids retracted."""
    tenant = Tenant(source.tenant_id)
    found = [r for r in store.read(vis, store.derived_ids(tenant, [source.id])) if _follows(r)]
    if not found:
        return []
    ids = [r.id for r in found]
    summaries = [r for r in found if r.authority == Authority.DERIVED_SUMMARY]
    changes: list[Change] = [
        Reconsolidate(tenant, tuple(r.id for r in summaries if r.type == kind), kind)
        for kind in sorted({r.type for r in summaries})
    ]
    changes += [Update(r.replace(status=Status.RETRACTED, contested_with=None, updated_at=now))
                for r in found]  # fmt: skip
    changes.append(UnlinkContests(tenant, tuple(ids), now))
    changes.append(Audit(AuditEntry(now, source.tenant_id, source.user_id, actor,
                                    Operation.RETRACT.value, [source.id, *ids], code)))  # fmt: skip
    store.apply(changes)
    copies.follow(store, source.tenant_id, ids, Status.RETRACTED, code, actor, now)
    return ids
