"""Identity: a caller's ``Context`` resolved into a ``Scope`` that storage can enforce.

A ``Context`` is what a caller hands in; it may be incomplete. ``resolve`` turns
it into a ``Scope`` or raises ``IncompleteIdentity``: there is no code path on
which a missing tenant or user widens what a caller sees.

Visibility rules, as data (rendered to SQL only by ``engram.store.predicate``):

* same tenant, always;
* the caller's own records (same user) in a scope the context names: ``user``,
  and ``project:<id>``, ``repo:<id>``, ``task:<id>``, ``session:<id>`` for the ids
  the context carries; an absent id never widens the view;
* bound to no agent, or to the context's agent (a context without an agent sees
  only agent-independent records);
* plus the tenant-wide ``global`` records, which only an administrative call writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engram import limits
from engram.errors import Forbidden, IncompleteIdentity, InvalidArgument

__all__ = [
    "GLOBAL",
    "SCOPE_KINDS",
    "USER",
    "Context",
    "Scope",
    "parse_scope",
    "resolve",
    "scope_kind",
]

GLOBAL = "global"
USER = "user"
SCOPE_KINDS = ("task", "session", "repo", "project", "user", "global")
_SCOPE_RE = re.compile(r"^(project|repo|task|session|user):(.+)$")


@dataclass(frozen=True, slots=True)
class Context:
    """Who is asking and for what: tenant and user are required, the rest narrow it.

    Construction never fails on missing fields, so that an incomplete context can
    reach the edge and be refused there with ``IncompleteIdentity``.
    """

    tenant_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    project_id: str | None = None
    repository_id: str | None = None
    task_id: str | None = None
    purpose: str | None = None


@dataclass(frozen=True, slots=True)
class Scope:
    """A resolved, complete identity and the exact set of scopes it may see."""

    tenant_id: str
    user_id: str
    agent_id: str | None
    project_id: str | None
    repository_id: str | None
    task_id: str | None
    session_id: str | None
    purpose: str | None

    @property
    def named_scopes(self) -> tuple[str, ...]:
        """The user's own scopes this context names, narrowest first."""
        pairs = (
            ("task", self.task_id),
            ("session", self.session_id),
            ("repo", self.repository_id),
            ("project", self.project_id),
        )
        return (*(f"{kind}:{ident}" for kind, ident in pairs if ident), USER)

    @property
    def visible_scopes(self) -> tuple[str, ...]:
        """Every scope value this caller may read, narrowest first."""
        return (*self.named_scopes, GLOBAL)

    def can_write(self, scope: str) -> bool:
        """A user context writes only its own named scopes, never ``global``."""
        return scope in self.named_scopes


def _clean(value: object, name: str, *, required: bool) -> str | None:
    """One context field: absent (None or blank) or a valid identifier.

    A blank required field is ``IncompleteIdentity``; anything else that is not a
    printable id of at most 200 characters without surrounding whitespace (so
    ``"u42\\n"`` is not a second ``"u42"``) or that starts with ':' is
    ``InvalidArgument``.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise IncompleteIdentity(
                f"context.{name} is required: Engram never answers for an unknown {name}"
            )
        return None
    checked = limits.identifier(value, f"context.{name}")
    if checked.startswith(":"):
        raise InvalidArgument(f"context.{name} must not start with ':'")
    return checked


def resolve(ctx: Context) -> Scope:
    """Turn a caller's context into an enforceable scope; raise if it is incomplete."""
    if not isinstance(ctx, Context):
        raise InvalidArgument(f"ctx must be an engram.Context, got {type(ctx).__name__}")
    return Scope(
        tenant_id=_clean(ctx.tenant_id, "tenant_id", required=True) or "",
        user_id=_clean(ctx.user_id, "user_id", required=True) or "",
        agent_id=_clean(ctx.agent_id, "agent_id", required=False),
        project_id=_clean(ctx.project_id, "project_id", required=False),
        repository_id=_clean(ctx.repository_id, "repository_id", required=False),
        task_id=_clean(ctx.task_id, "task_id", required=False),
        session_id=_clean(ctx.session_id, "session_id", required=False),
        purpose=_clean(ctx.purpose, "purpose", required=False),
    )


def scope_kind(scope: str) -> str:
    """The kind of a scope value: ``global``, ``user``, ``project``, ``repo``..."""
    return scope.split(":", 1)[0]


def parse_scope(value: object, owner: Scope) -> str:
    """Validate a scope a caller wants to write to and return its canonical form.

    ``user:<own id>`` is accepted as ``user``; anything naming another user, an id
    the context does not carry, or ``global`` is refused.
    """
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"scope must be a non-empty string, got {limits.shown(value)}")
    if value == GLOBAL:
        raise Forbidden("a user context cannot write global scope; use remember_global")
    if value == USER:
        return USER
    match = _SCOPE_RE.fullmatch(value)
    if match is None:
        raise InvalidArgument(
            f"scope {limits.shown(value)} must be one of: user, project:<id>, repo:<id>, "
            "task:<id>, session:<id>"
        )
    kind, ident = match.groups()
    if kind == "user":
        if ident != owner.user_id:
            raise Forbidden("a context may not write another user's scope")
        return USER
    if value not in owner.named_scopes:
        raise InvalidArgument(
            f"scope {limits.shown(value)} is not named by this context (set the matching "
            f"project_id / repository_id / task_id / session_id on the Context)"
        )
    return value
