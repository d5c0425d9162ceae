"""Who the caller is and whom it may look at: the key, the tenant's users, a user's audit.

These are the reads the dashboard (``/ui``) starts from, and they are plain API
routes any client may call:

- ``GET /v1/whoami``: the key's tenant, id, admin flag and allow-lists (never the
  secret or its digest);
- ``GET /v1/users``: the users the caller may pick. An admin key of the whole tenant
  gets the tenant's users that own a memory (``Engram.users``); a key limited to
  some users gets exactly those (whether or not they own anything yet). A key that
  is neither is refused (403): it may act for any user it names, but enumerating the
  tenant's user ids is an administrative read;
- ``GET /v1/audit?user_id=``: one user's audit entries (ids, operations and reason
  codes, never content) for an admin key or a key allowed that user. A key limited
  to agents is refused unless it is an admin: the log is the user's, across every
  agent, and such a key only ever sees its agents' view.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from engram.errors import Forbidden
from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import AuditQuery, UsersQuery
from engram.surfaces.rest.views import Out, reply

__all__ = ["AuditLogOut", "UsersOut", "WhoamiOut", "router"]

router = APIRouter(prefix="/v1", tags=["people"])


class WhoamiOut(Out):
    """The calling key: tenant, id, role and reach (``null``: any user or agent)."""

    tenant_id: str
    key_id: str
    admin: bool
    users: list[str] | None
    agents: list[str] | None


class UsersOut(Out):
    """Users the caller may pick, in id order; ``source`` says where the list came
    from: ``tenant`` (the users owning a memory) or ``key`` (the key's allow-list)."""

    users: list[str]
    source: str


class AuditEntryOut(Out):
    """One audit entry: ids, operation and reason code (``actor`` is a pseudonym or
    an agent id, never a name or content)."""

    seq: int
    at: str
    actor: str
    operation: str
    record_ids: list[str]
    reason: str
    hash: str


class AuditLogOut(Out):
    """A user's audit entries, oldest first: the newest ``limit`` of ``total``."""

    user_id: str
    entries: list[AuditEntryOut]
    total: int


def _sorted(names: frozenset[str] | None) -> list[str] | None:
    return None if names is None else sorted(names)


@router.get("/whoami", response_model=WhoamiOut, responses=problems(401, 500))
async def whoami(caller: Caller) -> Response:
    """The calling key: its tenant, id, whether it is an admin, and the users and
    agents it may act for (``null``: any). Never the key itself."""
    return reply({"tenant_id": caller.tenant_id, "key_id": caller.key_id,
                  "admin": caller.admin, "users": _sorted(caller.users),
                  "agents": _sorted(caller.agents)})  # fmt: skip


@router.get("/users", response_model=UsersOut, responses=problems(401, 403, 422, 500, 503))
def users(query: Annotated[UsersQuery, Query()], caller: Caller, mem: Mem) -> Response:
    """The users this key may pick, in id order (at most ``limit``): a key limited to
    users gets those; an admin key of the whole tenant gets the tenant's users that
    own a memory; any other key is 403."""
    if caller.users is not None:
        return reply({"users": sorted(caller.users)[: query.limit], "source": "key"})
    caller.require_admin("listing the tenant's users")
    return reply({"users": mem.users(caller.tenant_id, query.limit), "source": "tenant"})


@router.get("/audit", response_model=AuditLogOut,
            responses=problems(401, 403, 422, 500, 503))  # fmt: skip
def audit_log(query: Annotated[AuditQuery, Query()], caller: Caller, mem: Mem) -> Response:
    """One user's audit entries of this key's tenant, oldest first (the newest
    ``limit``): ids, operations and reason codes, never content. Empty after the
    user's erasure (the entries stay in the chain, no longer linked to them)."""
    user_id = query.user_id
    caller.allows(user_id)
    if not caller.admin and caller.agents is not None:
        raise Forbidden(f"key {caller.key_id!r} acts only for agents {sorted(caller.agents)}; "
                        "a user's audit log spans every agent and needs an admin key")  # fmt: skip
    entries = mem.audit_log(caller.tenant_id, user_id)
    shown = [entry.to_dict() for entry in entries[-query.limit :]]
    return reply({"user_id": user_id, "entries": shown, "total": len(entries)})
