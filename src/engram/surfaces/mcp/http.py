"""The MCP server over streamable HTTP, behind bearer-key authentication.

``http_endpoint(mem, authenticator)`` is an ASGI endpoint: for every HTTP request
it reads ``Authorization: Bearer <key>``, asks the ``Authenticator`` for the
``Principal`` (off the event loop: a key store may read a file), resolves the
call's ``Context`` from it and the ``Engram-*`` headers
(``identity.context_for``), and only then hands the request to the SDK's
streamable HTTP transport. A missing or refused key is 401 with
``WWW-Authenticate: Bearer``; a user or agent outside the key's reach, or a
missing user, is the status of its row in ``surfaces.errors``; with a
``limiter`` (the REST app's), each authenticated request spends a token of its
key's bucket first, and a key past its rate limit is 429 with ``Retry-After``;
all as ``application/problem+json``. The principal's key id also becomes the SDK's
authenticated user, so a stateful session can only be resumed with the key that
opened it.

Mounting it in another ASGI app (the REST app at ``/mcp``)::

    endpoint = http_endpoint(mem, authenticator)
    app.router.add_route("/mcp", endpoint)        # any method; the SDK answers each
    # and in that app's lifespan:  async with endpoint.running(): yield

``create_http_app`` is the same endpoint as a standalone Starlette app (what
``engram mcp --transport http`` serves), whose lifespan runs the transport.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from engram.engram import Engram
from engram.errors import EngramError, Forbidden
from engram.surfaces.errors import PROTOCOL, outcome_for
from engram.surfaces.gate import RecallGate
from engram.surfaces.mcp.identity import SCOPE_KEY, FromRequest, context_for
from engram.surfaces.mcp.server import build_server
from engram.surfaces.principal import Authenticator
from engram.surfaces.rest.ratelimit import Limiter, RateLimited

__all__ = ["McpEndpoint", "create_http_app", "http_endpoint"]


class McpEndpoint:
    """The authenticated streamable HTTP endpoint of one MCP server."""

    def __init__(
        self,
        server: MCPServer,
        authenticator: Authenticator,
        *,
        host: str = "127.0.0.1",
        stateless: bool = True,
        limiter: Limiter | None = None,
    ) -> None:
        self.server = server
        self._authenticator = authenticator
        self._limiter = limiter
        self._host = host
        self._stateless = stateless
        self._transport = self._build()

    def _build(self) -> StreamableHTTPASGIApp:
        """A new SDK session manager (DNS-rebinding protection on loopback hosts) and its
        transport; the Starlette app the SDK returns is not used: this endpoint routes
        itself."""
        self.server.streamable_http_app(streamable_http_path="/", host=self._host,
                                        stateless_http=self._stateless)  # fmt: skip
        return StreamableHTTPASGIApp(self.server.session_manager)

    def running(self) -> AbstractAsyncContextManager[None]:
        """The transport's lifetime: enter it in the hosting app's lifespan. Each entry
        runs a fresh session manager (the SDK's runs once only), so an app whose
        lifespan runs again (a test client, then another) serves again."""
        return self._running()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        self._transport = self._build()
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._transport(scope, receive, send)
            return
        headers = Headers(scope=scope)
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            await _problem(send, 401, "Unauthorized", "send Authorization: Bearer <api key>")
            return
        try:
            principal = await anyio.to_thread.run_sync(
                self._authenticator.authenticate, credential.strip()
            )
        except Forbidden as exc:
            await _problem(send, 401, "Unauthorized", str(exc))
            return
        except EngramError as exc:  # a key store that cannot answer: Unavailable is a 503
            await _refused(send, exc)
            return
        except Exception as exc:  # an authenticator's bug: a 500 problem, as REST answers
            print(f"engram: the MCP authenticator failed: {type(exc).__name__}", file=sys.stderr)
            row = PROTOCOL[500]
            await _problem(send, 500, row.title, "the server failed; nothing was changed",
                           row.problem)  # fmt: skip
            return
        if self._limiter is not None:  # before the transport: a refused call does nothing
            try:
                await self._limiter.acquire(principal.key_id)
            except RateLimited as exc:
                row = PROTOCOL[429]
                await _problem(send, 429, row.title, str(exc), row.problem, exc.retry_after)
                return
        try:
            ctx = context_for(principal, headers)
        except EngramError as exc:
            await _refused(send, exc)
            return
        token = AccessToken(token=principal.key_id, client_id=principal.key_id, scopes=[])
        inner = {**scope, SCOPE_KEY: ctx, "user": AuthenticatedUser(token)}
        await self._transport(inner, receive, send)


async def _refused(send: Send, exc: EngramError) -> None:
    """The problem answer of ``exc``'s row in ``surfaces.errors``; a 503 says when to
    retry, as every REST 503 does."""
    row = outcome_for(exc)
    retry = 1 if row.http_status == 503 else None
    await _problem(send, row.http_status, row.title, str(exc), row.problem, retry)


async def _problem(
    send: Send,
    status: int,
    title: str,
    detail: str,
    problem: str | None = None,
    retry_after: int | None = None,
) -> None:
    """An ``application/problem+json`` response (RFC 9457), with ``Retry-After`` when
    ``retry_after`` is given."""
    body = json.dumps(
        {
            "type": f"urn:engram:problem:{problem}" if problem else "about:blank",
            "title": title,
            "status": status,
            "detail": detail,
        }
    ).encode()
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="engram"'))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_endpoint(
    mem: Engram,
    authenticator: Authenticator,
    *,
    host: str = "127.0.0.1",
    stateless: bool = True,
    limiter: Limiter | None = None,
    gate: RecallGate | None = None,
) -> McpEndpoint:
    """The authenticated MCP endpoint of ``mem``: identity from each request's key.

    ``host`` is where the hosting server listens (a loopback host turns on the SDK's
    DNS-rebinding protection); ``stateless`` answers each POST on its own (no
    session to resume, any worker can serve any request); ``limiter`` is the per-key
    rate limit (the REST app passes its own, so a key has one bucket for both), and
    ``gate`` the recall gate (the REST app's own: one queue for both surfaces)."""
    return McpEndpoint(build_server(mem, FromRequest(), gate), authenticator, host=host,
                       stateless=stateless, limiter=limiter)  # fmt: skip


def create_http_app(
    mem: Engram,
    authenticator: Authenticator,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    stateless: bool = True,
    limiter: Limiter | None = None,
) -> Starlette:
    """A Starlette app serving the authenticated MCP endpoint at ``path``; ``limiter``
    is its per-key rate limit (None: none)."""
    endpoint = http_endpoint(mem, authenticator, host=host, stateless=stateless,
                             limiter=limiter)  # fmt: skip

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with endpoint.running():
            yield

    return Starlette(routes=[Route(path, endpoint)], lifespan=lifespan)
