"""Response bodies: the SDK's values as JSON, each with a pydantic model for OpenAPI.

Each ``*_view`` function turns one SDK value into the plain mapping its model
describes. A route declares the model (``response_model``: the OpenAPI schema)
and returns ``reply(view)``: the JSON bytes made by pydantic-core in the worker
thread that ran the SDK call. FastAPI passes a returned ``Response`` through
as it is, so a request costs one thread hop instead of two (FastAPI validates a
sync route's return value on a second hop) and no revalidation of what the SDK
already checked; the schemathesis test checks every response against its model.
Records keep every field of ``Record.to_dict``; traces stay what
``Trace.to_dict`` makes (ids and numbers, no content).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Response
from pydantic import BaseModel, ConfigDict
from pydantic_core import to_json

from engram.lifecycle.forget import ErasureReceipt, ForgetReceipt
from engram.lifecycle.transfer import ImportReport
from engram.recall.model import RecallResult
from engram.store.audit import AuditReport
from engram.types import Record, WriteResult
from engram.working import WorkingItem

__all__ = [
    "AuditOut",
    "ErasureOut",
    "ExportOut",
    "ForgetOut",
    "HistoryOut",
    "ImportOut",
    "Out",
    "PageOut",
    "RecallOut",
    "RecordOut",
    "RemovedOut",
    "WorkingItemOut",
    "WorkingListOut",
    "WriteOut",
    "WritesOut",
    "recall_view",
    "receipt_view",
    "reply",
    "working_view",
    "write_view",
]


class Out(BaseModel):
    """A response body: exactly the declared fields (the schema says so too)."""

    model_config = ConfigDict(extra="forbid")


class SourceOut(Out):
    """Provenance."""

    kind: str
    ref: str | None
    derived_from: list[str]


class RecordOut(Out):
    """One version of one memory (docs/contract.md section 2)."""

    id: str
    tenant_id: str
    user_id: str | None
    agent_id: str | None
    scope: str
    tier: str
    type: str
    key: str | None
    value: Any
    content: str
    authority: str
    confidence: float
    source: SourceOut
    observed_at: str
    valid_from: str | None
    valid_to: str | None
    created_at: str
    updated_at: str
    status: str
    version: int
    supersedes: str | None
    superseded_by: str | None
    sensitivity: str
    purpose: str | None
    consent_basis: str | None
    retention: str
    expires_at: str | None
    importance: float
    access_count: int
    last_accessed_at: str | None
    private: bool
    embedding_model: str | None
    content_hash: str
    contested_with: str | None


class WriteOut(Out):
    """What the write path decided: ADD, CONFIRM, SUPERSEDE, DISPUTE, CONTEST, REJECT..."""

    operation: str
    record: RecordOut | None
    reason: str
    superseded: list[str]
    related: list[str]
    passages: list[str]


class WritesOut(Out):
    """Results of a batch or an observation, in input order."""

    results: list[WriteOut]


class ItemOut(Out):
    """A selected memory with its score, score parts and reason."""

    record: RecordOut
    score: float
    components: dict[str, float]
    reason: str
    merged_from: list[str]


class ConflictOut(Out):
    """An unresolved conflict: one key, values no rule could choose between."""

    key: str
    record_ids: list[str]
    values: list[Any]
    reason: str


class RecallOut(Out):
    """A recall: status, items, conflicts, clarification, the prompt block and its trace."""

    status: str
    items: list[ItemOut]
    conflicts: list[ConflictOut]
    clarification: str | None
    prompt: str
    tokens: int
    trace_id: str
    trace: dict[str, Any]


class PageOut(Out):
    """A page of memories, newest first; ``next_offset`` is None on the last page."""

    items: list[RecordOut]
    limit: int
    offset: int
    next_offset: int | None


class HistoryOut(Out):
    """A version chain, oldest first."""

    versions: list[RecordOut]


class ForgetOut(Out):
    """What a hard delete removed and how it was verified."""

    deleted: list[str]
    derived: list[str]
    verified: bool
    traces: int
    checked: list[str]
    failed: list[str]
    scanned: int
    short: int
    counts: dict[str, int]  # what each check found (0 everywhere after a clean erasure)
    audit_id: str | None  # the hash of the audit entry the deletion wrote
    tombstones: int  # contents tombstoned (docs/erasure.md)


class ErasureOut(Out):
    """What a subject erasure removed and how it was verified."""

    tenant_id: str
    user_id: str
    records: int
    derived: int
    traces: int
    verified: bool
    checked: list[str]
    failed: list[str]
    scanned: int
    short: int
    working: int
    counts: dict[str, int]  # what each check found (0 everywhere after a clean erasure)
    audit_id: str | None  # the hash of the audit entry the deletion wrote
    tombstones: int  # contents tombstoned (docs/erasure.md)


class ExportOut(Out):
    """Every memory of the caller (not the tenant's global ones), oldest first."""

    rows: list[dict[str, Any]]


class RowOut(Out):
    """What the import did with one row."""

    index: int
    operation: str
    record_id: str | None
    reason: str


class ImportOut(Out):
    """An import's report: how many rows were written, which were skipped and why."""

    imported: int
    skipped: list[tuple[int, str]]
    id_map: dict[str, str]
    rows: list[RowOut]


class AuditOut(Out):
    """Whether the deployment's audit chain verifies. Counts and the place of a break
    are left out: the chain holds every tenant's entries, so they would tell one
    tenant about the others' activity (an operator sees them: ``engram audit verify``)."""

    ok: bool
    detail: str


class WorkingItemOut(Out):
    """One live working-memory item."""

    key: str
    value: Any
    set_at: str
    expires_at: str
    kind: str
    scope_id: str


class WorkingListOut(Out):
    """The live items of one session or task, most recently set first."""

    items: list[WorkingItemOut]


class RemovedOut(Out):
    """How many live items a delete or clear removed."""

    removed: int


def reply(payload: Any) -> Response:
    """A 200 ``application/json`` response of ``payload`` (plain JSON values)."""
    return Response(to_json(payload), media_type="application/json")


def record_view(record: Record) -> dict[str, Any]:
    """One record as JSON."""
    return record.to_dict()


def write_view(result: WriteResult) -> dict[str, Any]:
    """One write result as JSON."""
    return {
        "operation": result.operation.value,
        "record": None if result.record is None else result.record.to_dict(),
        "reason": result.reason, "superseded": list(result.superseded),
        "related": list(result.related), "passages": list(result.passages),
    }  # fmt: skip


def writes_view(results: Sequence[WriteResult]) -> dict[str, Any]:
    """Several write results, in order."""
    return {"results": [write_view(result) for result in results]}


def recall_view(result: RecallResult) -> dict[str, Any]:
    """A recall result as JSON."""
    items = [{"record": item.record.to_dict(), "score": item.score,
              "components": dict(item.components), "reason": item.reason,
              "merged_from": list(item.merged_from)} for item in result.items]  # fmt: skip
    conflicts = [{"key": c.key, "record_ids": list(c.record_ids), "values": list(c.values),
                  "reason": c.reason} for c in result.conflicts]  # fmt: skip
    trace = result.trace.to_dict()
    return {"status": result.status.value, "items": items, "conflicts": conflicts,
            "clarification": result.clarification, "prompt": result.prompt,
            "tokens": result.tokens, "trace_id": result.trace.trace_id, "trace": trace}  # fmt: skip


def receipt_view(receipt: ForgetReceipt | ErasureReceipt | AuditReport) -> dict[str, Any]:
    """A receipt or report (a dataclass of plain values) as JSON; not ``asdict``,
    which cannot copy a receipt's read-only ``counts``."""
    fields = {f.name: getattr(receipt, f.name) for f in dataclasses.fields(receipt)}
    return {name: list(value) if isinstance(value, tuple)
            else dict(value) if isinstance(value, Mapping) else value
            for name, value in fields.items()}  # fmt: skip


def import_view(report: ImportReport) -> dict[str, Any]:
    """An import report as JSON."""
    return {"imported": report.imported, "skipped": [list(s) for s in report.skipped],
            "id_map": dict(report.id_map),
            "rows": [dataclasses.asdict(row) for row in report.rows]}  # fmt: skip


def working_view(item: WorkingItem) -> dict[str, Any]:
    """One working-memory item as JSON."""
    return {"key": item.key, "value": item.value, "set_at": item.set_at.isoformat(),
            "expires_at": item.expires_at.isoformat(), "kind": item.scope.kind,
            "scope_id": item.scope.scope_id}  # fmt: skip


def page_view(records: Sequence[Record], limit: int, offset: int) -> dict[str, Any]:
    """A page of records."""
    more = offset + len(records) if len(records) == limit else None
    return {"items": [r.to_dict() for r in records], "limit": limit, "offset": offset,
            "next_offset": more}  # fmt: skip
