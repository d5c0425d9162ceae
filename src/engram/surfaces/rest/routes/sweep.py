"""The retention and decay sweep on demand (an admin key of the whole tenant)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.lifecycle_schemas import SweepBody
from engram.surfaces.rest.lifecycle_views import SweepOut, sweep_view
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.views import reply

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["lifecycle"])


@router.post("/sweep", response_model=SweepOut,
             responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
def sweep(body: SweepBody, caller: Caller, mem: Mem) -> Response:
    """Hard-delete what retention ended and what decay pruned in the key's tenant
    (``Engram.sweep``; docs/lifecycle.md), episodes consolidated first. It changes
    every user and agent of the tenant, so it needs an admin key limited to none; it
    never reaches another tenant. A ``now`` earlier than the tenant's last sweep is
    swept as asked and reported in ``clock_behind``."""
    caller.require_whole_tenant("sweeping the tenant")
    report = mem.sweep(caller.tenant_id, body.now)
    return reply(sweep_view(report))
