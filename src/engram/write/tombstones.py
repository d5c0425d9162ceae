"""Who a tombstone stops and who lifts it: the write side of ``store.tombstones``.

A write meets the tombstones of its owner (the user, or ``NO_USER`` for a
tenant-wide record), an erased subject's of the same user id included. Then:

* a STATED write (``remember``, ``remember_many``, ``remember_global``,
  ``correct``: the caller's own words, ``Owner.stated``) with explicit authority
  (``explicit_user`` / ``explicit_admin``) is the user saying it again: it is
  written as usual and the tombstone is lifted (audited as ``LIFT``);
* every other write (``observe``'s proposer, import, consolidation, sharing, or
  a stated write with a lower authority such as a tool observation) is REJECTed
  with the reason code ``tombstoned`` (audited, ids only), so a replayed
  conversation or a re-run pipeline cannot bring an erased memory back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engram.store.audit import AuditEntry
from engram.store.contract import Audit, DropTombstones, Store
from engram.store.predicate import NO_USER, Tenant
from engram.types import Authority, Operation, Proposal
from engram.write.commit import Owner
from engram.write.decide import Decision

__all__ = ["CODE", "REASON", "buried", "lift", "lifts", "owner_of", "refusal"]

CODE = "tombstoned"
REASON = (
    "this content was forgotten or erased; only the user stating it again "
    "explicitly (remember with explicit authority) brings it back"
)
_EXPLICIT = (Authority.EXPLICIT_USER, Authority.EXPLICIT_ADMIN)


def owner_of(user_id: str | None) -> str:
    """The tombstone owner of a write of ``user_id`` (``NO_USER``: tenant-wide)."""
    return user_id or NO_USER


def buried(store: Store, owner: Owner, hashes: Sequence[str]) -> set[str]:
    """Which content ``hashes`` a write by ``owner`` meets a tombstone for."""
    if not hashes:
        return set()
    return store.tombstoned(Tenant(owner.tenant_id), owner_of(owner.user_id),
                            list(dict.fromkeys(hashes)))  # fmt: skip


def lifts(owner: Owner, proposal: Proposal) -> bool:
    """Whether this write is the user stating the content again (see the module)."""
    return owner.stated and proposal.authority in _EXPLICIT


def refusal() -> Decision:
    """The decision for a write a tombstone stops."""
    return Decision(Operation.REJECT, CODE, REASON)


def lift(store: Store, owner: Owner, hashes: Sequence[str], ids: Sequence[str],
         now: datetime) -> None:  # fmt: skip
    """Lift the tombstones of ``hashes`` met by ``owner`` (inside the write's
    transaction), with an audit entry naming the records written (``ids``)."""
    entry = AuditEntry(now, owner.tenant_id, owner.user_id, owner.actor, "LIFT", list(ids),
                       "tombstone_lifted")  # fmt: skip
    lifted = DropTombstones(Tenant(owner.tenant_id), owner_of(owner.user_id), tuple(hashes))
    store.apply([lifted, Audit(entry)])
