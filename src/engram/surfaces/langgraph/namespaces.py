"""How LangGraph namespaces map onto Engram's identity and scopes.

A namespace never decides who is asking. The store is opened for one tenant and
either one fixed user (``user_id``: every namespace is a folder of that user's) or
a fixed set of users (``users``: the label at position ``user_at`` names which
one, and a label outside the set is ``Forbidden``). The agent and the named
scopes (project, repository, task, session) come from the constructor too, as
in an Engram ``Context``.

Inside a namespace, a label written as an Engram scope (``project:<id>``,
``repo:<id>``, ``task:<id>``, ``session:<id>``) places the item in that scope;
it must be one the store was opened with (a store names at most one of each
kind, as a ``Context`` does), and a namespace holds at most one. Any other label
is a folder name. Without a scope label an item lives in the ``user`` scope.

An item is stored under an Engram key derived from its whole namespace and key
(``lg:`` and a SHA-256), so equal LangGraph keys in different namespaces never
share a version chain. The namespace itself travels in the record's value, less
the user label, which the record's ``user_id`` already carries.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langgraph.store.base import InvalidNamespaceError, MatchCondition

from engram import limits
from engram.errors import Forbidden, InvalidArgument
from engram.scope import USER, Context, resolve

__all__ = ["Identity", "InvalidNamespace", "Placement", "engram_key", "matches"]

_SCOPE_LABEL = re.compile(r"^(project|repo|task|session):(.+)$")
_WILDCARD = "*"


class InvalidNamespace(InvalidArgument, InvalidNamespaceError):
    """A namespace Engram cannot place: caught as LangGraph's ``InvalidNamespaceError``
    and as Engram's ``InvalidArgument`` alike."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one namespace lives: its user, its Engram scope, the labels stored."""

    user_id: str
    scope: str
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the store acts for: one tenant, one user or a set of users, an agent and
    the named scopes it may place items in."""

    tenant_id: str
    user_id: str | None = None
    users: frozenset[str] | None = None
    user_at: int = 0
    agent_id: str | None = None
    project_id: str | None = None
    repository_id: str | None = None
    task_id: str | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        """Refuse an identity that could not be resolved for every user it names."""
        if (self.user_id is None) == (self.users is None):
            raise InvalidArgument("give exactly one of user_id (one user) or users (a set)")
        if self.users is not None and not self.users:
            raise InvalidArgument("users must name at least one user")
        if isinstance(self.user_at, bool) or not isinstance(self.user_at, int):
            raise InvalidArgument("user_at must be a non-negative integer")
        if not 0 <= self.user_at < 64:
            raise InvalidArgument("user_at must be between 0 and 63")
        for user in self.all_users:
            resolve(self.context(user))  # raises on a malformed id of any field

    @classmethod
    def of(cls, tenant_id: str, *, user_id: str | None = None,
           users: Iterable[str] | None = None, **fields: object) -> Identity:  # fmt: skip
        """An identity from constructor arguments (``users`` any iterable of ids)."""
        if isinstance(users, str):
            raise InvalidArgument("users must be a collection of user ids, not one string")
        chosen = None if users is None else frozenset(users)
        return cls(tenant_id, user_id, chosen, **fields)  # type: ignore[arg-type]

    @property
    def all_users(self) -> tuple[str, ...]:
        """Every user this store may act for, sorted (the order locks are taken in)."""
        return (self.user_id,) if self.user_id is not None else tuple(sorted(self.users or ()))

    @property
    def scope_labels(self) -> frozenset[str]:
        """The scope labels a namespace may carry: the store's named scopes."""
        pairs = (("project", self.project_id), ("repo", self.repository_id),
                 ("task", self.task_id), ("session", self.session_id))  # fmt: skip
        return frozenset(f"{kind}:{ident}" for kind, ident in pairs if ident)

    def context(self, user_id: str) -> Context:
        """The Engram context every call for ``user_id`` runs under."""
        return Context(tenant_id=self.tenant_id, user_id=user_id, agent_id=self.agent_id,
                       session_id=self.session_id, project_id=self.project_id,
                       repository_id=self.repository_id, task_id=self.task_id)  # fmt: skip

    def place(self, namespace: Sequence[str]) -> Placement:
        """The user and scope of a namespace an item is put in or read from."""
        namespace = tuple(namespace)
        if self.user_id is not None:
            return Placement(self.user_id, self._scope(namespace), namespace)
        if len(namespace) <= self.user_at:
            raise InvalidNamespace(
                f"namespace {limits.shown(namespace)} has no user label at position "
                f"{self.user_at}; this store reads the user from there"
            )
        user = self._allowed(namespace[self.user_at])
        path = namespace[: self.user_at] + namespace[self.user_at + 1 :]
        return Placement(user, self._scope(path), path)

    def namespace(self, user_id: str, path: Sequence[str]) -> tuple[str, ...]:
        """The LangGraph namespace of stored labels ``path`` owned by ``user_id``."""
        path = tuple(path)
        if self.user_id is not None:
            return path
        return (*path[: self.user_at], user_id, *path[self.user_at :])

    def users_for(self, conditions: Sequence[MatchCondition]) -> tuple[str, ...]:
        """The users a read with these conditions can reach: the one a prefix names
        at ``user_at`` (``Forbidden`` outside the set), else every user."""
        if self.user_id is not None:
            return (self.user_id,)
        for condition in conditions:
            path = condition.path
            if condition.match_type == "prefix" and len(path) > self.user_at:
                label = path[self.user_at]
                if label != _WILDCARD:
                    return (self._allowed(label),)
        return self.all_users

    def _allowed(self, label: str) -> str:
        assert self.users is not None
        if label not in self.users:
            raise Forbidden(f"this store does not act for user {limits.shown(label)}")
        return label

    def _scope(self, path: tuple[str, ...]) -> str:
        """The Engram scope the labels name: ``user`` unless one is a scope label."""
        named = [label for label in path if _SCOPE_LABEL.fullmatch(label)]
        if not named:
            return USER
        if len(named) > 1:
            raise InvalidNamespace(f"namespace names {len(named)} scopes; at most one is allowed")
        if named[0] not in self.scope_labels:
            opened = ", ".join(sorted(self.scope_labels)) or "none"
            raise InvalidNamespace(
                f"namespace label {limits.shown(named[0])} names a scope this store was not "
                f"opened for (its scopes: {opened}); pass the id to EngramStore"
            )
        return named[0]


def engram_key(namespace: Sequence[str], key: str) -> str:
    """The Engram key of an item: constant length, one per (namespace, key)."""
    text = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return "lg:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's namespace match: a prefix or suffix, ``*`` matching any label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidArgument(f"match_type must be 'prefix' or 'suffix', got "
                              f"{limits.shown(condition.match_type)}")  # fmt: skip
    return all(want in (_WILDCARD, label) for label, want in pairs)
