"""The typed results of the MCP tools: pydantic models the SDK turns into output schemas.

Each model is built from an SDK value (``Record``, ``WriteResult``,
``RecallResult``, ``ForgetReceipt``) by a ``of`` class method, so the tools stay
one line of translation each. Times are ISO 8601 strings; enums are their values.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from engram.lifecycle.forget import ForgetReceipt
from engram.recall.model import RecallResult
from engram.types import Record, WriteResult

__all__ = ["Forgotten", "Memories", "Memory", "Recall", "Recalled", "Unsettled", "Written"]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class Memory(BaseModel):
    """One stored memory as the caller may see it."""

    id: str
    type: str
    scope: str
    status: str = Field(description="active, superseded, retracted, expired or disputed")
    content: str
    key: str | None = None
    value: Any = None
    authority: str
    confidence: float
    version: int
    supersedes: str | None = None
    superseded_by: str | None = None
    contested_with: str | None = None
    agent_id: str | None = None
    source_kind: str
    source_ref: str | None = None
    derived_from: list[str] = Field(default_factory=list)
    observed_at: str
    valid_from: str | None = None
    valid_to: str | None = None
    created_at: str
    updated_at: str
    expires_at: str | None = None
    sensitivity: str
    purpose: str | None = None
    retention: str
    importance: float
    private: bool

    @classmethod
    def of(cls, record: Record) -> Memory:
        """The model of ``record``."""
        return cls(
            id=record.id,
            type=record.type,
            scope=record.scope,
            status=record.status.value,
            content=record.content,
            key=record.key,
            value=record.value,
            authority=record.authority.value,
            confidence=record.confidence,
            version=record.version,
            supersedes=record.supersedes,
            superseded_by=record.superseded_by,
            contested_with=record.contested_with,
            agent_id=record.agent_id,
            source_kind=record.source.kind.value,
            source_ref=record.source.ref,
            derived_from=list(record.source.derived_from),
            observed_at=record.observed_at.isoformat(),
            valid_from=_iso(record.valid_from),
            valid_to=_iso(record.valid_to),
            created_at=record.created_at.isoformat(),
            updated_at=record.updated_at.isoformat(),
            expires_at=_iso(record.expires_at),
            sensitivity=record.sensitivity.value,
            purpose=record.purpose,
            retention=record.retention.value,
            importance=record.importance,
            private=record.private,
        )


class Written(BaseModel):
    """What the write path decided for one write, and why."""

    operation: str = Field(
        description="ADD, CONFIRM, SUPERSEDE, DISPUTE, CONTEST, REJECT, RETRACT or EXPIRE"
    )
    reason: str
    id: str | None = Field(description="the memory the write left (none for a REJECT)")
    memory: Memory | None = None
    superseded: list[str] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)
    passages: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, result: WriteResult) -> Written:
        """The model of ``result``."""
        record = result.record
        return cls(
            operation=result.operation.value,
            reason=result.reason,
            id=record.id if record is not None else None,
            memory=Memory.of(record) if record is not None else None,
            superseded=list(result.superseded),
            related=list(result.related),
            passages=list(result.passages),
        )


class Recalled(BaseModel):
    """One selected memory: its score, the score's parts and why it was chosen."""

    id: str
    type: str
    scope: str
    content: str
    score: float
    reason: str
    components: dict[str, float]


class Unsettled(BaseModel):
    """A conflict recall could not settle: neither value was selected."""

    key: str
    ids: list[str]
    values: list[Any]
    reason: str


class Recall(BaseModel):
    """The memories that should influence the next action, rendered and explained."""

    status: str = Field(description="ok, empty, partial, unavailable or ambiguous")
    prompt: str = Field(description="the memory block to put in the prompt ('' when none)")
    items: list[Recalled]
    conflicts: list[Unsettled]
    clarification: str | None = None
    trace_id: str
    tokens: int

    @classmethod
    def of(cls, result: RecallResult) -> Recall:
        """The model of ``result``."""
        items = [
            Recalled(
                id=i.record.id,
                type=i.record.type,
                scope=i.record.scope,
                content=i.record.content,
                score=round(i.score, 4),
                reason=i.reason,
                components={k: round(v, 4) for k, v in i.components.items() if v},
            )
            for i in result.items
        ]
        conflicts = [
            Unsettled(key=c.key, ids=list(c.record_ids), values=list(c.values), reason=c.reason)
            for c in result.conflicts
        ]
        return cls(
            status=result.status.value,
            prompt=result.prompt,
            items=items,
            conflicts=conflicts,
            clarification=result.clarification,
            trace_id=result.trace.trace_id,
            tokens=result.tokens,
        )


class Memories(BaseModel):
    """A page of memories (``list``) or a version chain, oldest first (``history``)."""

    memories: list[Memory]

    @classmethod
    def of(cls, records: list[Record]) -> Memories:
        """The model of ``records``."""
        return cls(memories=[Memory.of(r) for r in records])


class Forgotten(BaseModel):
    """What ``forget`` deleted, and whether the deletion was verified in the files."""

    deleted: list[str]
    derived: list[str]
    verified: bool

    @classmethod
    def of(cls, receipt: ForgetReceipt) -> Forgotten:
        """The model of ``receipt``."""
        return cls(
            deleted=list(receipt.deleted), derived=list(receipt.derived), verified=receipt.verified
        )
