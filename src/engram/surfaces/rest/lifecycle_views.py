"""Response bodies of the lifecycle routes: the SDK's reports as JSON, each with a
pydantic model for OpenAPI (``views`` explains the pattern: a route declares the
model and returns ``reply(view)``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from engram.lifecycle.consolidate import ConsolidationReport, ProcedureOutcomes
from engram.lifecycle.grants import RevokeReport
from engram.lifecycle.share import ShareReport
from engram.lifecycle.sweep import SweepReport
from engram.surfaces.rest.views import Out
from engram.types import ShareGrant

__all__ = [
    "ConsolidationOut",
    "GrantOut",
    "GrantsOut",
    "OutcomesOut",
    "RevokeOut",
    "ShareItemOut",
    "ShareOut",
    "SweepOut",
    "consolidation_view",
    "grants_view",
    "outcomes_view",
    "revoke_view",
    "share_view",
    "sweep_view",
]


class ConsolidationOut(Out):
    """What a consolidation did (``ConsolidationReport``, docs/lifecycle.md)."""

    tenant_id: str
    user_id: str | None
    now: str
    users: int
    episodes: int
    groups: int
    summaries: int
    summaries_confirmed: int
    summaries_rejected: int
    facts_proposed: int
    facts_accepted: int
    merges: int
    outcomes: int
    stale_groups: int
    busy_users: list[str]
    summary_ids: list[str]
    merged: list[list[str]]
    rejected_reasons: dict[str, int]


class SweepOut(Out):
    """What a sweep did (``SweepReport``, docs/lifecycle.md): memories deleted because
    retention ended (``expired``) or decay pruned them (``pruned``), also by reason
    code in ``deleted`` (as ``engram sweep --json`` prints it); the older versions and
    passages deleted with them; the owners consolidated first and the memories kept
    because that failed; the transactions; the tenants whose last sweep was later than
    ``now``; the audit entries (by hash); the physical pass's steps, done and failed.
    Counts and ids only, never content."""

    now: str
    tenants: list[str]
    expired: int
    pruned: int
    deleted: dict[str, int]
    versions: int
    consolidated: int
    unconsolidated: int
    batches: int
    clock_behind: list[str]
    audit_ids: list[str]
    checked: list[str]
    failed: list[str]


class OutcomesOut(Out):
    """A procedure's counted outcomes after the call, and the smoothed success rate
    recall ranks it by."""

    procedure_id: str
    successes: int
    failures: int
    success_rate: float
    mean_reward: float | None


class ShareItemOut(Out):
    """What happened to one memory asked for: ``shared``, ``already_shared`` or
    ``refused``, with a reason code (docs/lifecycle.md, Sharing)."""

    memory_id: str
    outcome: str
    code: str
    reason: str
    copy_id: str | None
    operation: str | None
    redacted: list[str]


class ShareOut(Out):
    """A share: one item per memory asked for, in order; ``shared`` the copies made."""

    tenant_id: str
    from_agent: str
    to_agent: str
    items: list[ShareItemOut]
    shared: list[str]


class GrantOut(Out):
    """One grant: ``from_agent`` may share memories of ``type`` with ``to_agent``."""

    tenant_id: str
    from_agent: str
    to_agent: str
    type: str
    granted_at: str


class GrantsOut(Out):
    """Grants, by (from agent, to agent, type)."""

    grants: list[GrantOut]


class RevokeOut(Out):
    """The grants a revocation removed and the copies it deleted."""

    revoked: list[GrantOut]
    deleted: list[str]


def consolidation_view(report: ConsolidationReport) -> dict[str, Any]:
    """A consolidation report as JSON."""
    return report.to_dict()


def sweep_view(report: SweepReport) -> dict[str, Any]:
    """A sweep report as JSON: the CLI's ``--json`` fields plus both counts by name."""
    return {**report.to_dict(), "expired": report.expired, "pruned": report.pruned}


def outcomes_view(stats: ProcedureOutcomes) -> dict[str, Any]:
    """A procedure's outcome counts as JSON."""
    return dataclasses.asdict(stats)


def share_view(report: ShareReport) -> dict[str, Any]:
    """A share report as JSON."""
    items = [{**dataclasses.asdict(item), "redacted": list(item.redacted)}
             for item in report.items]  # fmt: skip
    return {"tenant_id": report.tenant_id, "from_agent": report.from_agent,
            "to_agent": report.to_agent, "items": items, "shared": list(report.shared)}  # fmt: skip


def _grant(grant: ShareGrant) -> dict[str, Any]:
    return {"tenant_id": grant.tenant_id, "from_agent": grant.from_agent,
            "to_agent": grant.to_agent, "type": grant.type,
            "granted_at": grant.granted_at.isoformat()}  # fmt: skip


def grants_view(grants: Sequence[ShareGrant]) -> dict[str, Any]:
    """Grants as JSON."""
    return {"grants": [_grant(g) for g in grants]}


def revoke_view(report: RevokeReport) -> dict[str, Any]:
    """A revocation report as JSON."""
    return {"revoked": [_grant(g) for g in report.revoked], "deleted": list(report.deleted)}
