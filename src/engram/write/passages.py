"""Long content stored as passages: one memory per passage, linked into a group.

Content over ``WritePolicy.max_content_bytes`` (8,192 UTF-8 bytes by default)
is not rejected but cut into passages of at most that size (``write.split``),
each a memory of its own with the item's type, scope and fields, so a long
answer is found by recall (a phrase from its middle meets the passage holding
it) and erased like any memory. The 8 KB limit stays the limit of one passage.

The group (see ``docs/governance.md``, "Long content"):

* ``source.ref`` of passage i of n is the caller's ref (or nothing) followed by
  the selector ``#p<i>/<n>``: ``"chat-7:msg-12#p2/5"``, or ``"#p2/5"`` with no ref.
  The caller's ref must leave room for it within the 1,000-character limit.
* passage 1 (the head) keeps the caller's ``source.derived_from`` and ``value``;
  passages 2..n have ``source.derived_from = [head id]`` and no value. So
  forgetting the head forgets every passage (the derived closure), and
  ``forget`` of any other passage finds its head and forgets the group.
* passages have consecutive ``observed_at`` microseconds, so their order is
  kept and the context channel sees them as neighbours.
* the write policy judges the WHOLE content once (a secret or a personal datum
  split across a boundary is still found), and its verdict, reason and
  sensitivity apply to every passage: all are stored, quarantined or rejected.
* a keyed memory holds one value and is never split: over the limit it is
  REJECTed ``oversized`` as before; so is content that needs more than
  ``MAX_PASSAGES`` passages.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from engram import limits
from engram.config import WritePolicy
from engram.errors import InvalidArgument
from engram.passage_refs import parsed as parse_ref
from engram.passage_refs import selector
from engram.store.contract import SlotProbe, Store
from engram.store.predicate import OwnerSlot
from engram.types import Proposal, Record, Source, Status, WriteResult
from engram.write import policy
from engram.write.commit import Owner
from engram.write.policy import Verdict, VerdictKind
from engram.write.slots import slot_versions
from engram.write.split import split_text

__all__ = [
    "MAX_PASSAGES",
    "Unit",
    "combined",
    "expand",
    "head_id",
    "is_head_of",
    "linked",
    "selector",
    "stored_group",
]

MAX_PASSAGES = 256  # passages of one memory: 2 MiB of content at the default 8 KB
_ACTIVE = (Status.ACTIVE.value,)


@dataclass(frozen=True, slots=True)
class Unit:
    """One item of a write: its target scope and what it becomes, one proposal or
    the passages of its content. ``verdict`` is the policy's verdict on the whole
    item when it was judged whole (split, or refused for its size); None means
    each proposal is judged as it is."""

    target: str
    parts: tuple[Proposal, ...]
    verdict: Verdict | None = None


def head_id(record: Record) -> str | None:
    """The id of the head a non-head passage names, or None."""
    parsed = parse_ref(record.source.ref)
    if parsed is None or parsed[1] == 1 or len(record.source.derived_from) != 1:
        return None
    return record.source.derived_from[0]


def is_head_of(head: Record, passage: Record) -> bool:
    """``head`` is passage 1 of the group ``passage`` belongs to (same ref and count)."""
    mine, theirs = parse_ref(passage.source.ref), parse_ref(head.source.ref)
    if mine is None or theirs is None:
        return False
    owners = [(r.tenant_id, r.user_id, r.agent_id, r.scope) for r in (head, passage)]
    return theirs == (mine[0], 1, mine[2]) and owners[0] == owners[1]


def _oversized(proposal: Proposal, why: str) -> Verdict:
    return Verdict(VerdictKind.REJECT, "oversized", why, proposal.sensitivity)


def expand(proposal: Proposal, target: str, rules: WritePolicy, now: datetime) -> Unit:
    """The unit ``proposal`` becomes: itself when it fits, else its passages judged
    whole, or itself with an ``oversized`` REJECT when it may not be split."""
    size, limit = len(proposal.content.encode()), rules.max_content_bytes
    if size <= limit:
        return Unit(target, (proposal,))
    if proposal.key is not None:
        why = (f"content is {size} bytes; the limit is {limit} for a keyed memory "
               "(one value is never split into passages)")  # fmt: skip
        return Unit(target, (proposal,), _oversized(proposal, why))
    verdict = policy.evaluate(proposal, dataclasses.replace(rules, max_content_bytes=sys.maxsize))
    if verdict.kind == VerdictKind.REJECT:
        return Unit(target, (proposal,), verdict)
    texts = split_text(proposal.content, limit)
    if len(texts) > MAX_PASSAGES:
        why = (f"content is {size} bytes, {len(texts)} passages; the limit is {MAX_PASSAGES} "
               f"passages of {limit} bytes")  # fmt: skip
        return Unit(target, (proposal,), _oversized(proposal, why))
    _check_room(proposal.source.ref, len(texts))
    return Unit(target, _passages(proposal, texts, now), verdict)


def _check_room(ref: str | None, count: int) -> None:
    room = limits.MAX_SOURCE_REF_CHARS - len(selector(None, count, count))
    if ref is not None and len(ref) > room:
        raise InvalidArgument(
            f"source.ref is {len(ref)} characters; content split into {count} passages "
            f"needs room for a passage selector: at most {room}"
        )


def _passages(proposal: Proposal, texts: Sequence[str], now: datetime) -> tuple[Proposal, ...]:
    """One proposal per passage; passages 2..n get their head's id at commit (``linked``)."""
    start, count, source = proposal.observed_at or now, len(texts), proposal.source
    return tuple(
        dataclasses.replace(
            proposal, content=text, value=proposal.value if i == 0 else None,
            observed_at=start + timedelta(microseconds=i),
            source=Source(source.kind, selector(source.ref, i + 1, count),
                          source.derived_from if i == 0 else ()),
        )
        for i, text in enumerate(texts)
    )  # fmt: skip


