"""Request bodies and query parameters: pydantic models that forbid unknown fields.

They check shape and JSON types only, strictly (``"0.5"`` is not a number,
``1`` is not a boolean, a time is an ISO 8601 string with an offset); the SDK
checks meaning (identifier rules, enum values, bounds) and its
``InvalidArgument`` is the 422. A model passes on only the fields the caller
set (``fields()``), so every default is the SDK's own. No model has a
``tenant_id``: the tenant is the API key's (``Identity.context``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic import Strict as StrictType

from engram.config import Budget
from engram.scope import Context
from engram.surfaces.principal import Principal
from engram.types import Authority, Retention, Sensitivity, SourceKind, Turn

__all__ = [
    "AuditQuery",
    "BatchBody",
    "BudgetBody",
    "ChangeBody",
    "CorrectBody",
    "GlobalBody",
    "IdentityQuery",
    "ImportBody",
    "ListQuery",
    "ObserveBody",
    "RecallBody",
    "RememberBody",
    "RememberFields",
    "RetractBody",
    "SourceBody",
    "TurnBody",
    "UsersQuery",
    "WorkingQuery",
    "WorkingSetBody",
]

_Id = Field(default=None, max_length=200)


def _iso_text(value: object) -> object:
    """A time must arrive as text (a number is not read as seconds since 1970)."""
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 date-time string with a UTC offset")
    return value


Str = Annotated[str, StrictType()]
Int = Annotated[int, StrictType()]
Float = Annotated[float, StrictType()]
Bool = Annotated[bool, StrictType()]
Moment = Annotated[AwareDatetime, BeforeValidator(_iso_text)]


class Strict(BaseModel):
    """Unknown fields are refused; scalar fields are never coerced between JSON types."""

    model_config = ConfigDict(extra="forbid")

    def fields(self, *skip: str) -> dict[str, Any]:
        """The fields the caller set, as SDK keyword arguments (nested models as dicts)."""
        return {name: value for name, value in self.model_dump(exclude_unset=True).items()
                if name not in skip}  # fmt: skip


class Identity(Strict):
    """Whom a request acts for, within the key's tenant: a user, and optionally an
    agent and the session, project, repository and task that narrow the view."""

    user_id: Str = Field(max_length=200)
    agent_id: Str | None = _Id
    session_id: Str | None = _Id
    project_id: Str | None = _Id
    repository_id: Str | None = _Id
    task_id: Str | None = _Id

    def context(self, caller: Principal, purpose: str | None = None) -> Context:
        """The SDK context: the key's tenant plus these ids; ``Forbidden`` when the
        key may not act for this user or agent (``Principal.allows``: a key limited to
        some agents must name one)."""
        caller.allows(self.user_id, self.agent_id)
        return Context(
            tenant_id=caller.tenant_id, user_id=self.user_id, agent_id=self.agent_id,
            session_id=self.session_id, project_id=self.project_id,
            repository_id=self.repository_id, task_id=self.task_id, purpose=purpose,
        )  # fmt: skip


IDENTITY = frozenset(Identity.model_fields)


class IdentityQuery(Identity):
    """The identity as query parameters (GET and DELETE): text, so numbers parse."""

    model_config = ConfigDict(extra="forbid")


class SourceBody(Strict):
    """Provenance: ``{"kind": "tool", "ref": "run-17", "derived_from": []}``."""

    kind: SourceKind = SourceKind.CONVERSATION
    ref: Str | None = None
    derived_from: list[Str] = Field(default_factory=list, max_length=256)


class RememberFields(Strict):
    """One memory as ``remember`` takes it (docs/contract.md section 7)."""

    content: Str
    type: Str | None = None
    scope: Str | None = None
    key: Str | None = None
    value: Any = None
    authority: Authority | None = None
    confidence: Float | None = None
    valid_from: Moment | None = None
    valid_to: Moment | None = None
    observed_at: Moment | None = None
    source: SourceBody | None = None
    sensitivity: Sensitivity | None = None
    purpose: Str | None = None
    consent_basis: Str | None = None
    retention: Retention | None = None
    importance: Float | None = None
    private: Bool | None = None
    agent_scope: Literal["user", "agent"] | None = None

    def sdk_fields(self) -> dict[str, Any]:
        """The memory's set fields as ``remember`` keyword arguments (no ``content``,
        no identity); a null drops to the SDK's default."""
        return {name: value for name, value in self.fields("content", *IDENTITY).items()
                if value is not None or name == "value"}  # fmt: skip


class RememberBody(Identity, RememberFields):
    """``POST /v1/memories``: the identity and one memory."""


class GlobalBody(RememberFields):
    """``POST /v1/memories:global`` (admin): a tenant-wide memory, no user."""


class BatchBody(Identity):
    """``POST /v1/memories:batch``: many memories of one identity, in order."""

    items: list[RememberFields] = Field(min_length=1)


class TurnBody(Strict):
    """One conversation turn."""

    role: Str
    text: Str
    time: Moment | None = None
    ref: Str | None = None

    def turn(self) -> Turn:
        """The SDK's ``Turn``."""
        return Turn(role=self.role, text=self.text, time=self.time, ref=self.ref)


class ObserveBody(Identity):
    """``POST /v1/observe``: conversation turns for the rule-based proposer."""

    turns: list[TurnBody]


class BudgetBody(Strict):
    """How much memory one recall may put in a prompt (``engram.Budget``)."""

    max_items: Int = 6
    max_tokens: Int = 700
    per_type: dict[str, Int] | None = None
    layout: Literal["full", "compact"] = "full"

    def budget(self) -> Budget:
        """The SDK's ``Budget``."""
        return Budget(self.max_items, self.max_tokens, self.per_type, self.layout)


class RecallBody(Identity):
    """``POST /v1/recall``."""

    query: Str
    intent: Str | None = None
    budget: BudgetBody | None = None
    as_of: Moment | None = None
    purpose: Str | None = None


class ChangeBody(Identity):
    """``POST /v1/memories/{id}/expire``: only whom it acts for."""


class CorrectBody(Identity):
    """``POST /v1/memories/{id}/correct``: the corrected content and value."""

    content: Str
    value: Any = None


class RetractBody(Identity):
    """``POST /v1/memories/{id}/retract``: why it was wrong."""

    reason: Str | None = None


class ImportBody(Identity):
    """``POST /v1/import``: rows as ``GET /v1/export`` returns them."""

    rows: list[dict[str, Any]]


class ListQuery(IdentityQuery):
    """``GET /v1/memories``: a page of visible memories, newest first. ``status``
    repeats for several; ``all`` lists every status; the default is ``active``."""

    type: Str | None = None
    status: list[str] | None = None
    limit: int = 100
    offset: int = 0


class UsersQuery(Strict):
    """``GET /v1/users``: at most ``limit`` users, in id order."""

    limit: int = Field(default=1000, ge=1, le=10_000)


class AuditQuery(Strict):
    """``GET /v1/audit``: one user's audit entries, the newest ``limit``."""

    user_id: Str = Field(max_length=200)
    limit: int = Field(default=1000, ge=1, le=10_000)


class WorkingQuery(IdentityQuery):
    """A working-memory scope: the task, else the session, or ``kind`` chooses."""

    kind: Literal["session", "task"] | None = None


class WorkingSetBody(Identity):
    """``PUT /v1/working/{key}``: a JSON value and its time to live in seconds."""

    kind: Literal["session", "task"] | None = None
    value: Any
    ttl_seconds: Float | None = None
