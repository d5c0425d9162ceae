"""A batch of ``remember`` items: validated into units, then written chunk by chunk.

``stage`` checks every item before anything is written (a bad one raises
``InvalidArgument`` naming its index) and turns each into a ``Unit``: one
proposal, or the passages of content over the size limit (``write.passages``).
``write_chunk`` prepares the units of each owner slot with no lock held (policy
and embedding), then decides and commits them all in one transaction, so the
passages of one long content land together or not at all. A chunk without
passages is decided on one read of its slots and written in one apply
(``write.bulk.commit_together``, the same outcome as one by one); a chunk with
passages is committed unit by unit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engram.config import Config
from engram.errors import InvalidArgument
from engram.scope import Scope, parse_scope
from engram.store.contract import Store
from engram.types import Authority, Proposal, WriteResult
from engram.write.bulk import commit_together
from engram.write.commit import Owner
from engram.write.ownership import owning_agent
from engram.write.passages import Unit, expand
from engram.write.path import WritePath
from engram.write.proposal import build_proposal, check_iterable, proposal_fields
from engram.write.slots import lock_in_order

__all__ = ["actor", "proposal_item", "stage", "write_chunk"]


def actor(scope: Scope) -> str:
    """Who a write or change from ``scope`` is audited as."""
    return f"agent:{scope.agent_id}" if scope.agent_id else f"user:{scope.user_id}"


def stage(config: Config, scope: Scope, items: Iterable[Mapping[str, Any]],
          now: datetime, name_items: bool = True) -> list[Unit]:  # fmt: skip
    """Every item validated into a unit (its target scope and proposals), before any write.
    With ``name_items`` (a batch), any refusal of an item names its index, whichever
    check refused it; a single ``remember`` leaves its field errors unnumbered."""
    check_iterable(items, "items")
    staged = []
    for index, item in enumerate(items):
        where = f"item {index}"
        try:
            staged.append(_stage_one(config, scope, item, where, now))
        except InvalidArgument as exc:
            message = str(exc)
            if name_items and not message.startswith(where):  # the same error, class kept
                exc.args = (f"{where}: {message}", *exc.args[1:])
            raise exc from None
    return staged


def _stage_one(config: Config, scope: Scope, item: object, where: str, now: datetime) -> Unit:
    """One item as a unit; ``InvalidArgument`` if any of its fields is refused."""
    if not isinstance(item, Mapping) or "content" not in item:
        raise InvalidArgument(f"{where} must be a mapping with 'content'")
    fields = proposal_fields(item, where)
    target = parse_scope(fields.pop("scope", "user"), scope)
    proposal = build_proposal(config, fields.pop("content"), scope=target, **fields)
    if proposal.authority == Authority.EXPLICIT_ADMIN:
        raise InvalidArgument("authority explicit_admin is reserved to remember_global")
    return expand(proposal, target, config.write, now)


def write_chunk(
    store: Store, writer: WritePath, scope: Scope, chunk: Sequence[Unit], when: datetime,
    stated: bool = False,
) -> list[WriteResult]:  # fmt: skip
    """Prepare each target's units with no lock held, then commit them all in one
    transaction (decisions read the slots there); results in chunk order. ``stated``:
    the items are the caller's own words (``remember``), not a proposer's
    (``Owner.stated``)."""
    groups: dict[tuple[str, str | None], list[int]] = {}
    for index, unit in enumerate(chunk):
        slot = (unit.target, owning_agent(scope.agent_id, unit.parts[0]))
        groups.setdefault(slot, []).append(index)
    prepared = {
        slot: writer.prepare_units([chunk[i] for i in indexes]) for slot, indexes in groups.items()
    }
    results: dict[int, WriteResult] = {}
    owners = {
        group: Owner(
            scope.tenant_id,
            scope.user_id,
            group[1],
            group[0],
            actor(scope),
            scope.agent_id,
            stated,
        )
        for group in groups
    }
    with store.transaction():
        wanted = [
            (owners[group].slot, proposal.key, digest)
            for group, ready in prepared.items()
            for proposal, digest in zip(ready.proposals, ready.hashes, strict=True)
        ]
        lock_in_order(store, wanted)
        if all(len(unit.parts) == 1 for unit in chunk):  # no passages: one read, one apply
            jobs = [(owners[group], prepared[group]) for group in groups]
            for indexes, written in zip(groups.values(), commit_together(writer, jobs, when),
                                        strict=True):  # fmt: skip
                results.update(zip(indexes, written, strict=True))
        else:
            for group, indexes in groups.items():
                written = writer.commit_prepared(owners[group], prepared[group], when)
                results.update(zip(indexes, written, strict=True))
    return [results[i] for i in range(len(chunk))]


def proposal_item(proposal: Proposal) -> dict[str, Any]:
    """A proposer's ``Proposal`` as ``remember`` keyword arguments."""
    item = {f.name: getattr(proposal, f.name) for f in dataclasses.fields(proposal)}
    item["source"] = proposal.source.to_dict()
    return item
