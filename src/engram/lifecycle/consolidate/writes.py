"""The writes of one group: its summary and facts through the write path.

``Batch.prepare`` runs the write policy and the embedder over every unit with no
lock held (a model or an endpoint may be slow); ``commit``, inside the group's
transaction, locks every slot the units will read in one sorted pass
(``lock_in_order``) and decides and commits each owner's units
(``WritePath.commit_prepared``): the same steps as ``remember_many``, so a
summary or a fact is judged exactly like a remembered memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from engram.store.contract import Store
from engram.types import WriteResult
from engram.write.commit import Owner
from engram.write.passages import Unit
from engram.write.path import Prepared, WritePath
from engram.write.slots import lock_in_order

__all__ = ["Batch", "commit"]


@dataclass(slots=True)
class _Part:
    owner: Owner
    kinds: list[str] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    prepared: Prepared | None = None


class Batch:
    """Units by owner, each tagged with what it is (``"summary"``, ``"fact"``)."""

    def __init__(self, writer: WritePath) -> None:
        self._writer = writer
        self._parts: dict[Owner, _Part] = {}

    def add(self, kind: str, owner: Owner, unit: Unit) -> None:
        """Queue one unit for ``owner``."""
        part = self._parts.setdefault(owner, _Part(owner))
        part.kinds.append(kind)
        part.units.append(unit)

    def prepare(self) -> None:
        """Policy verdicts, hashes and vectors of every unit (no lock held)."""
        for part in self._parts.values():
            part.prepared = self._writer.prepare_units(part.units)

    def code(self, kind: str) -> str:
        """The policy's reason code for the first unit of ``kind``."""
        for part in self._parts.values():
            if kind in part.kinds and part.prepared is not None:
                index = sum(len(u.parts) for u in part.units[: part.kinds.index(kind)])
                return part.prepared.verdicts[index].code
        return "none"

    def parts(self) -> list[tuple[Owner, list[str], Prepared]]:
        """The prepared parts, in the order they were added."""
        out = []
        for part in self._parts.values():
            assert part.prepared is not None, "prepare() first"
            out.append((part.owner, part.kinds, part.prepared))
        return out


def commit(
    store: Store, writer: WritePath, batch: Batch, now: datetime
) -> dict[str, list[WriteResult]]:
    """Decide and commit every unit in the caller's transaction; results by kind."""
    parts = batch.parts()
    wanted = [
        (owner.slot, proposal.key, digest)
        for owner, _, prepared in parts
        for proposal, digest in zip(prepared.proposals, prepared.hashes, strict=True)
    ]
    lock_in_order(store, wanted)
    results: dict[str, list[WriteResult]] = {}
    for owner, kinds, prepared in parts:
        for kind, result in zip(kinds, writer.commit_prepared(owner, prepared, now), strict=True):
            results.setdefault(kind, []).append(result)
    return results
