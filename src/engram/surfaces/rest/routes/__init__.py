"""The REST routes, one module per resource.

``ROUTERS`` is what the app factory includes, in order. A new resource (consolidate,
sweep, share, grants) is one module with an ``APIRouter`` and one line here.
"""

from __future__ import annotations

from fastapi import APIRouter

from engram.surfaces.rest.routes import (
    admin,
    changes,
    health,
    memories,
    people,
    recall,
    transfer,
    working,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    memories.router,
    changes.router,
    recall.router,
    transfer.router,
    working.router,
    admin.router,
    people.router,
)
