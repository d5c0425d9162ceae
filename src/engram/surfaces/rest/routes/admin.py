"""Administrative routes (an admin key of the tenant): tenant-wide memories,
subject erasure and the audit chain."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from engram.surfaces.rest.auth import Caller, Mem
from engram.surfaces.rest.problems import problems
from engram.surfaces.rest.schemas import GlobalBody
from engram.surfaces.rest.views import (
    AuditOut,
    ErasureOut,
    WriteOut,
    receipt_view,
    reply,
    write_view,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["admin"])


@router.post("/memories:global", response_model=WriteOut,
             responses=problems(400, 401, 403, 413, 415, 422, 500, 503))  # fmt: skip
def remember_global(body: GlobalBody, caller: Caller, mem: Mem) -> Response:
    """Write a tenant-wide (``global``) memory, seen by every user of the tenant."""
    caller.require_admin("writing a tenant-wide memory")
    return reply(
        write_view(mem.remember_global(caller.tenant_id, body.content, **body.sdk_fields()))
    )


@router.delete("/users/{user_id}", response_model=ErasureOut,
               responses=problems(401, 403, 422, 500, 503))  # fmt: skip
def erase_subject(user_id: Annotated[str, Path(max_length=200)], caller: Caller,
                  mem: Mem) -> Response:  # fmt: skip
    """Erase every record, vector, trace, working item and derived copy of one user;
    the receipt's ``verified`` says the physical check found nothing left."""
    caller.require_admin("erasing a user")
    caller.allows(user_id)
    return reply(receipt_view(mem.erase_subject(caller.tenant_id, user_id)))


@router.get("/audit/verify", response_model=AuditOut, responses=problems(401, 403, 500, 503))
def audit_verify(caller: Caller, mem: Mem) -> Response:
    """Recompute the audit hash chain (the whole store's: one chain for every tenant)."""
    caller.require_admin("verifying the audit chain")
    report = mem.audit_verify()
    detail = ("the audit chain verifies" if report.ok else
              "the audit chain does not verify; an operator can locate the break with "
              "`engram audit verify`")  # fmt: skip
    return reply({"ok": report.ok, "detail": detail})
