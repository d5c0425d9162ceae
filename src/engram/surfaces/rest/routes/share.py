"""Sharing memories between agents of one user, under a grant."""

from __future__ import annotations

from fastapi import APIRouter, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.lifecycle_schemas import ShareBody
from engram.surfaces.rest.lifecycle_views import ShareOut, share_view
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.views import reply

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["lifecycle"])


@router.post("/share", response_model=ShareOut,
             responses=problems(400, 401, 403, 404, 409, 413, 415, 422, 500, 503))  # fmt: skip
def share(body: ShareBody, caller: Caller, mem: Mem) -> Response:
    """Copy memories of ``agent_id`` to agent ``to_agent_id`` of the same user: the
    memories ``ids`` names (one the caller cannot see is 404 and nothing is written),
    or what a recall of ``query`` selects. No grant from the one agent to the other
    is 403. Copies are redacted and carry their provenance; ineligible memories are
    refused item by item in the answer."""
    budget = None if body.budget is None else body.budget.budget()
    report = mem.share(body.context(caller), body.target(), body.to_agent_id, budget=budget)
    return reply(share_view(report))
