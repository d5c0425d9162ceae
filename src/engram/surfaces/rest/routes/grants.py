"""Share grants of the key's tenant (an admin key): list, grant, revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.lifecycle_schemas import GrantBody, RevokeQuery
from engram.surfaces.rest.lifecycle_views import GrantsOut, RevokeOut, grants_view, revoke_view
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.views import reply

__all__ = ["router"]

router = APIRouter(prefix="/v1/grants", tags=["lifecycle"])


@router.get("", response_model=GrantsOut, responses=problems(401, 403, 422, 500, 503))
def list_grants(caller: Caller, mem: Mem) -> Response:
    """Every share grant of the tenant, by (from agent, to agent, type)."""
    caller.require_admin("listing share grants")
    return reply(grants_view(mem.list_grants(caller.tenant_id)))


@router.post("", response_model=GrantsOut,
             responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
def grant(body: GrantBody, caller: Caller, mem: Mem) -> Response:
    """Let ``from_agent`` share its memories of ``types`` with ``to_agent``; answers the
    pair's grants afterwards (granting a type twice changes nothing)."""
    caller.require_whole_tenant("granting sharing between agents")
    held = mem.grant_share(caller.tenant_id, body.from_agent, body.to_agent, body.types)
    return reply(grants_view(held))


@router.delete("", response_model=RevokeOut, responses=problems(401, 403, 404, 422, 500, 503))
def revoke(query: Annotated[RevokeQuery, Query()], caller: Caller, mem: Mem) -> Response:
    """Withdraw the pair's grants of ``type`` (every type when absent) and delete the
    copies made under them; 404 when the pair holds none of those grants."""
    caller.require_whole_tenant("revoking sharing between agents")
    report = mem.revoke_share(caller.tenant_id, query.from_agent, query.to_agent, query.type)
    return reply(revoke_view(report))
