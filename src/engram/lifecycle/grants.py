"""Share grants: which agent may share which types of memory with which other agent.

A grant belongs to one tenant and names two agents of it, so a share can never
leave the tenant: there is no grant to another tenant's agent to find. Grants
are administrative (``Engram.grant_share`` / ``revoke_share`` / ``list_grants``);
each change is one transaction with a tenant-level audit entry (agent ids and
types are ids, never content).

Revoking removes the copies made under the grant, with the copies derived
from them (a copy shared on, a summary of one), through ``forget``'s machinery
(``lifecycle.forget.delete_ids`` and ``finish``): hard deleted with the traces
naming them (stored and queued), the in-memory copies and text caches dropped,
the files scrubbed and checked, with one audit entry per owner. A copy is
recognised by its provenance (``source.kind`` share, bound to the grant's target
agent, one of the revoked types, its ``source.ref`` naming the sharing agent:
``share_ref``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.config import Config
from engram.errors import Forbidden, InvalidArgument, NotFound
from engram.lifecycle.forget import delete_ids, derived_closure, finish, quiesced
from engram.recall.usage import UsageRecorder
from engram.scope import Context, resolve
from engram.store.audit import AuditEntry
from engram.store.contract import (
    Audit,
    Change,
    CopiesTo,
    DropGrants,
    PutGrants,
)
from engram.store.open import Backend
from engram.store.predicate import Subject, Tenant
from engram.types import ShareGrant

__all__ = [
    "Pair",
    "RevokeReport",
    "grant",
    "granted_types",
    "pair",
    "parse_ref",
    "require_grant",
    "revoke",
    "share_ref",
]

_ADMIN = "admin"
_REF_PREFIX = "share:"
_MAX_TYPES = 64


@dataclass(frozen=True, slots=True)
class Pair:
    """A checked (tenant, from agent, to agent) triple."""

    tenant_id: str
    from_agent: str
    to_agent: str


@dataclass(frozen=True, slots=True)
class RevokeReport:
    """The grants a revocation removed and the copies it deleted (with their own
    derived copies); ``verified``, ``traces``, ``checked`` and ``failed`` as in
    ``ForgetReceipt``."""

    revoked: tuple[ShareGrant, ...]
    deleted: tuple[str, ...]
    verified: bool = True
    traces: int = 0
    checked: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


def share_ref(original_id: str, from_agent: str) -> str:
    """The ``source.ref`` of a copy: names the original and the agent that shared it."""
    return f"{_REF_PREFIX}{original_id}:{from_agent}"


def parse_ref(ref: str | None) -> tuple[str, str] | None:
    """(original id, sharing agent) of a copy's ``source.ref``; None for another ref."""
    if ref is None or not ref.startswith(_REF_PREFIX):
        return None
    original, sep, agent = ref[len(_REF_PREFIX) :].partition(":")
    return (original, agent) if sep and original and agent else None


def pair(tenant_id: str, from_agent: str, to_agent: str) -> Pair:
    """Validate a tenant and two distinct agents of it (the rules of ``Context``; a
    value of the wrong type is ``InvalidArgument`` there)."""
    giver = resolve(Context(tenant_id, _ADMIN, from_agent))
    taker = resolve(Context(tenant_id, _ADMIN, to_agent)).agent_id
    if giver.agent_id is None or taker is None:
        raise InvalidArgument("from_agent and to_agent must be agent ids")
    if giver.agent_id == taker:
        raise InvalidArgument("from_agent and to_agent must differ: an agent sees its own memories")
    return Pair(giver.tenant_id, giver.agent_id, taker)


def _types(config: Config, types: object) -> tuple[str, ...]:
    """A non-empty list of configured memory types, without repeats."""
    if isinstance(types, (str, bytes)) or not isinstance(types, Sequence) or not types:
        raise InvalidArgument("types must be a non-empty list of memory types")
    if len(types) > _MAX_TYPES:
        raise InvalidArgument(f"types holds {len(types)} entries; the limit is {_MAX_TYPES}")
    for name in types:
        if not isinstance(name, str):
            raise InvalidArgument(f"types must be strings, got {type(name).__name__}")
        config.policy(name)
    return tuple(dict.fromkeys(types))


def granted_types(grants: Sequence[ShareGrant], giver: str, taker: str) -> frozenset[str]:
    """The types ``giver`` may share with ``taker`` under ``grants``."""
    return frozenset(g.type for g in grants if (g.from_agent, g.to_agent) == (giver, taker))