def linked(proposal: Proposal, head: str) -> Proposal:
    """A passage after the first, derived from its head."""
    source = Source(proposal.source.kind, proposal.source.ref, (head,))
    return dataclasses.replace(proposal, source=source)


def stored_group(
    store: Store, owner: Owner, parts: Sequence[Proposal], digests: Sequence[str]
) -> list[Record] | None:
    """The active group in ``slot`` with the same passages (content hashes and count),
    in order, or None: writing the same long content again confirms it, whatever its
    ref (as a single memory's duplicate is confirmed whatever its ref).

    A user's write never confirms a group an agent holds (a record confirmed that way
    would be promoted to the user one passage at a time); it stores its own group."""
    slot = owner.slot
    for head in _same(store, slot, digests[0]):
        own = owner.agent_id is not None or head.agent_id is None
        if own and head.key is None and _place(head) == (1, len(parts)):
            members = _members(store, slot, head, digests)
            if members is not None:
                return members
    return None


def _same(store: Store, slot: OwnerSlot, digest: str) -> list[Record]:
    """The slot's active records of one content hash (the slot locked for it)."""
    return slot_versions(store, [SlotProbe(slot, _ACTIVE, content_hash=digest)])[0]


def _place(record: Record) -> tuple[int, int] | None:
    parsed = parse_ref(record.source.ref)
    return None if parsed is None else parsed[1:]


def _members(
    store: Store, slot: OwnerSlot, head: Record, digests: Sequence[str]
) -> list[Record] | None:
    found = [head]
    for index, digest in enumerate(digests[1:], start=2):
        match = [r for r in _same(store, slot, digest)
                 if _place(r) == (index, len(digests)) and r.source.derived_from == (head.id,)
                 and r.agent_id == head.agent_id]  # fmt: skip
        if not match:
            return None
        found.append(match[0])
    return found


def combined(results: Sequence[WriteResult]) -> WriteResult:
    """The head's result, with every passage's id (in order) in ``passages``."""
    ids = [r.record.id for r in results if r.record is not None]
    return dataclasses.replace(results[0], passages=ids)
