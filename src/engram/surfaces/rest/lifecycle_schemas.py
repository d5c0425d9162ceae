"""Request bodies and queries of the lifecycle routes: consolidation, the sweep,
procedure outcomes, sharing, share grants and the export file.

Like ``schemas``: unknown fields are refused, JSON types are never coerced, and no
model has a ``tenant_id`` (the tenant is the API key's). The SDK checks meaning
(identifier rules, memory types, bounds) and its ``InvalidArgument`` is the 422.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engram.errors import IncompleteIdentity, InvalidArgument
from engram.scope import Context
from engram.surfaces.principal import Principal
from engram.surfaces.rest.schemas import (
    Bool,
    BudgetBody,
    Float,
    Identity,
    IdentityQuery,
    Moment,
    Str,
    Strict,
)

__all__ = [
    "MAX_SHARE_IDS",
    "ConsolidateBody",
    "ExportQuery",
    "GrantBody",
    "ImportQuery",
    "OutcomeBody",
    "RevokeQuery",
    "ShareBody",
    "SweepBody",
]

MAX_SHARE_IDS = 1_000  # the SDK's own bound (Engram.share)
_Id = Field(default=None, max_length=200)
_Agent = Field(max_length=200)


class ConsolidateBody(Strict):
    """``POST /v1/consolidate`` (admin): one user, or every user of the key's tenant
    when ``user_id`` is absent; ``now`` fixes the run's clock (default: now)."""

    user_id: Str | None = _Id
    now: Moment | None = None


class SweepBody(Strict):
    """``POST /v1/sweep`` (admin of the whole tenant): the key's tenant, always (never
    every tenant); ``now`` fixes the time the sweep deletes what is due at (default:
    now)."""

    now: Moment | None = None


class OutcomeBody(Identity):
    """``POST /v1/memories/{id}/outcome``: one success or failure of a procedure, with
    an optional reward in [-1, 1]."""

    success: Bool
    reward: Float | None = None


class ShareBody(Identity):
    """``POST /v1/share``: copy memories of ``agent_id`` (the sharing agent) to
    ``to_agent_id`` under a grant: the memories ``ids`` names, or what a recall of
    ``query`` selects (exactly one of the two; ``budget`` bounds the recall)."""

    ids: list[Str] | None = Field(default=None, min_length=1, max_length=MAX_SHARE_IDS)
    query: Str | None = None
    to_agent_id: Str = _Agent
    budget: BudgetBody | None = None

    def target(self) -> str | list[str]:
        """The SDK's ``memory_ids_or_query``; ``InvalidArgument`` unless exactly one
        of ``ids`` and ``query`` is given."""
        if (self.ids is None) == (self.query is None):
            raise InvalidArgument("name the memories to share in ids, or a query, not both")
        if self.query is not None:
            return self.query
        if self.budget is not None:
            raise InvalidArgument("budget bounds a share by query; ids name the memories")
        assert self.ids is not None
        return self.ids


class GrantBody(Strict):
    """``POST /v1/grants`` (admin): ``from_agent`` may share its memories of ``types``
    with ``to_agent``, inside the key's tenant."""

    from_agent: Str = _Agent
    to_agent: Str = _Agent
    types: list[Str] = Field(min_length=1, max_length=64)


class RevokeQuery(Strict):
    """``DELETE /v1/grants`` (admin): withdraw the pair's grants of ``type`` (repeat
    for several; absent: every type) and delete the copies made under them."""

    from_agent: Str = _Agent
    to_agent: Str = _Agent
    type: list[str] | None = None


class ExportQuery(IdentityQuery):
    """``GET /v1/export``: ``format=json`` (default) answers ``{"rows": [...]}``;
    ``format=jsonl`` streams the versioned export file (docs/export-format.md)."""

    format: Literal["json", "jsonl"] = "json"


class ImportQuery(Strict):
    """``POST /v1/import`` with a JSON Lines body (the export file): whom it imports
    for, as query parameters (the body is the file). ``rehome`` takes over the
    memories of another user of the key's tenant as this user's own. A JSON body
    carries its identity itself, so it takes none of these."""

    user_id: Str | None = _Id
    agent_id: Str | None = _Id
    session_id: Str | None = _Id
    project_id: Str | None = _Id
    repository_id: Str | None = _Id
    task_id: Str | None = _Id
    rehome: bool = False

    def named(self) -> bool:
        """Whether the query names anything at all."""
        return bool(self.model_fields_set)

    def context(self, caller: Principal) -> Context:
        """The importing context (``Identity.context``'s rules); the user is required."""
        if self.user_id is None:
            raise IncompleteIdentity("a JSON Lines import names its user in the query: "
                                     "POST /v1/import with the user_id parameter")  # fmt: skip
        return IdentityQuery(**self.fields("rehome")).context(caller)
