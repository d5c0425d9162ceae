"""Working items as recall candidates: the caller's live session and task state.

Recall's working channel reads the items of the scopes the caller's context
names (its task and its session, each under the same tenant, user and agent;
never another's) and hands them on as records of ``WorkingConfig.recall_type``
(``task_state``: the "task state" section, structural relevance in a narrow
scope), so every later stage (eligibility, rerank, budget, render with its
escaping) treats them like stored task state. They exist only for that recall:
their ids (``wm_`` and a digest of scope and key) name no stored record, and
their source is a tool (untrusted: data, never instructions).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime

from engram.config import Config
from engram.scope import Scope
from engram.types import Authority, Record, Retention, Sensitivity, Source, SourceKind, Status
from engram.working.base import KINDS, WorkingItem, WorkingScope, WorkingStore, scope_for

__all__ = ["as_record", "caller_scopes", "live_records"]


def _content(item: WorkingItem) -> str:
    value = item.value
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{item.key}: {shown}"


def as_record(item: WorkingItem, type_name: str, config: Config) -> Record:
    """A transient record for one working item (never stored)."""
    scope = item.scope
    ident = "\x00".join((scope.tenant_id, scope.user_id or "", scope.kind, scope.scope_id,
                          scope.agent_id or "", item.key))  # fmt: skip
    digest = hashlib.sha256(ident.encode()).hexdigest()
    content = _content(item)
    return Record(
        id=f"wm_{digest[:24]}", tenant_id=scope.tenant_id, user_id=scope.user_id,
        agent_id=scope.agent_id, scope=scope.scope, tier=config.policy(type_name).tier,
        type=type_name, key=None, value=item.value, content=content,
        authority=Authority.TOOL_OBSERVATION, confidence=1.0,
        source=Source(SourceKind.TOOL, "working-memory"), observed_at=item.set_at,
        valid_from=None, valid_to=None, created_at=item.set_at, updated_at=item.set_at,
        status=Status.ACTIVE, version=1, supersedes=None, superseded_by=None,
        sensitivity=Sensitivity.LOW, purpose=None, consent_basis=None,
        retention=Retention.SESSION, expires_at=item.expires_at, importance=0.5,
        access_count=0, last_accessed_at=None, private=False, embedding_model=None,
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
    )  # fmt: skip


def caller_scopes(scope: Scope) -> list[WorkingScope]:
    """The working scopes a context names: its task, then its session."""
    named = {"task": scope.task_id, "session": scope.session_id}
    return [scope_for(scope, kind) for kind in KINDS if named[kind]]


def live_records(store: WorkingStore, scope: Scope, config: Config, now: datetime,
                 limit: int) -> Sequence[Record]:  # fmt: skip
    """The caller's live working items as records, newest first, at most ``limit``."""
    type_name = config.working.recall_type
    if type_name not in config.types or type_name not in config.recall.working_types:
        return []
    items = [item for ws in caller_scopes(scope) for item in store.items(ws, now)]
    items.sort(key=lambda item: item.set_at, reverse=True)
    return [as_record(item, type_name, config) for item in items[:limit]]
