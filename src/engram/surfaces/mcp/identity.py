"""Who an MCP tool call acts for: the server's configuration or the caller's key, never
the tool's arguments.

An ``Identity`` answers, for one call, the ``engram.Context`` the SDK is called
with. ``Fixed`` is the identity a stdio server is started with (``engram mcp
--tenant T --user U``). ``FromRequest`` reads the context that the HTTP endpoint
(``surfaces.mcp.http``) resolved from the request's bearer key and put in the
ASGI scope; a call that reached the tools without one is refused.

Over HTTP the tenant is the key's. The user is the ``Engram-User`` header, or the
key's only user when its allow-list names exactly one; the agent likewise
(``Engram-Agent``, or the key's only agent); scope ids come from
``Engram-Session``, ``Engram-Project``, ``Engram-Repository`` and ``Engram-Task``.
Headers are connection configuration (set once in the client's config), checked
against the key by ``Principal.allows`` before any tool runs (a key limited to
several agents must name one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from engram.errors import Forbidden, IncompleteIdentity
from engram.scope import Context
from engram.surfaces.principal import Principal

__all__ = ["HEADERS", "SCOPE_KEY", "Fixed", "FromRequest", "Identity", "context_for"]

SCOPE_KEY = "engram.context"  # where the HTTP endpoint leaves the resolved Context

# Context field -> request header (lower case, as ASGI carries them)
HEADERS: Mapping[str, str] = {
    "user_id": "engram-user",
    "agent_id": "engram-agent",
    "session_id": "engram-session",
    "project_id": "engram-project",
    "repository_id": "engram-repository",
    "task_id": "engram-task",
}


class Identity(Protocol):
    """Resolves the context of one call from the transport's request (an HTTP
    ``starlette.requests.Request``, or None in process and over stdio)."""

    def context(self, request: object | None) -> Context:
        """The context this call acts under; ``Forbidden`` when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class Fixed:
    """One identity for every call: the server's configuration."""

    ctx: Context

    def context(self, request: object | None) -> Context:
        """Always the configured context."""
        return self.ctx


@dataclass(frozen=True, slots=True)
class FromRequest:
    """The context the HTTP endpoint resolved from the request's key."""

    def context(self, request: object | None) -> Context:
        """The request's context, or ``Forbidden`` for a call without one."""
        scope = getattr(request, "scope", None)
        ctx = scope.get(SCOPE_KEY) if isinstance(scope, Mapping) else None
        if not isinstance(ctx, Context):
            raise Forbidden("this call carries no authenticated identity")
        return ctx


def context_for(principal: Principal, headers: Mapping[str, str]) -> Context:
    """The context ``principal`` acts under for a request with ``headers`` (lower-case
    names): its tenant, the named (or its only) user, the named agent and scopes."""
    named = {field: headers.get(header, "").strip() or None for field, header in HEADERS.items()}
    for field, allowed in (("user_id", principal.users), ("agent_id", principal.agents)):
        if named[field] is None and allowed is not None and len(allowed) == 1:
            named[field] = next(iter(allowed))  # the key's only user (agent) is the default
    if named["user_id"] is None:
        raise IncompleteIdentity(
            f"key {principal.key_id!r} may act for more than one user: name the user with the "
            "Engram-User header"
        )
    principal.allows(named["user_id"], named["agent_id"])
    return Context(tenant_id=principal.tenant_id, **named)
