"""Many slot probes in few statements: the reads of a batch of writes.

A batch of writes (``write.bulk``: the copies of a share) asks ``candidates``,
inside its transaction, for the slot probes of every proposal at once (a key
probe and a content probe each). Sent one by one they cost a statement each; here
a run of consecutive slot probes is answered by one statement per (slot,
statuses), with the slot's predicate (``OwnerSlot.key_sql``) inside it and the
keys and contents bound as arrays. Each probe then gets what ``sql.slot_by_key``
or ``sql.slot_by_hash`` alone returns: the versions of its key newest first
(then by id), the records of its content by id.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.store.contract import Hits, Probe, SlotProbe
from engram.store.dialect import POSTGRES
from engram.store.postgres.session import Conn, on
from engram.store.postgres.sql import SELECT, Query
from engram.store.predicate import OwnerSlot, Visibility
from engram.store.rows import record_from_values
from engram.types import Record

__all__ = ["answer", "batch_query", "steps"]


def _batchable(vis: Visibility, probe: SlotProbe) -> bool:
    """A slot probe the store would answer (its caller's tenant and user, exactly one
    of key and content); any other is sent alone, and fails alone."""
    same = (probe.slot.tenant_id, probe.slot.user_id) == (vis.tenant_id, vis.user_id)
    return same and (probe.key is None) != (probe.content_hash is None)


def steps(vis: Visibility, probes: Sequence[Probe]) -> list[Probe | list[SlotProbe]]:
    """``probes`` in order, cut into steps: each run of two or more consecutive
    batchable slot probes is one step (a list), every other probe a step alone."""
    out: list[Probe | list[SlotProbe]] = []
    run: list[SlotProbe] = []
    for probe in [*probes, None]:
        if probe is not None and isinstance(probe, SlotProbe) and _batchable(vis, probe):
            run.append(probe)
            continue
        out += [run] if len(run) > 1 else run
        run = []
        if probe is not None:
            out.append(probe)
    return out


def batch_query(
    slot: OwnerSlot, statuses: Sequence[str], keys: Sequence[str], hashes: Sequence[str]
) -> Query:
    """The records of ``slot`` in ``statuses`` whose key is among ``keys`` or whose
    content is among ``hashes``, by id."""
    cond, params = slot.key_sql("r", POSTGRES)
    sql = (
        f"{SELECT} WHERE {cond} AND r.status = ANY(%(statuses)s::text[])"
        " AND (r.key = ANY(%(keys)s::text[]) OR r.content_hash = ANY(%(hashes)s::text[]))"
        " ORDER BY r.id"
    )
    bound = {"statuses": list(statuses), "keys": list(keys), "hashes": list(hashes)}
    return sql, {**params, **bound}


def answer(conn: Conn, probes: Sequence[SlotProbe]) -> list[Hits]:
    """One answer per probe, in order, from one statement per (slot, statuses)."""
    groups: dict[tuple[OwnerSlot, tuple[str, ...]], list[SlotProbe]] = {}
    for probe in probes:
        groups.setdefault((probe.slot, tuple(probe.statuses)), []).append(probe)
    found: dict[tuple[OwnerSlot, tuple[str, ...]], list[Record]] = {}
    for (slot, statuses), group in groups.items():
        keys = sorted({p.key for p in group if p.key is not None})
        hashes = sorted({p.content_hash for p in group if p.content_hash is not None})
        rows = on(conn, batch_query(slot, statuses, keys, hashes))
        found[(slot, statuses)] = [record_from_values(row) for row in rows]
    return [_dealt(found[(p.slot, tuple(p.statuses))], p) for p in probes]


def _dealt(records: Sequence[Record], probe: SlotProbe) -> Hits:
    """The rows of one probe among its group's (which are in id order)."""
    if probe.key is not None:
        mine = sorted((r for r in records if r.key == probe.key), key=lambda r: -r.version)
    else:
        mine = [r for r in records if r.content_hash == probe.content_hash]
    return [(record, 1.0) for record in mine]
