"""The facade: the Python SDK of docs/contract.md section 7.

Each method validates its arguments at this edge, resolves the caller's
``Context`` into a ``Scope`` (raising ``IncompleteIdentity`` when tenant or user
is missing), and delegates to the write path, the read path or a lifecycle
operation. No method here builds SQL or decides policy.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from engram import arguments, limits
from engram.clock import Clock, SystemClock, require_aware
from engram.config import Budget, Config
from engram.embed import Embedder, create_embedder
from engram.errors import (
    EngramError,
    Forbidden,
    InvalidArgument,
    NotFound,
    PartialWrite,
)
from engram.facade_forgetting import ForgettingFacade
from engram.facade_lifecycle import LifecycleFacade
from engram.lifecycle import forget as forgetting
from engram.lifecycle.caches import CacheGuard
from engram.lifecycle.export_view import export_rows
from engram.lifecycle.sweep import Consolidator
from engram.lifecycle.transfer import ImportReport, import_rows
from engram.recall.budget import (
    ApproxTokenCounter,
    Minimums,
    TokenCounter,
    validate_budget,
)
from engram.recall.model import RecallResult
from engram.recall.pipeline import Request
from engram.recall.pipeline import run as run_pipeline
from engram.recall.usage import UsageRecorder
from engram.scope import GLOBAL, Context, Scope, resolve
from engram.store.contract import Listing
from engram.store.open import Backend, open_store
from engram.store.predicate import NO_USER, Subject, Visibility
from engram.store.sqlite import SQLiteStore
from engram.types import (
    Authority,
    Record,
    Source,
    SourceKind,
    Status,
    Turn,
    WriteResult,
    as_seen,
)
from engram.working import ScopedWorking, WorkingMemory, WorkingStore, open_working, scope_for
from engram.working.recall import live_records
from engram.working.sqlite import SQLiteWorking
from engram.write import corrections
from engram.write.batch import actor, proposal_item, stage, write_chunk
from engram.write.commit import Owner
from engram.write.passages import expand
from engram.write.path import WritePath
from engram.write.proposal import build_proposal, check_turns, proposal_fields
from engram.write.propose import Proposer, RuleProposer

__all__ = ["Engram"]

_MAX_URL = 4096
_MAX_INTENT = 64


class Engram(LifecycleFacade, ForgettingFacade):
    """A governed memory store for AI agents. Open one with ``Engram.open``.

    Sharing between agents and the export file are in ``LifecycleFacade``;
    forgetting, the sweep and consolidation in ``ForgettingFacade``."""

    def __init__(
        self, store: Backend, embedder: Embedder, config: Config | None = None,
        clock: Clock | None = None, working: WorkingStore | None = None,
    ) -> None:  # fmt: skip
        self.config = config or Config()
        self.store = store
        self.working_store = working or SQLiteWorking(":memory:", self.config.working)
        self.embedder = embedder
        self.clock: Clock = clock or SystemClock()
        self._writer = WritePath(store, embedder, self.config)
        self.token_counter: TokenCounter = ApproxTokenCounter()
        self._minimums = Minimums(self.config.types)
        rc = self.config.recall
        self._usage = UsageRecorder(store, rc.usage_flush_seconds, rc.trace_retention)
        self._caches = CacheGuard(store, self._drop_copies)
        # What ``sweep`` runs before it drops a user's episodes: this store's
        # consolidation (replaceable, e.g. by ``lifecycle.sweep.no_consolidation``).
        self.consolidator: Consolidator = self._consolidate_before_sweep

    @classmethod
    def open(
        cls,
        url: str = "sqlite:///engram.db",
        *,
        embedder: str | Embedder = "local",
        config: Config | None = None,
        clock: Clock | None = None,
        working: str | WorkingStore | None = None,
        **embedder_options: Any,
    ) -> Engram:
        """Open (creating if needed) the store at ``url`` with the given embedder:
        ``sqlite:///path``, ``sqlite://:memory:`` or ``postgresql://...``
        (``engram.store.open.open_store``).

        ``working`` is where working memory lives: None or ``"sqlite"`` (a SQLite file
        beside the store's, ``<path>-working``; a server store has none, so it needs a
        ``redis://`` URL) or a ``redis://`` URL (an unreachable server is ``Unavailable``)."""
        if not isinstance(url, str) or not url or len(url) > _MAX_URL or not url.isprintable():
            raise InvalidArgument("url must be a non-empty string such as sqlite:///engram.db")
        if config is not None and not isinstance(config, Config):
            raise InvalidArgument(f"config must be an engram.Config, got {type(config).__name__}")
        if clock is not None and not isinstance(clock, Clock):
            raise InvalidArgument("clock must have a now() method (an engram.Clock)")
        config = config or Config()
        store = open_store(url, config.store)
        scratch: WorkingStore | None = None
        try:
            path = store.path if isinstance(store, SQLiteStore) else None
            # working memory beside the file is synced as the store is (the URL's level)
            synchronous = (store.settings if isinstance(store, SQLiteStore)
                           else config.store.sqlite).synchronous  # fmt: skip
            scratch = open_working(working, path, config.working,
                                   config.store.sqlite.busy_timeout_ms, synchronous)  # fmt: skip
            return cls(store, create_embedder(embedder, **embedder_options), config, clock,
                       scratch)  # fmt: skip
        except BaseException:
            if scratch is not None:
                scratch.close()
            store.close()
            raise

    def close(self) -> None:
        """Flush usage counters and traces, then release the store and working memory."""
        self._usage.close()
        self.store.close()
        self.working_store.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------

    def _drop_copies(self, tenant_id: str, generation: int) -> None:
        """Let go of what this process holds of a tenant after a deletion here or in
        another process (``lifecycle.caches``)."""
        self.store.forget_partition(Subject(tenant_id, NO_USER))
        forgetting.drop_text_caches()
        self._usage.forget_before(tenant_id, generation)

    def _now(self, now: datetime | None) -> datetime:
        return self.clock.now() if now is None else require_aware(now, "now")

    def _visible(self, ctx: Context) -> tuple[Scope, Visibility]:
        scope = resolve(ctx)
        return scope, Visibility.of(scope)

    def _own_record(self, vis: Visibility, memory_id: object) -> Record:
        """A visible record the caller may change: never a tenant-wide (global) one."""
        record = self._record(vis, memory_id)
        if record.scope == GLOBAL:
            raise Forbidden("global memories belong to the tenant; only an admin may change them")
        return record

    def _record(self, vis: Visibility, memory_id: object) -> Record:
        found = self.store.read(vis, [limits.identifier(memory_id, "memory_id")])
        if not found:
            raise NotFound(f"no memory {memory_id!r} is visible to this context")
        return found[0]

    # -- write path --------------------------------------------------------------

    def remember(self, ctx: Context, content: str, *, now: datetime | None = None,
                 **fields: Any) -> WriteResult:  # fmt: skip
        """Propose one memory; the write path decides ADD, CONFIRM, SUPERSEDE, ... or REJECT.

        ``fields`` are the keyword arguments of docs/contract.md section 7 (type, scope, key,
        value, authority, confidence, valid_from, valid_to, observed_at, source,
        sensitivity, consent_basis, retention, importance, private, purpose).
        Content over ``config.write.max_content_bytes`` is stored as passages
        (``engram.write.passages``); ``WriteResult.passages`` lists their ids.
        """
        return self._write(ctx, [{"content": content, **fields}], now, stated=True, single=True)[0]

    def remember_many(
        self, ctx: Context, items: Iterable[Mapping[str, Any]], *, now: datetime | None = None
    ) -> list[WriteResult]:
        """Propose many memories; results in input order.

        Every item is validated before anything is written (a bad item raises
        ``InvalidArgument`` naming its index, and nothing is stored). Items are then
        written in chunks of ``config.write.batch_items``: policy and embedding run
        with no lock held, then each chunk decides and commits in one transaction,
        so the write lock is held briefly however large the batch. A batch of at
        most one chunk lands whole or not at all; when a later chunk fails,
        ``PartialWrite`` carries the results of the chunks that committed. An item
        with explicit authority lifts the tombstone of content forgotten before.
        """
        return self._write(ctx, items, now, stated=True)

    def _write(self, ctx: Context, items: Iterable[Mapping[str, Any]], now: datetime | None,
               stated: bool, single: bool = False) -> builtins.list[WriteResult]:  # fmt: skip
        """``remember_many``; ``stated`` False for proposals (``Owner.stated``); ``single``
        for ``remember``, whose refusals need no item number."""
        scope = resolve(ctx)
        self._caches.check(scope.tenant_id)  # the embedder caches texts: stale ones go first
        when = self._now(now)
        staged = stage(self.config, scope, items, when, name_items=not single)
        size = self.config.write.batch_items
        results: list[WriteResult] = []
        for start in range(0, len(staged), size):
            try:
                results += write_chunk(self.store, self._writer, scope,
                                       staged[start : start + size], when, stated)  # fmt: skip
            except EngramError as exc:
                if not results:
                    raise
                raise PartialWrite(
                    f"{len(results)} of {len(staged)} items were written before item "
                    f"{len(results)}'s chunk failed: {exc}", list(results),
                ) from exc  # fmt: skip
        return results

    def observe(
        self, ctx: Context, turns: Sequence[Turn], *, proposer: Proposer | None = None,
        now: datetime | None = None,
    ) -> builtins.list[WriteResult]:  # fmt: skip
        """Turn conversation turns into memories: a proposer suggests, the write path decides.

        The default proposer is the deterministic ``RuleProposer``; an
        ``LLMProposer`` may be passed, and its proposals meet the same policy. A
        proposal of forgotten or erased content is REJECTed ``tombstoned``.
        """
        resolve(ctx)
        check_turns(turns)
        proposals = (proposer or RuleProposer()).propose(list(turns))
        items = [proposal_item(p) for p in proposals]
        return self._write(ctx, items, now, stated=False) if items else []

    def remember_global(self, tenant_id: str, content: str, *, now: datetime | None = None,
                        **fields: Any) -> WriteResult:  # fmt: skip
        """Administrative write of a tenant-wide (``global``) memory.

        The admin's own statement carries explicit_admin; text from another source
        (a consolidation, a document) carries what its source kind allows.
        """
        scope = resolve(Context(tenant_id=tenant_id, user_id="admin"))
        fields = proposal_fields({"content": content, **fields}, "remember_global")
        fields.pop("scope", None)
        content = fields.pop("content")
        if Source.coerce(fields.get("source")).kind == SourceKind.CONVERSATION:
            fields.setdefault("authority", Authority.EXPLICIT_ADMIN)
        proposal = build_proposal(self.config, content, scope=GLOBAL, **fields)
        owner = Owner(scope.tenant_id, None, None, GLOBAL, "admin", stated=True)
        when = self._now(now)
        unit = expand(proposal, GLOBAL, self.config.write, when)
        return self._writer.write(owner, [unit], when)[0]

    def correct(self, ctx: Context, memory_id: str, content: str, value: Any = None,
                now: datetime | None = None) -> WriteResult:  # fmt: skip
        """Replace a memory with a corrected version (a SUPERSEDE; history is kept)."""
        scope, vis = self._visible(ctx)
        if not isinstance(content, str):
            raise InvalidArgument("content must be a string")
        value = build_proposal(self.config, content, value=value).value  # canonical JSON
        record = self._own_record(vis, memory_id)
        return corrections.correct(self.store, self.embedder, self.config, vis, record.id,
                                   content, value, actor(scope), self._now(now))  # fmt: skip

    def retract(self, ctx: Context, memory_id: str, reason: str = "retracted by the user",
                now: datetime | None = None) -> WriteResult:  # fmt: skip
        """Mark a memory wrong: kept in history, never recalled again."""
        scope, vis = self._visible(ctx)
        if not limits.text(reason, "reason", limits.MAX_REASON_CHARS).strip():
            raise InvalidArgument("reason must be a non-empty string")
        record = self._own_record(vis, memory_id)
        return corrections.retract(self.store, vis, record.id, reason, actor(scope),
                                   self._now(now))  # fmt: skip

    def expire(self, ctx: Context, memory_id: str, now: datetime | None = None) -> WriteResult:
        """End a memory's validity now (EXPIRE)."""
        scope, vis = self._visible(ctx)
        record = self._own_record(vis, memory_id)
        return corrections.expire(self.store, vis, record.id, actor(scope), self._now(now))

    def working(self, ctx: Context, kind: str | None = None) -> WorkingMemory:
        """Working memory of the caller's task (``kind="task"``) or session
        (``"session"``); by default the task when ``ctx`` names one, else the session.
        Items expire by themselves; recall shows those of the caller's task and session."""
        scope = scope_for(resolve(ctx), kind)
        return ScopedWorking(self.working_store, scope, self.config.working, self.clock,
                             forgetting.drop_text_caches)  # fmt: skip

    # -- reads ---------------------------------------------------------------------

    def recall(
        self, ctx: Context, query: str, intent: str | None = None,
        budget: Budget | None = None, as_of: datetime | None = None,
        now: datetime | None = None,
    ) -> RecallResult:  # fmt: skip
        """The memories that should influence the next action, rendered and explained.

        Runs the ten-stage read path (docs/contract.md section 4). ``as_of`` asks what was valid
        at that time; ``now`` fixes the clock. Outcomes such as ``empty`` or
        ``ambiguous`` are statuses of the result, not exceptions.
        """
        scope = resolve(ctx)
        limits.text(query, "query", limits.MAX_QUERY_CHARS)
        if intent is not None and (not isinstance(intent, str) or len(intent) > _MAX_INTENT):
            raise InvalidArgument("intent must be None or the name of a mode or an intent")
        chosen = validate_budget(self.config.recall.budget if budget is None else budget,
                                 lambda layout: self._minimum_tokens(layout, scope))  # fmt: skip
        when = self._now(now)
        request = Request(scope, query, intent, chosen, when,
                          None if as_of is None else require_aware(as_of, "as_of"),
                          lambda n: live_records(self.working_store, scope, self.config, when,
                                                 n))  # fmt: skip
        generation = self._caches.check(scope.tenant_id)  # a deletion elsewhere drops copies
        epoch = self._usage.epoch  # usage of a recall an erasure overtakes is dropped
        result = run_pipeline(request, self.store, self.embedder, self.config, self.token_counter)
        vis = Visibility.of(scope)
        self._usage.record(vis, result.ids, when, result.trace.trace_id,
                           result.trace.to_dict(), epoch, generation)  # fmt: skip
        return result

    def _minimum_tokens(self, layout: str, scope: Scope | None = None) -> int:
        """Tokens of the smallest block in ``layout`` under this instance's counter that
        shows any item ``scope`` may be shown (any type, any of its scopes), cut short."""
        scopes = scope.visible_scopes if scope is not None else ("user", GLOBAL)
        return self._minimums.of(layout, scopes, self.token_counter)

    def trace(self, ctx: Context, trace_id: str) -> dict[str, Any]:
        """A recall trace by id, readable only under the visibility it was recorded
        under (same tenant, user, agent and named scopes: a trace names the ids that
        recall saw); ``NotFound`` otherwise."""
        _, vis = self._visible(ctx)
        trace_id = limits.identifier(trace_id, "trace_id")
        self._caches.check(vis.tenant_id)
        body = self._usage.pending_trace(vis, trace_id) or self.store.get_trace(vis, trace_id)
        if body is None:
            raise NotFound(f"no trace {trace_id!r} for this context")
        loaded: dict[str, Any] = json.loads(body)
        return loaded

    def flush(self) -> None:
        """Write queued usage counters and traces now (they are otherwise batched)."""
        self._usage.flush()

    def get(self, ctx: Context, memory_id: str) -> Record:
        """One memory by id; ``NotFound`` when it is not visible to ``ctx``. A memory
        past its retention reads as ``expired`` (as in ``list``, ``history`` and
        ``export``; recall never selects it)."""
        _, vis = self._visible(ctx)
        return as_seen(self._record(vis, memory_id), self.clock.now())

    def list(
        self, ctx: Context, type: str | None = None,
        status: str | Status | Sequence[str | Status] | None = "active",
        limit: int = 100, offset: int = 0,
    ) -> builtins.list[Record]:  # fmt: skip
        """Visible memories, newest first; ``status=None`` lists every status."""
        _, vis = self._visible(ctx)
        now = self.clock.now()
        page = arguments.listing(self.config, type, status, limit, offset, now)
        rows = self.store.listing(vis, page)
        return [as_seen(r, now) for r in rows]

    def history(self, ctx: Context, memory_id: str) -> builtins.list[Record]:
        """The version chain through a memory, oldest first."""
        _, vis = self._visible(ctx)
        record = self._record(vis, memory_id)
        now = self.clock.now()
        return [as_seen(r, now) for r in self.store.history(vis, record.id)]

    def export(self, ctx: Context) -> builtins.list[dict[str, Any]]:
        """The caller's own memories (not the tenant's global ones) in every status, with
        version links, as plain rows."""
        _, vis = self._visible(ctx)
        now = self.clock.now()
        every = reversed(self.store.listing(vis, Listing()))  # oldest first
        return export_rows((r for r in every if r.scope != GLOBAL), now)

    def import_records(self, ctx: Context, rows: Sequence[Mapping[str, Any]]) -> ImportReport:
        """Import exported rows under ``ctx``'s ownership (ids re-issued, links kept)."""
        scope = resolve(ctx)
        return import_rows(self.store, self.embedder, self.config, scope, rows, self._now(None))
