"""The consolidation cycle on demand (an admin key of the tenant)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.lifecycle_schemas import ConsolidateBody
from engram.surfaces.rest.lifecycle_views import ConsolidationOut, consolidation_view
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.views import reply

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["lifecycle"])


@router.post("/consolidate", response_model=ConsolidationOut,
             responses=problems(400, 401, 403, 404, 409, 413, 415, 422, 500, 503))  # fmt: skip
def consolidate(body: ConsolidateBody, caller: Caller, mem: Mem) -> Response:
    """Summarise old episodes, extract facts, count outcomes and merge duplicate facts
    for one user, or every user of the tenant without ``user_id`` (a key limited to
    some users or agents may name only one of its users). The same ``now`` twice
    changes nothing the second time; a user another consolidator holds is listed in
    ``busy_users``."""
    if body.user_id is None:
        caller.require_whole_tenant("consolidating every user")
    else:
        caller.require_admin("consolidating a user")
        caller.allows(body.user_id)
    report = mem.consolidate(caller.tenant_id, body.user_id, body.now, progress=False)
    return reply(consolidation_view(report))
