"""The facade's forgetting, consolidation and maintenance methods, mixed into ``Engram``.

Kept apart from ``engram.py`` only to keep each module small: these are
``Engram`` methods (docs/contract.md section 7), thin like the others. Each
resolves the caller at the edge and delegates to ``lifecycle.forget``,
``lifecycle.sweep``, ``lifecycle.consolidate``, ``lifecycle.audit_log``, the
store's audit check or the index rebuild.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from engram.config import Config
from engram.embed import Embedder
from engram.errors import Conflict
from engram.lifecycle import audit_log
from engram.lifecycle import forget as forgetting
from engram.lifecycle import sweep as sweeping
from engram.lifecycle.caches import CacheGuard
from engram.lifecycle.consolidate import ConsolidationReport, ProcedureOutcomes, Summariser, Tools
from engram.lifecycle.consolidate import consolidate as run_consolidation
from engram.lifecycle.consolidate.outcomes import record_outcome
from engram.lifecycle.consolidate.progress import Progress
from engram.lifecycle.sweep import Consolidator, SweepReport
from engram.recall.usage import UsageRecorder
from engram.scope import Context, Scope, resolve
from engram.store.audit import AuditReport
from engram.store.open import Backend
from engram.store.predicate import Visibility
from engram.types import Record
from engram.working import WorkingStore
from engram.write.batch import actor
from engram.write.index import RebuildReport, rebuild
from engram.write.path import WritePath
from engram.write.propose import Proposer

__all__ = ["ForgettingFacade"]


class _Host(Protocol):
    """What these methods use of ``Engram``."""

    @property
    def store(self) -> Backend: ...
    @property
    def config(self) -> Config: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def working_store(self) -> WorkingStore: ...
    @property
    def consolidator(self) -> Consolidator: ...
    @property
    def _usage(self) -> UsageRecorder: ...
    @property
    def _caches(self) -> CacheGuard: ...
    @property
    def _writer(self) -> WritePath: ...
    def _now(self, now: datetime | None) -> datetime: ...
    def _visible(self, ctx: Context) -> tuple[Scope, Visibility]: ...
    def _own_record(self, vis: Visibility, memory_id: object) -> Record: ...
    def consolidate(
        self, tenant_id: str, user_id: str | None = None, now: datetime | None = None, *,
        summariser: Summariser | None = None, proposer: Proposer | None = None,
        progress: bool | None = None,
    ) -> ConsolidationReport: ...  # fmt: skip


class ForgettingFacade:
    """Forgetting, erasure, the sweep, consolidation, procedure outcomes and the
    administrative reads and checks (``Engram`` methods)."""

    def forget(self: _Host, ctx: Context, memory_id: str) -> forgetting.ForgetReceipt:
        """Hard-delete a memory, all its versions and copies derived from them; its
        content is tombstoned, and every process drops its cached copies
        (``docs/erasure.md``). The receipt says what the verification pass checked."""
        scope, vis = self._visible(ctx)
        record = self._own_record(vis, memory_id)
        return forgetting.forget(self.store, vis, record, actor(scope), self._now(None),
                                 self._usage, self.working_store, self._caches.invalidate,
                                 self.config.consolidation.summary_type)  # fmt: skip

    def erase_subject(self: _Host, tenant_id: str, user_id: str) -> forgetting.ErasureReceipt:
        """Administrative erasure of one user's every record, vector, trace, working
        item and derived copy, verified store by store (``docs/erasure.md``)."""
        scope = resolve(Context(tenant_id=tenant_id, user_id=user_id))
        return forgetting.erase_subject(self.store, scope.tenant_id, scope.user_id,
                                        self._now(None), self._usage, self.working_store,
                                        self._caches.invalidate)  # fmt: skip

    def sweep(
        self: _Host, tenant_id: str | None = None, now: datetime | None = None
    ) -> SweepReport:
        """Administrative forgetting: hard-delete what retention ended and what decay
        pruned (``config.sweep``), in one tenant or every tenant, in short batches;
        episodes are consolidated first (``self.consolidator``). See
        ``lifecycle.sweep`` and ``docs/lifecycle.md``."""
        tenant = None if tenant_id is None else resolve(
            Context(tenant_id=tenant_id, user_id="admin")).tenant_id  # fmt: skip
        return sweeping.sweep(self.store, self.config.sweep, self._now(now), tenant,
                              self.consolidator, self._usage,
                              self._caches.invalidate)  # fmt: skip

    def _consolidate_before_sweep(
        self: _Host, tenant_id: str, user_id: str | None, now: datetime
    ) -> ConsolidationReport | None:
        """The sweep's ``Consolidator``: consolidate the user's episodes before the sweep
        drops them. Raises ``Conflict`` when another consolidator holds the user, so the
        sweep keeps that user's episodes for the next sweep. Tenant-wide episodes (no
        user) are not consolidated (consolidation runs per user)."""
        if user_id is None:
            return None
        report = self.consolidate(tenant_id, user_id, now, progress=False)
        if report.busy_users:
            raise Conflict(f"user {user_id!r} is being consolidated elsewhere")
        return report

    def consolidate(
        self: _Host, tenant_id: str, user_id: str | None = None, now: datetime | None = None, *,
        summariser: Summariser | None = None, proposer: Proposer | None = None,
        progress: bool | None = None,
    ) -> ConsolidationReport:  # fmt: skip
        """The sleep cycle for one user, or each user of a tenant (docs/lifecycle.md).

        Episodes older than ``config.consolidation.min_age_days`` become summaries
        (``summariser``: extractive by default) linked to them by
        ``source.derived_from``; the facts they state go through ``proposer`` and the
        write policy; the procedure outcomes they report are counted; near-duplicate
        facts merge. Each user runs under a lease (another consolidator's user is
        reported busy); a ``now`` earlier than the user's last run is
        ``InvalidArgument``; a user with no memories is ``NotFound``. The same ``now``
        twice changes nothing the second time, and an interrupted run resumes where
        it stopped. ``progress`` None draws a bar when stderr is a terminal."""
        named = tenant_id if user_id is None else user_id  # None: every user of the tenant
        checked = resolve(Context(tenant_id=tenant_id, user_id=named))
        user = None if user_id is None else checked.user_id
        tools = Tools.checked(self.store, self._writer, self.config, summariser, proposer)
        return run_consolidation(
            tools,
            checked.tenant_id,
            user,
            self._now(now),
            Progress.of(f"consolidate {checked.tenant_id}", progress),
        )

    def record_outcome(
        self: _Host, ctx: Context, procedure_id: str, success: bool, reward: float | None = None,
        now: datetime | None = None,
    ) -> ProcedureOutcomes:  # fmt: skip
        """Count one success or failure (with an optional ``reward`` in [-1, 1]) of the
        caller's active procedure; recall ranks procedures by the smoothed success
        rate. One transaction, one audit entry; returns the counts after it."""
        scope, vis = self._visible(ctx)
        record = self._own_record(vis, procedure_id)
        return record_outcome(self.store, vis, record, success, reward, actor(scope),
                              self._now(now), self.config.recall)  # fmt: skip

    # -- maintenance ---------------------------------------------------------------

    def users(self: _Host, tenant_id: str, limit: int = 1000) -> list[str]:
        """Admin: the tenant's users that own at least one memory, in id order."""
        return audit_log.user_ids(self.store, tenant_id, limit)

    def audit_log(self: _Host, tenant_id: str, user_id: str) -> list[audit_log.AuditLogEntry]:
        """Admin: one user's audit entries, oldest first (ids and reason codes only)."""
        return audit_log.audit_log(self.store, tenant_id, user_id)

    def audit_verify(self: _Host) -> AuditReport:
        """Recompute the audit hash chain."""
        return self.store.verify_audit()

    def rebuild_index(self: _Host) -> RebuildReport:
        """Regenerate the lexical and vector indexes from the records (current embedder).

        One transaction re-embeds every record: other writers wait until it commits
        (the only write that embeds under the lock; run it when the store is idle)."""
        return rebuild(self.store, self.embedder)
