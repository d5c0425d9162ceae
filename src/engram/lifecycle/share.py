"""Sharing between agents of one user: eligible memories copied, redacted, with provenance.

``share`` gives agent B copies of memories agent A holds, under a grant
(``lifecycle.grants``). Steps (seed 002, "Cross-Agent Memory Sharing"):

1. retrieval: the caller names ids, or a query that recall answers in A's context;
2. filtering: no grant from A to B is ``Forbidden``; a memory that is private,
   sensitive (medium or high), not active, of a type not granted, or already
   visible to every agent of the user (no agent, or global) is refused, per item,
   with a reason code in the report;
3. redaction: personal data and secrets in content and value become
   ``[REDACTED:<kind>]`` (``write.detectors``), whatever the sensitivity says;
4. storage with provenance: each copy goes through the write path for B's slot
   (policy, decision, audit), with authority ``shared``, ``source.kind`` share,
   ``source.derived_from`` the original and ``source.ref`` naming it and A
   (``grants.share_ref``), owned by the same tenant and user, bound to B; its
   retention never ends later than the original's (counted from the share, it is
   cut to the original's ``expires_at``).

The copies are decided together on one read of their slots and written in one
apply (``write.bulk``), so a share costs a bounded number of statements; a copy
that could meet another of the same call is committed after the others, alone.

Idempotent: a memory already shared to B (its copy, of the same user, in any
status) is reported ``already_shared`` and not copied again, so a copy B's user
retracted is never revived. The policy and the embedder run with no lock held;
the grant, the originals and the existing copies are read again inside the one
transaction that writes, so a share racing a revocation or a retraction sees the winner.
Copies then follow their original (``write.copies``): retracted with it,
retracted when it is corrected or superseded, expired with it, deleted with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.config import Config
from engram.embed import Embedder
from engram.errors import NotFound
from engram.lifecycle.grants import Pair, parse_ref, require_grant, share_ref
from engram.scope import GLOBAL, Scope
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Change, CopiesOf, Update
from engram.store.open import Backend
from engram.store.predicate import Tenant, Visibility
from engram.types import (
    Authority,
    Operation,
    Proposal,
    Record,
    Sensitivity,
    Source,
    SourceKind,
    Status,
    WriteResult,
    as_seen,
)
from engram.write import detectors
from engram.write.bulk import commit_together
from engram.write.commit import Owner
from engram.write.path import Prepared, WritePath
from engram.write.slots import lock_in_order

__all__ = ["SHARED", "ShareItem", "ShareReport", "refusal", "share"]

SHARED, ALREADY, REFUSED = "shared", "already_shared", "refused"
_WHY = {
    "private": "private memories are never shared to other agents",
    "sensitive": "medium or high sensitivity memories are never shared",
    "not_active": "only active memories are shared",
    "type_not_granted": "no grant covers this memory's type",
    "visible_to_every_agent": "every agent of the user already sees it (no agent, or global)",
    "not_stored": "not a stored memory (working memory is not shared)",
}


@dataclass(frozen=True, slots=True)
class ShareItem:
    """What happened to one memory: ``shared`` (``copy_id`` is the copy, ``operation``
    the write path's decision for it), ``already_shared`` (``copy_id`` the earlier
    copy, or what B already held) or ``refused``; ``code`` says why, ``reason`` in
    words, ``redacted`` the kinds of data removed from the copy."""

    memory_id: str
    outcome: str
    code: str
    reason: str
    copy_id: str | None = None
    operation: str | None = None
    redacted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareReport:
    """One item per memory asked for, in order."""

    tenant_id: str
    from_agent: str
    to_agent: str
    items: tuple[ShareItem, ...]

    @property
    def shared(self) -> tuple[str, ...]:
        """Ids of the copies this call made."""
        return tuple(i.copy_id for i in self.items if i.outcome == SHARED and i.copy_id)

    @property
    def refused(self) -> tuple[ShareItem, ...]:
        """The items refused, with their reasons."""
        return tuple(i for i in self.items if i.outcome == REFUSED)


@dataclass(frozen=True, slots=True)
class _Draft:
    """A copy to write: its original, the proposal and what redaction removed."""

    original: Record
    proposal: Proposal
    redacted: tuple[str, ...]


def refusal(record: Record, who: Pair, granted: frozenset[str], now: datetime) -> str | None:
    """Why ``record`` may not be shared by ``who`` (a code of ``_WHY``), or None."""
    if record.private:
        return "private"
    if record.sensitivity != Sensitivity.LOW:
        return "sensitive"
    if as_seen(record, now).status != Status.ACTIVE:
        return "not_active"
    if record.type not in granted:
        return "type_not_granted"
    if record.scope == GLOBAL or record.agent_id != who.from_agent:
        return "visible_to_every_agent"
    return None


def _redact(text: str) -> tuple[str, set[str]]:
    findings = detectors.find_secrets(text) + detectors.find_personal_data(text)
    return detectors.redact(text, findings), {f.kind for f in findings}


def _redact_value(value: Any, kinds: set[str]) -> Any:
    """``value`` with every string in it redacted (mappings keep their keys)."""
    if isinstance(value, str):
        text, found = _redact(value)
        kinds |= found
        return text
    if isinstance(value, list):
        return [_redact_value(item, kinds) for item in value]
    if isinstance(value, dict):
        return {key: _redact_value(item, kinds) for key, item in value.items()}
    return value


def _draft(record: Record, who: Pair) -> _Draft:
    """The proposal of ``record``'s copy for ``who.to_agent``."""
    content, kinds = _redact(record.content)
    value = _redact_value(record.value, kinds)
    source = Source(SourceKind.SHARE, share_ref(record.id, who.from_agent), (record.id,))
    proposal = Proposal(
        content=content, type=record.type, scope=record.scope, key=record.key, value=value,
        authority=Authority.SHARED, confidence=record.confidence,
        observed_at=record.observed_at, valid_from=record.valid_from,
        valid_to=record.valid_to, source=source, sensitivity=Sensitivity.LOW,
        purpose=record.purpose, consent_basis=record.consent_basis,
        retention=record.retention, importance=record.importance, private=False,
        agent_scope="agent",
    )  # fmt: skip
    return _Draft(record, proposal, tuple(sorted(kinds)))


