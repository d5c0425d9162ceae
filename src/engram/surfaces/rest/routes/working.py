"""Working memory of one session or task: set, get, list, delete, clear, with a TTL.

An item's key is the rest of the path, any characters (``{key:engram_key}``).
Starlette's own ``path`` convertor (``.*``) stops at a line break, and its route
pattern ends in ``$``, which matches before a final one: ``PUT /v1/working/step%0A``
would have set ``step``, and a key with a line break inside had no route (an
undocumented 404). This convertor takes every character, so such a key reaches
the working-memory checks and is refused as the SDK refuses it (422).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from starlette.convertors import PathConvertor, register_url_convertor

from engram.errors import NotFound
from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import WorkingQuery, WorkingSetBody
from engram.surfaces.rest.views import (
    RemovedOut,
    WorkingItemOut,
    WorkingListOut,
    reply,
    working_view,
)

__all__ = ["KeyConvertor", "router"]


class KeyConvertor(PathConvertor):
    """The rest of the path, line breaks included (``re.DOTALL``)."""

    regex = "(?s:.*)"


register_url_convertor("engram_key", KeyConvertor())
router = APIRouter(prefix="/v1/working", tags=["working"])
Key = Annotated[str, Path(max_length=200, description="The item's key.")]
SCOPED = problems(401, 403, 422, 500, 503)


@router.put("/{key:engram_key}", response_model=WorkingItemOut,
            responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
def set_item(key: Key, body: WorkingSetBody, caller: Caller, mem: Mem) -> Response:
    """Store a JSON value under ``key`` (replacing it) for ``ttl_seconds`` (default 24 h)."""
    handle = mem.working(body.context(caller), body.kind)
    return reply(working_view(handle.set(key, body.value, body.ttl_seconds)))


@router.get("/{key:engram_key}", response_model=WorkingItemOut,
            responses=problems(401, 403, 404, 422, 500, 503))  # fmt: skip
def get_item(key: Key, query: Annotated[WorkingQuery, Query()], caller: Caller,
             mem: Mem) -> Response:  # fmt: skip
    """The live item under ``key``; 404 when never set, deleted or expired."""
    item = mem.working(query.context(caller), query.kind).get(key)
    if item is None:
        raise NotFound(f"no live working item {key!r} in this scope")
    return reply(working_view(item))


@router.get("", response_model=WorkingListOut, responses=SCOPED)
def list_items(query: Annotated[WorkingQuery, Query()], caller: Caller,
               mem: Mem) -> Response:  # fmt: skip
    """Every live item of the scope, most recently set first."""
    items = mem.working(query.context(caller), query.kind).list()
    return reply({"items": [working_view(item) for item in items]})


@router.delete("/{key:engram_key}", response_model=RemovedOut, responses=SCOPED)
def delete_item(key: Key, query: Annotated[WorkingQuery, Query()], caller: Caller,
                mem: Mem) -> Response:  # fmt: skip
    """Remove ``key``; ``removed`` is 1 when a live item was removed, else 0."""
    removed = mem.working(query.context(caller), query.kind).delete(key)
    return reply({"removed": int(removed)})


@router.delete("", response_model=RemovedOut, responses=SCOPED)
def clear(query: Annotated[WorkingQuery, Query()], caller: Caller, mem: Mem) -> Response:
    """Remove every item of the scope; ``removed`` counts the live ones."""
    return reply({"removed": mem.working(query.context(caller), query.kind).clear()})
