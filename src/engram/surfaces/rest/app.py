"""The app factory: ``create_app(mem, auth, settings)`` builds the FastAPI app.

The app holds one ``Engram`` (shared by every request; handlers are plain
functions FastAPI runs on its thread pool, so a slow recall never blocks the
event loop) and one ``Authenticator``. Around the routes: the body limit
(outermost, so an oversized body is refused before anything parses it) and the
problem handlers. Swagger UI and ReDoc are off (they load scripts from a CDN;
the server makes and invites no network calls); the schema is at
``/openapi.json``. The dashboard's static files are mounted at ``settings.ui_path``
(``/ui``; ``GET /ui`` redirects to ``/ui/``), outside the schema: they are a page
for people, served under the dashboard's own Content-Security-Policy.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from engram.engram import Engram
from engram.surfaces.dashboard import dashboard_app, redirect_to
from engram.surfaces.principal import Authenticator
from engram.surfaces.rest.limits import BodyLimit
from engram.surfaces.rest.problems import Problem, install
from engram.surfaces.rest.routes import ROUTERS
from engram.surfaces.rest.settings import RestSettings

__all__ = ["create_app"]

_VERSION = "1"


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The schema, with the ``Problem`` component every error response refers to."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes,
                             description=app.description)  # fmt: skip
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        definitions = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(definitions.pop("$defs", {}))
        components["Problem"] = definitions
        app.openapi_schema = schema
    return app.openapi_schema


def create_app(mem: Engram, auth: Authenticator, settings: RestSettings | None = None) -> FastAPI:
    """The REST API over ``mem``, authenticating callers with ``auth``."""
    chosen = settings or RestSettings()
    app = FastAPI(
        title="Engram",
        version=_VERSION,
        description="Governed long-term memory for AI agents. Every /v1 route takes "
        "`Authorization: Bearer <API key>`; the key decides the tenant.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.engram = mem
    app.state.authenticator = auth
    app.state.settings = chosen
    for router in ROUTERS:
        app.include_router(router)
    app.add_route(chosen.ui_path, redirect_to(chosen.ui_path + "/"), include_in_schema=False)
    app.mount(chosen.ui_path, dashboard_app(), name="dashboard")
    install(app)
    app.add_middleware(BodyLimit, settings=chosen)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app
