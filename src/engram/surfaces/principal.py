"""Who a caller of a network surface is: decided by its credential, never by its request.

An ``Authenticator`` turns a bearer credential (an API key) into a ``Principal``:
the one tenant it acts in, whether it is an admin of that tenant, and which users
and agents it may act for (``None``: any). Surfaces build a ``Context`` from the
principal plus the user and agent the request names, and ``Principal.allows``
refuses a user or agent outside the principal's reach before the SDK is called.
Every surface (REST, MCP over HTTP, the dashboard through REST) asks ``allows``,
so the reach rules are these and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engram.errors import Forbidden

__all__ = ["Authenticator", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. ``key_id`` names the credential (never the secret)."""

    tenant_id: str
    key_id: str
    admin: bool = False
    users: frozenset[str] | None = None
    agents: frozenset[str] | None = None

    def allows(self, user_id: str | None, agent_id: str | None = None) -> None:
        """Raise ``Forbidden`` unless this principal may act for ``user_id`` and
        ``agent_id`` (a missing user is allowed here; the SDK reports it).

        A principal limited to some agents must name one of them: it is those
        agents, never the user's agent-less view (which would show, and change, the
        user's own memories every agent shares)."""
        if user_id is not None and self.users is not None and user_id not in self.users:
            raise Forbidden(f"key {self.key_id!r} may not act for user {user_id!r}")
        if self.agents is None:
            return
        if agent_id is None:
            raise Forbidden(f"key {self.key_id!r} acts only for agents {sorted(self.agents)}: "
                            "name one of them as the agent")  # fmt: skip
        if agent_id not in self.agents:
            raise Forbidden(f"key {self.key_id!r} may not act for agent {agent_id!r}")

    def require_admin(self, action: str) -> None:
        """Raise ``Forbidden`` unless this principal is its tenant's admin."""
        if not self.admin:
            raise Forbidden(f"{action} needs an admin key; key {self.key_id!r} is not one")

    def require_whole_tenant(self, action: str) -> None:
        """Raise ``Forbidden`` unless this principal is an admin that reaches every user
        and agent of its tenant (what a tenant-wide change needs: share grants, a
        consolidation of every user)."""
        self.require_admin(action)
        if self.users is not None or self.agents is not None:
            raise Forbidden(f"{action} acts for every user and agent of the tenant; key "
                            f"{self.key_id!r} is limited to some of them")  # fmt: skip


class Authenticator(Protocol):
    """Resolves a bearer credential; raises ``Forbidden`` for an unknown or revoked one."""

    def authenticate(self, credential: str) -> Principal:
        """The principal ``credential`` stands for."""
        ...
