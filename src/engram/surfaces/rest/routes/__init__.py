"""The REST routes, one module per resource.

``ROUTERS`` is what the app factory includes, in order. A new resource is one module
with an ``APIRouter`` and one line here.
"""

from __future__ import annotations

from fastapi import APIRouter

from engram.surfaces.rest.routes import (
    admin,
    changes,
    consolidate,
    grants,
    health,
    memories,
    outcomes,
    people,
    recall,
    share,
    sweep,
    transfer,
    working,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    memories.router,
    changes.router,
    outcomes.router,
    recall.router,
    transfer.router,
    working.router,
    share.router,
    grants.router,
    consolidate.router,
    sweep.router,
    admin.router,
    people.router,
)
