"""Reading a write slot: lock it, then read the versions a write there meets.

Every write that decides on what a slot holds (a keyed version to supersede, a
duplicate to confirm) locks the slot for that key or content first
(``Store.lock_slot``), inside its transaction, so two concurrent writers of the
same key never both see "no active version" on a backend whose writers run
concurrently. SQLite's lock is a no-op (``BEGIN IMMEDIATE`` serialises writers).
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.errors import EngramError
from engram.store.contract import SlotProbe, Store
from engram.store.predicate import OwnerSlot
from engram.types import Record

__all__ = ["lock_in_order", "slot_versions"]


def slot_versions(store: Store, probes: Sequence[SlotProbe]) -> list[list[Record]]:
    """The records of each slot probe, each slot locked first for its key (or its
    content hash) until the transaction ends; a failed probe raises its error."""
    for probe in probes:
        store.lock_slot(probe.slot, _lock_key(probe))
    out = []
    for answer in store.candidates(probes[0].slot.visibility, probes):
        if isinstance(answer, EngramError):
            raise answer
        out.append([record for record, _ in answer])
    return out


def _lock_key(probe: SlotProbe) -> str:
    """What a slot lock names: the key, or the content hash (a distinct namespace)."""
    return f"key:{probe.key}" if probe.key is not None else f"hash:{probe.content_hash}"


def lock_in_order(store: Store, wanted: Sequence[tuple[OwnerSlot, str | None, str]]) -> None:
    """Lock every (slot, key, content hash) a transaction of several writes will
    read, in one sorted pass before the first read.

    Two concurrent batches that name the same keys in different orders would
    otherwise each hold one lock and wait for the other's (PostgreSQL aborts one
    as a deadlock). Sorted, every writer takes them in the same order; the locks
    ``slot_versions`` takes later are then already held.
    """
    names: set[tuple[str, str, str, int, str, str]] = set()
    for slot, key, digest in wanted:
        owner = (slot.tenant_id, slot.user_id, slot.scope)
        if key is not None:
            names.add((*owner, 0, f"key:{key}", slot.agent_id))
        names.add((*owner, 1, f"hash:{digest}", slot.agent_id))
    slots = {(s.tenant_id, s.user_id, s.scope, s.agent_id): s for s, _, _ in wanted}
    # Key locks before hash locks, as ``slot_versions`` takes them for one write; the
    # agent last, because a backend may lock per (tenant, user, scope, name).
    for tenant, user, scope, _, name, agent in sorted(names):
        store.lock_slot(slots[(tenant, user, scope, agent)], name)
