"""THE scope predicate: the only code that writes ownership conditions.

Every storage read that can return a record filters with one of the values
below, rendered here and nowhere else:

* ``Visibility``: what a resolved ``Scope`` may read (docs/contract.md principle 1);
* ``Subject``: every record of one user of one tenant, for administrative
  export and erasure;
* ``Tenant``: every record of a tenant, for an administrator following derived
  copies of erased records across users;
* ``OwnerSlot``: the single (tenant, user, agent, scope) slot a write lands in,
  used to find the versions a new write confirms, supersedes or contests;
* ``Owners``: rows of a few owners of one tenant that are not records (the
  tombstones a write meets: its user's and the erased subjects').

Recall traces are read under ``Visibility.trace_sql``: only by a caller with the
very visibility the trace was recorded under.

Storage encodes "no user" (tenant-wide ``global`` records) and "any agent" as the
empty string, so each condition is an equality or a fixed-arity ``IN`` over
indexed columns, with constant SQL text and bound parameters. The same rules are
rendered for the in-memory vector and lexical partitions (``Visibility.row_mask``,
``Visibility.admits``), so vector and lexical search are scoped before anything
is scored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.scope import GLOBAL, USER, Scope
from engram.store.dialect import SQLITE, Dialect

__all__ = [
    "NO_AGENT",
    "NO_USER",
    "OwnerSlot",
    "Owners",
    "Subject",
    "Tenant",
    "Visibility",
]

NO_USER = ""
NO_AGENT = ""
_NAMED_SLOTS = 4  # task, session, repo, project


@dataclass(frozen=True, slots=True)
class Visibility:
    """The records a resolved scope may read."""

    tenant_id: str
    user_id: str
    agent_id: str
    named: tuple[str | None, ...]

    @classmethod
    def of(cls, scope: Scope) -> Visibility:
        """The visibility of a resolved scope."""
        named: list[str | None] = [s for s in scope.named_scopes if s != USER]
        named += [None] * (_NAMED_SLOTS - len(named))
        return cls(scope.tenant_id, scope.user_id, scope.agent_id or NO_AGENT, tuple(named))

    def sql(self, alias: str = "r", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """A boolean SQL condition over ``alias`` and its named parameters."""
        (own, params), (tenant_wide, _) = self.branches(alias, dialect)
        return f"({own} OR {tenant_wide})", params

    def branches(
        self, alias: str = "r", dialect: Dialect = SQLITE
    ) -> tuple[tuple[str, dict[str, Any]], ...]:
        """The two disjoint halves of ``sql`` (own records, tenant-wide records).

        Queries that need index order (newest first) run one branch per
        ``UNION ALL`` arm, because an ``IN`` over ``user_id`` defeats the index order.
        """
        a, p = alias, dialect.param
        named = ", ".join(p(f"vis_s{i}") for i in range(_NAMED_SLOTS))
        own = (
            f"({a}.tenant_id = {p('vis_tenant')} AND {a}.user_id = {p('vis_user')}"
            f" AND {a}.scope IN ('{USER}', {named})"
            f" AND {a}.agent_id IN ('', {p('vis_agent')}))"
        )
        tenant_wide = (
            f"({a}.tenant_id = {p('vis_tenant')} AND {a}.user_id = ''"
            f" AND {a}.scope = '{GLOBAL}' AND {a}.agent_id = '')"
        )
        params: dict[str, Any] = {
            "vis_tenant": self.tenant_id,
            "vis_user": self.user_id,
            "vis_agent": self.agent_id,
        }
        params.update({f"vis_s{i}": value for i, value in enumerate(self.named)})
        return (own, params), (tenant_wide, params)

    def admits(self, tenant_id: str, user_id: str, scope: str, agent_id: str) -> bool:
        """The same rule as ``sql`` for one row's owner columns, in their stored form
        (``NO_USER`` / ``NO_AGENT`` for none): for rows already in memory."""
        if tenant_id != self.tenant_id:
            return False
        own = (
            user_id == self.user_id
            and (scope == USER or scope in self.named)
            and agent_id in (NO_AGENT, self.agent_id)
        )
        return own or (user_id == NO_USER and scope == GLOBAL and agent_id == NO_AGENT)

    def trace_key(self) -> str:
        """This visibility's agent and named scopes as canonical text, stored with each
        trace recorded under it (tenant and user have their own columns)."""
        return json.dumps([self.agent_id, sorted(s for s in self.named if s)])

    def trace_sql(self, alias: str = "t", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """Traces recorded under exactly this visibility.

        A trace names the ids its recall saw (selected, rejected, merged), so only a
        caller who sees what that recall saw may read it: the same tenant, user,
        agent and named scopes. Another agent or scope of the same user gets none.
        """
        a, p = alias, dialect.param
        text = (
            f"({a}.tenant_id = {p('trv_tenant')} AND {a}.user_id = {p('trv_user')}"
            f" AND {a}.visibility = {p('trv_key')})"
        )
        key = self.trace_key()
        return text, {"trv_tenant": self.tenant_id, "trv_user": self.user_id, "trv_key": key}

    def reads_trace(self, tenant_id: str, user_id: str, key: str) -> bool:
        """The rule of ``trace_sql`` for a trace still in memory."""
        return (tenant_id, user_id, key) == (self.tenant_id, self.user_id, self.trace_key())

    @property
    def allowed_scopes(self) -> frozenset[str]:
        """Scope values this caller may read."""
        return frozenset({USER, GLOBAL, *(s for s in self.named if s)})

    def row_mask(
        self,
        vocab: Mapping[str, int],
        users: NDArray[np.int32],
        scopes: NDArray[np.int32],
        agents: NDArray[np.int32],
    ) -> NDArray[np.bool_]:
        """The same rule as ``sql`` over the integer-coded columns of an in-memory
        partition of one tenant (``vocab`` maps each string to its code)."""

        def code(value: str) -> int:
            return vocab.get(value, -1)

        own_scopes = [code(USER), *(code(s) for s in self.named if s)]
        no_agent = agents == code(NO_AGENT)
        own = (
            (users == code(self.user_id))
            & np.isin(scopes, own_scopes)
            & (no_agent | (agents == code(self.agent_id)))
        )
        tenant_wide = (users == code(NO_USER)) & (scopes == code(GLOBAL)) & no_agent
        result: NDArray[np.bool_] = own | tenant_wide
        return result

    @property
    def partition(self) -> Subject:
        """The (tenant, user) partition whose rows this visibility selects from."""
        return Subject(self.tenant_id, self.user_id)


@dataclass(frozen=True, slots=True)
class Subject:
    """Every record of one user of one tenant (all scopes and agents).

    Used by administrative export and erasure, and, together with the tenant's
    global records, to load an in-memory vector partition that ``Visibility``
    then narrows.
    """

    tenant_id: str
    user_id: str

    @classmethod
    def of(cls, tenant_id: str, user_id: str | None) -> Subject:
        """The subject of a record's owner (``user_id`` None: the tenant's global records)."""
        return cls(tenant_id, user_id or NO_USER)

    def sql(self, alias: str = "r", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """The user's own records only (tenant-wide records excluded)."""
        p = dialect.param
        text = f"({alias}.tenant_id = {p('subj_tenant')} AND {alias}.user_id = {p('subj_user')})"
        return text, {"subj_tenant": self.tenant_id, "subj_user": self.user_id}

    def partition_sql(
        self, alias: str = "r", dialect: Dialect = SQLITE
    ) -> tuple[str, dict[str, Any]]:
        """The user's records plus the tenant's global ones: a vector partition."""
        p = dialect.param
        text = (
            f"({alias}.tenant_id = {p('subj_tenant')}"
            f" AND {alias}.user_id IN ({p('subj_user')}, ''))"
        )
        return text, {"subj_tenant": self.tenant_id, "subj_user": self.user_id}


