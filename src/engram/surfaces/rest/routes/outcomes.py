"""Procedure outcomes: one success or failure of a procedure the caller owns."""

from __future__ import annotations

from fastapi import APIRouter, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.lifecycle_schemas import OutcomeBody
from engram.surfaces.rest.lifecycle_views import OutcomesOut, outcomes_view
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.routes.memories import MemoryId
from engram.surfaces.rest.views import reply

__all__ = ["router"]

router = APIRouter(prefix="/v1/memories/{memory_id}", tags=["memories"])


@router.post("/outcome", response_model=OutcomesOut,
             responses=problems(400, 401, 403, 404, 409, 413, 415, 422, 500, 503))  # fmt: skip
def record_outcome(memory_id: MemoryId, body: OutcomeBody, caller: Caller,
                   mem: Mem) -> Response:  # fmt: skip
    """Count one success or failure (``reward`` in [-1, 1], optional) of the caller's
    active procedure; recall ranks procedures by the smoothed success rate. A memory
    that is not a procedure, or an old version, is 422; a tenant-wide one 403."""
    stats = mem.record_outcome(body.context(caller), memory_id, body.success, body.reward)
    return reply(outcomes_view(stats))