def _existing(store: Backend, who: Pair, originals: Sequence[Record]) -> dict[str, Record]:
    """The copies already made of ``originals`` for ``who.to_agent``, by original id."""
    users = {r.id: r.user_id for r in originals}
    found = store.copies(Tenant(who.tenant_id), CopiesOf(tuple(users)))
    out: dict[str, Record] = {}
    for copy in found:
        named = parse_ref(copy.source.ref)
        if (copy.agent_id == who.to_agent and named and named[1] == who.from_agent
                and named[0] in users and copy.user_id == users[named[0]]):  # fmt: skip
            out.setdefault(named[0], copy)
    return out


def _refused(memory_id: str, code: str) -> ShareItem:
    return ShareItem(memory_id, REFUSED, code, _WHY[code])


def _already(memory_id: str, copy: Record) -> ShareItem:
    reason = f"already shared as {copy.id} ({copy.status.value})"
    return ShareItem(memory_id, ALREADY, "already_shared", reason, copy.id)


@dataclass
class _Run:
    """One share: who, when, the items decided so far (by position)."""

    who: Pair
    scope: Scope
    now: datetime
    items: dict[int, ShareItem]

    def owner(self, record: Record) -> Owner:
        """B's write slot for a copy of ``record`` (same tenant, user and scope)."""
        return Owner(self.who.tenant_id, record.user_id, self.who.to_agent, record.scope,
                     f"agent:{self.who.from_agent}", self.who.to_agent)  # fmt: skip


def _plan(
    store: Backend, run: _Run, ids: Sequence[str], strict: bool, granted: frozenset[str]
) -> list[tuple[int, Record]]:
    """The positions and records still to copy; the others get their item. In
    ``strict`` mode an id not visible to the caller raises ``NotFound`` (nothing
    has been written); else it is refused as ``not_stored``."""
    vis = Visibility.of(run.scope)
    by_id = {r.id: r for r in store.read(vis, ids)}
    missing = [i for i in ids if i not in by_id]
    if strict and missing:
        raise NotFound(f"no memory {missing[0]!r} is visible to this context")
    todo = []
    for position, memory_id in enumerate(ids):
        record = by_id.get(memory_id)
        code = "not_stored" if record is None else refusal(record, run.who, granted, run.now)
        if code is not None:
            run.items[position] = _refused(memory_id, code)
        elif record is not None:
            todo.append((position, record))
    known = _existing(store, run.who, [r for _, r in todo])
    for position, record in todo:
        if record.id in known:
            run.items[position] = _already(record.id, known[record.id])
    return [(p, r) for p, r in todo if r.id not in known]


