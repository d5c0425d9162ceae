"""Liveness, readiness and the problem types (no API key needed for any of them)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Path

from engram.errors import EngramError, NotFound, Unavailable
from engram.scope import Context
from engram.surfaces.rest.auth import Mem
from engram.surfaces.rest.problems import catalogue, problems
from engram.surfaces.rest.views import Out

__all__ = ["router"]

_log = logging.getLogger("engram.rest")

router = APIRouter(tags=["health"])
# A probe identity: reads under it find nothing (no key may name it as a tenant,
# since a key's tenant is an identifier and this one is only ever read).
_PROBE = Context(tenant_id="engram.readyz", user_id="readyz", session_id="readyz")


class HealthOut(Out):
    """The server's state."""

    status: str


class ProblemTypeOut(Out):
    """What one problem ``type`` means."""

    type: str
    title: str
    status: int


@router.get("/healthz", response_model=HealthOut)
async def healthz() -> dict[str, str]:
    """Liveness: the process answers (nothing else is checked)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=HealthOut, responses=problems(503))
def readyz(mem: Mem) -> dict[str, str]:
    """Readiness: one read of the store and one of working memory succeed. A 503 says
    which of them failed; its cause (hosts, databases) goes to the server's log only."""
    _probe("the store", lambda: mem.list(_PROBE, limit=1))
    _probe("working memory", lambda: mem.working(_PROBE).get("readyz"))
    return {"status": "ready"}


def _probe(part: str, read: Callable[[], object]) -> None:
    """Run ``read``; an Engram error becomes ``Unavailable`` naming ``part``. The cause
    names hosts and databases: it goes to the server's log, not to an unauthenticated
    caller."""
    try:
        read()
    except EngramError as exc:
        _log.warning("not ready: %s: %s: %s", part, type(exc).__name__, exc)
        raise Unavailable(f"not ready: {part} cannot be used (the server's log says "
                          "why)") from exc  # fmt: skip


@router.get("/problems/{slug}", response_model=ProblemTypeOut, responses=problems(404, 422))
async def problem_type(slug: Annotated[str, Path(max_length=64)]) -> dict[str, object]:
    """The meaning of a problem ``type`` (``/problems/<slug>``)."""
    row = catalogue().get(slug)
    if row is None:
        raise NotFound(f"no problem type {slug!r}")
    return {"type": f"/problems/{row.problem}", "title": row.title, "status": row.http_status}
