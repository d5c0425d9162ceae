"""Export and import of one user's memories with their history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from engram.errors import Forbidden
from engram.surfaces.principal import Principal
from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import IdentityQuery, ImportBody
from engram.surfaces.rest.views import ExportOut, ImportOut, import_view, reply

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["transfer"])


@router.get("/export", response_model=ExportOut, responses=problems(401, 403, 422, 500, 503))
def export(query: Annotated[IdentityQuery, Query()], caller: Caller, mem: Mem) -> Response:
    """The caller's own memories in every status with version links, oldest first
    (the body ``POST /v1/import`` takes back)."""
    return reply({"rows": mem.export(query.context(caller))})


def _same_tenant(caller: Principal, rows: list[dict[str, Any]]) -> None:
    """Rows may carry the exporting tenant (an export does); another tenant is 403."""
    for index, row in enumerate(rows):
        named = row.get("tenant_id")
        if named is not None and named != caller.tenant_id:
            raise Forbidden(f"import row {index} names another tenant; this API key acts for "
                            f"tenant {caller.tenant_id!r} only")  # fmt: skip


@router.post("/import", response_model=ImportOut,
             responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
def import_records(body: ImportBody, caller: Caller, mem: Mem) -> Response:
    """Import exported rows under this identity (ids re-issued, links kept); every row
    passes the write path; idempotent. A bad row rejects the import, nothing stored."""
    ctx = body.context(caller)
    _same_tenant(caller, body.rows)
    return reply(import_view(mem.import_records(ctx, body.rows)))
