"""Which agent a new memory belongs to: the user's, or the writing agent's own.

What the user states about themselves (a preference, a profile fact, an
explicit constraint or rule, with ``explicit_*`` authority and not ``private``)
belongs to the user: it is written with no agent, so every agent of theirs sees
it and a later statement through another agent updates the same slot. An
agent's own episodes, inferences, task state and anything private stay with that
agent. ``remember(agent_scope="user" | "agent")`` overrides either way.
"""

from __future__ import annotations

from engram.errors import InvalidArgument
from engram.types import Authority, Proposal

__all__ = ["USER_STATED_TYPES", "owning_agent"]

USER_STATED_TYPES = frozenset({"preference", "profile", "constraint", "rule"})
_STATED = frozenset({Authority.EXPLICIT_USER, Authority.EXPLICIT_ADMIN})


def _belongs_to_user(proposal: Proposal) -> bool:
    if proposal.agent_scope is not None:
        return proposal.agent_scope == "user"
    stated = proposal.type in USER_STATED_TYPES and proposal.authority in _STATED
    return stated and not proposal.private


def owning_agent(agent_id: str | None, proposal: Proposal) -> str | None:
    """The agent ``proposal`` belongs to, written from a context with ``agent_id``
    (None: the user's own)."""
    if not agent_id:
        if proposal.agent_scope == "agent":
            raise InvalidArgument("agent_scope='agent' needs a context with an agent_id")
        return None
    return None if _belongs_to_user(proposal) else agent_id
