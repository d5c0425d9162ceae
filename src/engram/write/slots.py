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
from engram.types import Record

__all__ = ["slot_versions"]


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
