"""The facade's sharing and export-file methods, mixed into ``Engram``.

Kept apart from ``engram.py`` only to keep each module small: these are
``Engram`` methods (docs/contract.md section 7), thin like the others. Each
validates at the edge and delegates to ``lifecycle.grants``,
``lifecycle.share`` or ``lifecycle.jsonl`` (with ``lifecycle.transfer`` for
the import itself).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from engram import limits
from engram.clock import Clock
from engram.config import Budget, Config
from engram.embed import Embedder
from engram.errors import InvalidArgument
from engram.lifecycle import grants, jsonl
from engram.lifecycle import share as sharing
from engram.lifecycle.transfer import ImportReport, import_rows
from engram.recall.model import RecallResult
from engram.recall.usage import UsageRecorder
from engram.scope import Context, resolve
from engram.store.open import Backend
from engram.store.predicate import Tenant
from engram.types import ShareGrant

__all__ = ["ExportReport", "LifecycleFacade"]

_MAX_SHARE_IDS = 1_000


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What ``export_jsonl`` wrote: the header and how many record lines followed it."""

    header: jsonl.Header
    records: int


class _Host(Protocol):
    """What these methods use of ``Engram``."""

    @property
    def store(self) -> Backend: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def config(self) -> Config: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def _usage(self) -> UsageRecorder: ...
    def _now(self, now: datetime | None) -> datetime: ...
    def export(self, ctx: Context) -> builtins.list[dict[str, Any]]: ...
    def recall(
        self, ctx: Context, query: str, intent: str | None = None,
        budget: Budget | None = None, as_of: datetime | None = None,
        now: datetime | None = None,
    ) -> RecallResult: ...  # fmt: skip


class LifecycleFacade:
    """Sharing between agents and the JSON Lines export file (``Engram`` methods)."""

    # -- sharing -------------------------------------------------------------------

    def grant_share(
        self: _Host, tenant_id: str, from_agent: str, to_agent: str, types: Sequence[str],
        now: datetime | None = None,
    ) -> builtins.list[ShareGrant]:  # fmt: skip
        """Administrative: let ``from_agent`` share its memories of ``types`` with
        ``to_agent`` inside ``tenant_id``; the pair's grants afterwards (granting a
        type twice changes nothing). ``InvalidArgument`` for an unknown type, equal
        agents or a bad id."""
        return grants.grant(self.store, self.config, tenant_id, from_agent, to_agent, types,
                            self._now(now))  # fmt: skip

    def revoke_share(
        self: _Host, tenant_id: str, from_agent: str, to_agent: str,
        types: Sequence[str] | None = None, now: datetime | None = None,
    ) -> grants.RevokeReport:  # fmt: skip
        """Administrative: withdraw the pair's grants of ``types`` (None: all) and delete
        the copies made under them; ``NotFound`` when the pair holds none of them."""
        return grants.revoke(self.store, self.config, tenant_id, from_agent, to_agent, types,
                             self._now(now), self._usage)  # fmt: skip

    def list_grants(self: _Host, tenant_id: str) -> builtins.list[ShareGrant]:
        """Administrative: every share grant of the tenant, by (from, to, type)."""
        tenant = resolve(Context(tenant_id, "admin")).tenant_id
        return self.store.grants(Tenant(tenant))

    def share(
        self: _Host, ctx: Context, memory_ids_or_query: str | Sequence[str], to_agent_id: str,
        *, budget: Budget | None = None, now: datetime | None = None,
    ) -> sharing.ShareReport:  # fmt: skip
        """Copy memories of ``ctx.agent_id`` to agent ``to_agent_id`` under a grant: the
        given ids (``NotFound`` if one is not visible to ``ctx``; nothing is written), or
        what ``recall`` selects for a query string. Redacted copies with provenance;
        ``Forbidden`` without a grant; ineligible items are refused in the report."""
        scope = resolve(ctx)
        if scope.agent_id is None:
            raise InvalidArgument("share needs a context with an agent_id: the sharing agent")
        who = grants.pair(scope.tenant_id, scope.agent_id, to_agent_id)
        when = self._now(now)
        if isinstance(memory_ids_or_query, str):
            found = self.recall(ctx, memory_ids_or_query, budget=budget, now=when)
            return sharing.share(self.store, self.embedder, self.config, scope, who, found.ids,
                                 when, strict=False)  # fmt: skip
        if not isinstance(memory_ids_or_query, Sequence) or not memory_ids_or_query:
            raise InvalidArgument("memory_ids_or_query must be a query or a non-empty id list")
        ids = limits.identifiers(memory_ids_or_query, "memory_ids", _MAX_SHARE_IDS)
        return sharing.share(self.store, self.embedder, self.config, scope, who, ids, when)

    # -- the export file -----------------------------------------------------------

    def export_jsonl(self: _Host, ctx: Context, file_or_path: jsonl.Target) -> ExportReport:
        """Write the caller's memories (every status, with history and provenance) as a
        versioned JSON Lines file (docs/export-format.md); a path is written atomically."""
        scope = resolve(ctx)
        rows = self.export(ctx)
        header = jsonl.Header.of(scope, self.clock.now(), len(rows))
        return ExportReport(header, jsonl.write(file_or_path, header, rows))

    def import_jsonl(
        self: _Host, ctx: Context, file_or_path: jsonl.Source, *, rehome: bool = False
    ) -> ImportReport:
        """Import an export file under ``ctx`` through the write path; idempotent. The
        file is checked whole first (docs/export-format.md): an unknown version, a
        forged row or a broken link raises and nothing is written. An export of
        another tenant or user is ``Forbidden`` unless ``rehome`` takes it over."""
        scope = resolve(ctx)
        if not isinstance(rehome, bool):
            raise InvalidArgument("rehome must be True or False")
        header, rows = jsonl.read(file_or_path)
        jsonl.check(header, rows, scope, rehome)
        found: list[Any] = rows
        return import_rows(self.store, self.embedder, self.config, scope, found,
                           self._now(None))  # fmt: skip
