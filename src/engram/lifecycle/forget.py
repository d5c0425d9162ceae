"""Hard deletion: one memory with its versions and derived copies, or a whole subject.

Both delete inside one transaction, drop in-memory vector copies, write an audit
entry (ids only), then verify by re-querying that nothing is left.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engram.recall.rerank import forget_cached_texts
from engram.store.audit import AuditEntry
from engram.store.base import Store
from engram.store.predicate import NO_USER, Subject, Tenant, Visibility
from engram.store.rows import to_micros
from engram.types import Record

__all__ = ["ErasureReceipt", "ForgetReceipt", "erase_subject", "forget"]


@dataclass(frozen=True, slots=True)
class ForgetReceipt:
    """What ``forget`` deleted; ``verified`` is True when a re-query found none of it."""

    deleted: tuple[str, ...]
    derived: tuple[str, ...]
    verified: bool


@dataclass(frozen=True, slots=True)
class ErasureReceipt:
    """What ``erase_subject`` deleted; ``verified`` when no row of the subject remains."""

    tenant_id: str
    user_id: str
    records: int
    derived: int
    traces: int
    verified: bool


def _derived_closure(store: Store, tenant: Tenant, ids: list[str]) -> list[str]:
    """Records derived from ``ids``, transitively (summaries of summaries)."""
    found: list[str] = []
    frontier = ids
    seen = set(ids)
    while frontier:
        frontier = [i for i in store.derived_ids(tenant, frontier) if i not in seen]
        seen.update(frontier)
        found.extend(frontier)
    return found


def forget(
    store: Store, vis: Visibility, record: Record, actor: str, now: datetime
) -> ForgetReceipt:
    """Delete ``record``, every version in its chain and every copy derived from them."""
    with store.transaction():  # read what is deleted in the transaction that deletes it
        chain = [r.id for r in store.history(vis, record.id)] or [record.id]
        derived = _derived_closure(store, Tenant(vis.tenant_id), chain)
        store.delete(chain + derived)
        store.append_audit(AuditEntry(to_micros(now) or 0, record.tenant_id,
                                      record.user_id or NO_USER, actor, "DELETE",
                                      chain + derived, "forget"))  # fmt: skip
    store.forget_partition(Subject(record.tenant_id, record.user_id or NO_USER))
    forget_cached_texts()
    verified = not store.fetch(vis, chain) and not store.derived_ids(Tenant(vis.tenant_id), chain)
    return ForgetReceipt(tuple(chain), tuple(derived), verified)


def erase_subject(store: Store, tenant_id: str, user_id: str, now: datetime) -> ErasureReceipt:
    """Delete every record, vector, trace and derived copy of one user of one tenant."""
    subject = Subject(tenant_id, user_id)
    with store.transaction():
        own = store.subject_ids(subject)
        derived = _derived_closure(store, Tenant(tenant_id), own)
        store.delete(own + derived)
        traces = store.delete_traces(subject)
        store.append_audit(AuditEntry(to_micros(now) or 0, tenant_id, user_id, "admin",
                                      "ERASE", [], f"erased {len(own)} records"))  # fmt: skip
    store.forget_partition(subject)
    forget_cached_texts()
    verified = store.subject_residue(subject) == 0 and not store.derived_ids(Tenant(tenant_id), own)
    return ErasureReceipt(tenant_id, user_id, len(own), len(derived), traces, verified)
