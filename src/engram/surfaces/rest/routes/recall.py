"""Recall and its traces."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from starlette.concurrency import run_in_threadpool

from engram.surfaces.rest.auth import Caller, Gate, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import IdentityQuery, RecallBody
from engram.surfaces.rest.views import RecallOut, recall_view, reply

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["recall"])


@router.post("/recall", response_model=RecallOut,
             responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
async def recall(body: RecallBody, caller: Caller, mem: Mem, gate: Gate) -> Response:
    """The memories that should influence the next action, rendered and explained.
    ``empty``, ``partial`` and ``ambiguous`` are statuses of a 200, not errors. Recalls
    run a few at a time per process, in arrival order (``RestSettings.recall_concurrency``,
    waiting on the event loop, not on a thread); 503 when one waited too long."""
    budget = None if body.budget is None else body.budget.budget()
    ctx = body.context(caller, body.purpose)  # a bad identity is refused before the queue

    def answer() -> Response:  # on a worker thread: the recall and its serialisation
        result = mem.recall(ctx, body.query, intent=body.intent, budget=budget, as_of=body.as_of)
        return reply(recall_view(result))

    if gate is None:
        return await run_in_threadpool(answer)
    async with gate.turn():
        return await run_in_threadpool(answer)


@router.get("/traces/{trace_id}", response_model=dict[str, Any],
            responses=problems(401, 403, 404, 422, 500, 503))  # fmt: skip
def trace(trace_id: Annotated[str, Path(max_length=200)], query: Annotated[IdentityQuery, Query()],
          caller: Caller, mem: Mem) -> Response:  # fmt: skip
    """A recall's trace, readable under the identity it was recorded under (same user,
    agent and named scopes); 404 otherwise."""
    return reply(mem.trace(query.context(caller), trace_id))
