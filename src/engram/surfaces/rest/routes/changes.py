"""Caller changes to one memory: correct, retract, expire (each a new version)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.routes.memories import MemoryId
from engram.surfaces.rest.schemas import ChangeBody, CorrectBody, RetractBody
from engram.surfaces.rest.views import WriteOut, reply, write_view

__all__ = ["router"]

router = APIRouter(prefix="/v1/memories/{memory_id}", tags=["memories"])
CHANGE = problems(400, 401, 403, 404, 409, 413, 415, 422, 500, 503)


@router.post("/correct", response_model=WriteOut, responses=CHANGE)
def correct(memory_id: MemoryId, body: CorrectBody, caller: Caller, mem: Mem) -> Response:
    """Replace a memory with a corrected version stated by the user (a SUPERSEDE;
    409 when another writer changed it first)."""
    return reply(write_view(mem.correct(body.context(caller), memory_id, body.content, body.value)))


@router.post("/retract", response_model=WriteOut, responses=CHANGE)
def retract(memory_id: MemoryId, body: RetractBody, caller: Caller, mem: Mem) -> Response:
    """Mark a memory wrong: kept in history, never recalled again."""
    ctx = body.context(caller)
    if body.reason is None:
        return reply(write_view(mem.retract(ctx, memory_id)))
    return reply(write_view(mem.retract(ctx, memory_id, body.reason)))


@router.post("/expire", response_model=WriteOut, responses=CHANGE)
def expire(memory_id: MemoryId, body: ChangeBody, caller: Caller, mem: Mem) -> Response:
    """End a memory's validity now."""
    return reply(write_view(mem.expire(body.context(caller), memory_id)))
