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

The MCP streamable HTTP endpoint is mounted at ``settings.mcp_path`` (``/mcp``)
when the ``mcp`` extra is installed: the same memory tools over the same
``Engram``, authenticated by the same ``Authenticator`` (each request's bearer
key; docs/mcp.md) and rate-limited by the same per-key buckets. Its transport
runs in the app's lifespan, so a server must run the lifespan (``engram serve``
does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import Route

from engram.engram import Engram
from engram.surfaces.dashboard import dashboard_app, redirect_to
from engram.surfaces.gate import RecallGate
from engram.surfaces.principal import Authenticator
from engram.surfaces.rest.limits import BodyLimit
from engram.surfaces.rest.problems import Problem, install, problems
from engram.surfaces.rest.ratelimit import Limiter, SharedBuckets, TokenBuckets
from engram.surfaces.rest.routes import ROUTERS
from engram.surfaces.rest.schemas import ImportBody
from engram.surfaces.rest.settings import RestSettings
from engram.working.redis_url import RedisTarget

if TYPE_CHECKING:
    from engram.surfaces.mcp.http import McpEndpoint

__all__ = ["create_app"]

_VERSION = "1"
_RATE_REDIS_TIMEOUT_S = 0.5  # a shared bucket Redis slower than this: per-process buckets


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The schema, with the ``Problem`` component every error response refers to."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes,
                             description=app.description)  # fmt: skip
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in (Problem, ImportBody):  # ImportBody: the import route parses its own body
            definitions = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(definitions.pop("$defs", {}))
            components[model.__name__] = definitions
        _declare_rate_limit(schema)
        _declare_unavailable(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _declare_rate_limit(schema: dict[str, Any]) -> None:
    """Declare the 429 (and its ``Retry-After``) on every route an API key calls: the
    rate limit sits in the authentication every ``/v1`` route shares."""
    declared = problems(429)[429]
    retry = {"Retry-After": {"description": "seconds until the key may call again",
                             "schema": {"type": "integer", "minimum": 1}}}  # fmt: skip
    for operations in schema.get("paths", {}).values():  # /v1 and /readyz alike
        for operation in operations.values():
            operation.setdefault("responses", {})["429"] = {**declared, "headers": retry}


def _declare_unavailable(schema: dict[str, Any]) -> None:
    """Declare the ``Retry-After`` every 503 problem carries (``problems._engram_error``)."""
    retry = {"Retry-After": {"description": "seconds to wait before sending it again "
                             "(nothing was written)", "schema": {"type": "integer",
                             "minimum": 1}}}  # fmt: skip
    for operations in schema.get("paths", {}).values():  # /v1 and /readyz alike
        for operation in operations.values():
            unavailable = operation.get("responses", {}).get("503")
            if unavailable is not None:
                unavailable["headers"] = retry


def _limiter(settings: RestSettings) -> Limiter | None:
    """The rate limit: none, buckets in this process, or buckets shared through Redis."""
    if settings.rate_limit <= 0:
        return None
    if settings.rate_limit_redis is None:
        return TokenBuckets(settings.rate_limit, settings.rate_burst)
    client = RedisTarget.parse(settings.rate_limit_redis).client(_RATE_REDIS_TIMEOUT_S)
    return SharedBuckets(client, settings.rate_limit, settings.rate_burst)


def _gate(settings: RestSettings) -> RecallGate | None:
    """The recall gate of this process (None: every recall starts at once)."""
    if settings.recall_concurrency == 0:
        return None
    return RecallGate(settings.recall_concurrency, settings.recall_queue_seconds)


def _mcp_endpoint(
    mem: Engram, auth: Authenticator, settings: RestSettings, limiter: Limiter | None,
    gate: RecallGate | None,
) -> McpEndpoint | None:  # fmt: skip
    """The MCP endpoint to mount, or None (no ``mcp_path``, or the extra is absent); it
    spends the same per-key buckets as ``/v1`` and queues its recalls in the same gate."""
    if settings.mcp_path is None:
        return None
    try:
        from engram.surfaces.mcp.http import http_endpoint
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        return None
    return http_endpoint(mem, auth, host=settings.host, limiter=limiter, gate=gate)


def create_app(mem: Engram, auth: Authenticator, settings: RestSettings | None = None) -> FastAPI:
    """The REST API over ``mem``, authenticating callers with ``auth``."""
    chosen = settings or RestSettings()
    limiter = _limiter(chosen)
    gate = _gate(chosen)
    endpoint = _mcp_endpoint(mem, auth, chosen, limiter, gate)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if endpoint is None:
            yield
            return
        async with endpoint.running():
            yield

    app = FastAPI(
        title="Engram",
        version=_VERSION,
        description="Governed long-term memory for AI agents. Every /v1 route takes "
        "`Authorization: Bearer <API key>`; the key decides the tenant.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.engram = mem
    app.state.authenticator = auth
    app.state.settings = chosen
    app.state.limiter = limiter
    app.state.recall_gate = gate
    app.state.mcp = endpoint
    for router in ROUTERS:
        app.include_router(router)
    app.add_route(chosen.ui_path, redirect_to(chosen.ui_path + "/"), include_in_schema=False)
    app.mount(chosen.ui_path, dashboard_app(), name="dashboard")
    if endpoint is not None and chosen.mcp_path is not None:
        app.router.routes.append(Route(chosen.mcp_path, endpoint, include_in_schema=False))
    install(app)
    app.add_middleware(BodyLimit, settings=chosen)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app