def share(
    store: Backend, embedder: Embedder, config: Config, scope: Scope, who: Pair,
    ids: Sequence[str], now: datetime, *, strict: bool = True,
) -> ShareReport:  # fmt: skip
    """Copy the eligible memories among ``ids`` (visible to ``scope``, whose agent is
    ``who.from_agent``) to ``who.to_agent``; see the module for every rule."""
    run = _Run(who, scope, now, {})
    ids = list(dict.fromkeys(ids))
    tenant = Tenant(who.tenant_id)
    first = _plan(store, run, ids, strict, require_grant(store.grants(tenant), who))
    before = dict(run.items)
    writer = WritePath(store, embedder, config)
    with detectors.answering_once():  # the policy asks again what the redaction asked
        drafts = {r.id: _draft(r, who) for _, r in first}
        prepared = writer.prepare([d.proposal for d in drafts.values()])
    places = {memory_id: place for place, memory_id in enumerate(drafts)}
    with store.transaction():  # decide again on what the transaction sees
        run.items.clear()
        todo = _plan(store, run, ids, strict, require_grant(store.grants(tenant), who))
        _write(store, writer, run, [(p, drafts[r.id]) for p, r in todo if r.id in drafts],
               prepared, places)  # fmt: skip
    items = (run.items.get(i) or before[i] for i in range(len(ids)))
    return ShareReport(who.tenant_id, who.from_agent, who.to_agent, tuple(items))


def _write(
    store: Backend, writer: WritePath, run: _Run, todo: Sequence[tuple[int, _Draft]],
    prepared: Prepared, places: Mapping[str, int],
) -> None:  # fmt: skip
    """Commit the copies slot by slot (inside the transaction) and audit the share."""
    groups: dict[Owner, list[tuple[int, _Draft]]] = {}
    for position, draft in todo:
        groups.setdefault(run.owner(draft.original), []).append((position, draft))
    picked = {owner: prepared.subset([places[d.original.id] for _, d in members])
              for owner, members in groups.items()}  # fmt: skip
    wanted = [
        (owner.slot, proposal.key, digest)
        for owner, ready in picked.items()
        for proposal, digest in zip(ready.proposals, ready.hashes, strict=True)
    ]
    lock_in_order(store, wanted)
    copied: list[str] = []
    capped: list[Change] = []
    jobs = list(picked.items())
    cut = [[d.original.expires_at for _, d in members] for members in groups.values()]
    done = commit_together(writer, jobs, run.now,
                           lambda job, index, copy: _cut(copy, cut[job][index]))  # fmt: skip
    for members, results in zip(groups.values(), done, strict=True):
        for (position, draft), result in zip(members, results, strict=True):
            run.items[position] = _outcome(draft, result)
            if run.items[position].outcome == SHARED and result.record is not None:
                copied += [draft.original.id, result.record.id]
                capped += _capped(result.record, draft.original)
    store.apply(capped)
    if copied:
        user = run.scope.user_id
        entry = AuditEntry(run.now, run.who.tenant_id, user, f"agent:{run.who.from_agent}",
                           "SHARE", copied, f"shared to agent:{run.who.to_agent}")  # fmt: skip
        store.apply([Audit(entry)])


def _cut(copy: Record, end: datetime | None) -> Record:
    """``copy`` whose retention ends by ``end`` (its original's), when the copy's
    (counted from the share) would outlive it."""
    if end is None or (copy.expires_at is not None and copy.expires_at <= end):
        return copy
    return copy.replace(expires_at=end)


def _capped(copy: Record, original: Record) -> list[Change]:
    """The update that ends ``copy``'s retention with its original's (a copy the write
    path committed one by one, ``write.bulk``); none when it ends by then already."""
    cut = _cut(copy, original.expires_at)
    return [] if cut is copy else [Update(cut)]


def _outcome(draft: _Draft, result: WriteResult) -> ShareItem:
    """The item of a committed copy: a new version is a copy; a confirmation means
    the target agent already held the same memory; a rejection refuses it."""
    original, record = draft.original.id, result.record
    if result.operation == Operation.REJECT or record is None:
        return ShareItem(original, REFUSED, "policy", result.reason)
    if result.operation == Operation.CONFIRM:
        return ShareItem(original, ALREADY, "already_held", result.reason, record.id,
                         result.operation.value)  # fmt: skip
    return ShareItem(original, SHARED, result.operation.value.lower(), result.reason, record.id,
                     result.operation.value, draft.redacted)  # fmt: skip
