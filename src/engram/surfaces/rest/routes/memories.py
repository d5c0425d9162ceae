"""Memories: remember one or many, observe turns, list, get, history, forget."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from engram.errors import InvalidArgument
from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import (
    BatchBody,
    IdentityQuery,
    ListQuery,
    ObserveBody,
    RememberBody,
)
from engram.surfaces.rest.views import (
    ForgetOut,
    HistoryOut,
    PageOut,
    RecordOut,
    WriteOut,
    WritesOut,
    page_view,
    receipt_view,
    record_view,
    reply,
    write_view,
    writes_view,
)

__all__ = ["MemoryId", "router"]

router = APIRouter(prefix="/v1", tags=["memories"])
MemoryId = Annotated[str, Path(max_length=200, description="A memory id.")]
WRITE = problems(400, 401, 403, 413, 415, 422, 500, 503)
READ = problems(401, 403, 404, 422, 500, 503)


@router.post("/memories", response_model=WriteOut, responses=WRITE)
def remember(body: RememberBody, caller: Caller, mem: Mem) -> Response:
    """Propose one memory; the write path decides ADD, CONFIRM, SUPERSEDE, ... or REJECT
    (a REJECT is a decision, answered 200 with its reason)."""
    result = mem.remember(body.context(caller), body.content, **body.sdk_fields())
    return reply(write_view(result))


@router.post("/memories:batch", response_model=WritesOut, responses=WRITE)
def remember_many(body: BatchBody, caller: Caller, mem: Mem) -> Response:
    """Propose many memories; results in input order. Every item is checked before
    anything is written (a bad one is 422 naming its index, nothing stored)."""
    items = [{"content": item.content, **item.sdk_fields()} for item in body.items]
    return reply(writes_view(mem.remember_many(body.context(caller), items)))


@router.post("/observe", response_model=WritesOut, responses=WRITE)
def observe(body: ObserveBody, caller: Caller, mem: Mem) -> Response:
    """Turn conversation turns into memories (the rule-based proposer suggests, the
    write path decides)."""
    turns = [turn.turn() for turn in body.turns]
    return reply(writes_view(mem.observe(body.context(caller), turns)))


def _statuses(status: list[str] | None) -> str | list[str] | None:
    """The SDK's ``status`` argument: the default, every status (``all``) or a list."""
    if not status:
        return "active"
    if "all" in status:
        if len(status) > 1:
            raise InvalidArgument("status=all lists every status; do not combine it")
        return None
    return status


@router.get("/memories", response_model=PageOut, responses=problems(401, 403, 422, 500, 503))
def list_memories(query: Annotated[ListQuery, Query()], caller: Caller, mem: Mem,
                  ) -> Response:  # fmt: skip
    """Visible memories, newest first, one page at a time."""
    records = mem.list(query.context(caller), type=query.type, status=_statuses(query.status),
                       limit=query.limit, offset=query.offset)  # fmt: skip
    return reply(page_view(records, query.limit, query.offset))


@router.get("/memories/{memory_id}", response_model=RecordOut, responses=READ)
def get_memory(memory_id: MemoryId, query: Annotated[IdentityQuery, Query()], caller: Caller,
               mem: Mem) -> Response:  # fmt: skip
    """One memory; 404 when it is not visible to this identity (it may exist elsewhere)."""
    return reply(record_view(mem.get(query.context(caller), memory_id)))


@router.get("/memories/{memory_id}/history", response_model=HistoryOut, responses=READ)
def history(memory_id: MemoryId, query: Annotated[IdentityQuery, Query()], caller: Caller,
            mem: Mem) -> Response:  # fmt: skip
    """The version chain through a memory, oldest first."""
    versions = mem.history(query.context(caller), memory_id)
    return reply({"versions": [record_view(r) for r in versions]})


@router.delete("/memories/{memory_id}", response_model=ForgetOut, responses=READ)
def forget(memory_id: MemoryId, query: Annotated[IdentityQuery, Query()], caller: Caller,
           mem: Mem) -> Response:  # fmt: skip
    """Hard-delete a memory, all its versions and the copies derived from them; the
    receipt says what was removed and how the removal was verified."""
    return reply(receipt_view(mem.forget(query.context(caller), memory_id)))