def grant(
    store: Backend, config: Config, tenant_id: str, from_agent: str, to_agent: str,
    types: object, now: datetime,
) -> list[ShareGrant]:  # fmt: skip
    """Let ``from_agent`` share memories of ``types`` with ``to_agent``; every grant of
    the pair afterwards. Granting a type already granted changes nothing."""
    who, kinds = pair(tenant_id, from_agent, to_agent), _types(config, types)
    grants = tuple(ShareGrant(who.tenant_id, who.from_agent, who.to_agent, kind, now)
                   for kind in kinds)  # fmt: skip
    with store.transaction():
        applied = store.apply([PutGrants(grants)])
        if applied.granted:
            store.apply([Audit(_entry(who, now, "GRANT", [], kinds))])
        held = store.grants(Tenant(who.tenant_id))
    return [g for g in held if (g.from_agent, g.to_agent) == (who.from_agent, who.to_agent)]


def _entry(who: Pair, now: datetime, operation: str, ids: Sequence[str],
           kinds: Sequence[str]) -> AuditEntry:  # fmt: skip
    reason = f"agent:{who.from_agent} -> agent:{who.to_agent} types {','.join(kinds)}"
    return AuditEntry(now, who.tenant_id, None, _ADMIN, operation, list(ids), reason)


def revoke(
    store: Backend, config: Config, tenant_id: str, from_agent: str, to_agent: str,
    types: object, now: datetime, usage: UsageRecorder | None = None,
) -> RevokeReport:  # fmt: skip
    """Remove the pair's grants of ``types`` (None: every type) and the copies made
    under them, erased as ``forget`` erases. ``NotFound`` when the pair holds none of
    those grants."""
    who = pair(tenant_id, from_agent, to_agent)
    wanted = None if types is None else frozenset(_types(config, types))
    tenant = Tenant(who.tenant_id)
    with quiesced(usage):
        with store.transaction():
            held = _held(store, who, wanted)
            kinds = tuple(g.type for g in held)
            by_owner, derived = _copies_by_owner(store, who, kinds)
            ids = [i for owned in by_owner.values() for i in owned]
            changes: list[Change] = [DropGrants(tenant, who.from_agent, who.to_agent, kinds),
                                     Audit(_entry(who, now, "REVOKE", [], kinds))]  # fmt: skip
            changes += [Audit(AuditEntry(now, who.tenant_id, user or None, _ADMIN, "DELETE",
                                         owned, "share_revoked"))
                        for user, owned in by_owner.items()]  # fmt: skip
            erasing = delete_ids(store, tenant, ids, derived, usage, changes,
                                 config.consolidation.summary_type, now)  # fmt: skip
        subjects = [Subject.of(who.tenant_id, user or None) for user in by_owner]
        outcome = finish(store, erasing, usage, subjects)
    return RevokeReport(tuple(held), tuple(ids), outcome.verified, erasing.traces,
                        outcome.checked, outcome.failed)  # fmt: skip


def _held(store: Backend, who: Pair, wanted: frozenset[str] | None) -> list[ShareGrant]:
    """The pair's grants among ``wanted`` (None: all); ``NotFound`` when there are none."""
    held = [g for g in store.grants(Tenant(who.tenant_id))
            if (g.from_agent, g.to_agent) == (who.from_agent, who.to_agent)
            and (wanted is None or g.type in wanted)]  # fmt: skip
    if not held:
        raise NotFound(
            f"agent {who.from_agent!r} holds no grant to share {_named(wanted)} with "
            f"agent {who.to_agent!r} in this tenant"
        )
    return held


def _named(types: frozenset[str] | None) -> str:
    return "any type" if types is None else ", ".join(sorted(types))


def _copies_by_owner(
    store: Backend, who: Pair, kinds: Sequence[str]
) -> tuple[dict[str, list[str]], list[str]]:
    """The ids of the copies ``who.from_agent`` shared to ``who.to_agent`` of ``kinds``,
    with the records derived from them, by owning user ('' for none), and the derived
    ones alone. A derived record (a copy shared on, a summary) has the owner of the
    copy it came from."""
    found = store.copies(Tenant(who.tenant_id), CopiesTo(who.to_agent, tuple(kinds)))
    mine = [c for c in found if (parse_ref(c.source.ref) or ("", ""))[1] == who.from_agent]
    by_owner: dict[str, list[str]] = {}
    for copy in mine:
        by_owner.setdefault(copy.user_id or "", []).append(copy.id)
    tenant = Tenant(who.tenant_id)
    found_by_owner = {
        user: owned + [i for i in derived_closure(store, tenant, owned) if i not in owned]
        for user, owned in sorted(by_owner.items())
    }
    copied = {c.id for c in mine}
    derived = [i for owned in found_by_owner.values() for i in owned if i not in copied]
    return found_by_owner, derived


def require_grant(grants: Sequence[ShareGrant], who: Pair) -> frozenset[str]:
    """The types granted to ``who``; ``Forbidden`` when there are none."""
    kinds = granted_types(grants, who.from_agent, who.to_agent)
    if not kinds:
        raise Forbidden(
            f"agent {who.from_agent!r} has no grant to share with agent {who.to_agent!r} in "
            f"tenant {who.tenant_id!r}; an administrator grants one with grant_share"
        )
    return kinds