@dataclass(frozen=True, slots=True)
class OwnerSlot:
    """Where one write lands: versions here are confirmed, superseded or contested."""

    tenant_id: str
    user_id: str
    agent_id: str
    scope: str
    writer_agent: str = NO_AGENT

    @classmethod
    def of(
        cls, tenant_id: str, user_id: str | None, agent_id: str | None, scope: str,
        writer_agent: str | None = None,
    ) -> OwnerSlot:  # fmt: skip
        """The slot of an owner given as domain values (None: no user, the user's own)."""
        return cls(tenant_id, user_id or NO_USER, agent_id or NO_AGENT, scope,
                   writer_agent or NO_AGENT)  # fmt: skip

    @property
    def visibility(self) -> Visibility:
        """What the writer of this slot reads: its tenant, user and agent, with the
        slot's scope named. ``Store.candidates`` takes it with ``SlotProbe``s, whose
        own condition (``key_sql``) is what selects their rows."""
        named = (self.scope, *([None] * (_NAMED_SLOTS - 1)))
        return Visibility(self.tenant_id, self.user_id, self.writer_agent or self.agent_id, named)

    def sql(self, alias: str = "r", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """Exactly this slot."""
        p = dialect.param
        return self._render(alias, f"{alias}.agent_id = {p('slot_agent')}", dialect)

    def key_sql(self, alias: str = "r", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """The versions (and duplicates) a write to this slot meets: the slot, the
        user's own (agent-independent) records of the scope and the writing agent's.
        So an agent's inference meets what the user stated, and what the user states
        through an agent replaces what that agent held; never another agent's
        memories, whose ids the writer may not learn."""
        p = dialect.param
        agent = f"{alias}.agent_id IN ('', {p('slot_agent')}, {p('slot_writer')})"
        return self._render(alias, agent, dialect)

    def _render(self, alias: str, agent: str, dialect: Dialect) -> tuple[str, dict[str, Any]]:
        p = dialect.param
        text = (
            f"({alias}.tenant_id = {p('slot_tenant')} AND {alias}.user_id = {p('slot_user')}"
            f" AND {agent} AND {alias}.scope = {p('slot_scope')})"
        )
        params = {
            "slot_tenant": self.tenant_id,
            "slot_user": self.user_id,
            "slot_agent": self.agent_id,
            "slot_scope": self.scope,
            "slot_writer": self.writer_agent,
        }
        return text, params


@dataclass(frozen=True, slots=True)
class Tenant:
    """Every record of one tenant: administrative paths only (erasure follow-up)."""

    tenant_id: str

    def sql(self, alias: str = "r", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """The tenant's records."""
        text = f"({alias}.tenant_id = {dialect.param('ten_tenant')})"
        return text, {"ten_tenant": self.tenant_id}


@dataclass(frozen=True, slots=True)
class Owners:
    """Rows of some owners of one tenant (``user_ids`` in their stored form:
    ``NO_USER`` for tenant-wide, ``tombstones.ERASED`` for erased subjects)."""

    tenant_id: str
    user_ids: tuple[str, ...]

    def sql(self, alias: str = "t", dialect: Dialect = SQLITE) -> tuple[str, dict[str, Any]]:
        """The rows of any of the owners."""
        users = dialect.member(f"{alias}.user_id", "own_users")
        text = f"({alias}.tenant_id = {dialect.param('own_tenant')} AND {users})"
        return text, {"own_tenant": self.tenant_id, "own_users": dialect.bound_list(self.user_ids)}
