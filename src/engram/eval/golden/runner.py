"""Run one golden case against a fresh Engram and observe the answer.

The store is a fresh in-memory SQLite one unless the caller passes an ``Opener``
(a fresh store of another backend: the tests run the suite on PostgreSQL too).

The runner writes the case's memories through the public SDK (``remember``,
``remember_global``, ``correct``, ``retract``, ``expire``) with each write's own
clock, runs the recall, and turns record ids back into case labels. It judges
nothing; ``report.check`` does. Ownership leakage is measured from the selected
records themselves, independently of the labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram.clock import FrozenClock
from engram.config import Budget
from engram.embed import Embedder, create_embedder
from engram.engram import Engram
from engram.eval.golden.cases import GoldenCase, GoldenRequest, Memory
from engram.recall.model import RecallResult
from engram.scope import Context, Scope, resolve
from engram.types import Record, WriteResult

__all__ = ["CaseResult", "Opener", "run_case"]

# An Engram on a fresh, empty store, given the embedder and the case's clock.
Opener = Callable[[Embedder, FrozenClock], Engram]

_SCOPE_FIELDS = {"project": "project_id", "repo": "repository_id", "task": "task_id",
                 "session": "session_id"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CaseResult:
    """What one case produced, in labels. ``prompt`` and ``clarification`` are kept for
    the checks only; reports never print them."""

    case: GoldenCase
    embedder: str
    status: str
    selected: tuple[str, ...]
    merged: Mapping[str, tuple[str, ...]]
    types: tuple[str, ...]
    tokens: int
    prompt: str
    clarification: str | None
    writes: Mapping[str, str]
    leaked: tuple[str, ...]
    trace: Mapping[str, Any] = field(default_factory=dict)

    @property
    def case_id(self) -> str:
        """The case's id."""
        return self.case.id

    @property
    def semantic(self) -> bool:
        """Whether the embedder models meaning (anything but the hashing test embedder)."""
        return not self.embedder.startswith("hashing")

    @property
    def required(self) -> tuple[tuple[str, ...], ...]:
        """The required units that apply to this run's embedder."""
        return self.case.expect.required_for(self.semantic)


def _writer_context(memory: Memory) -> Context:
    scope = str(memory.fields.get("scope", "user"))
    kind, _, ident = scope.partition(":")
    extra = {_SCOPE_FIELDS[kind]: ident} if kind in _SCOPE_FIELDS else {}
    w = memory.writer
    return Context(tenant_id=w.tenant_id, user_id=w.user_id, agent_id=w.agent_id, **extra)


def _write(mem: Engram, memory: Memory) -> WriteResult:
    fields = {**memory.fields, **memory.times}
    if memory.writer.admin:
        return mem.remember_global(memory.writer.tenant_id, memory.content,
                                   now=memory.written_at, **fields)  # fmt: skip
    return mem.remember(_writer_context(memory), memory.content, now=memory.written_at,
                        **fields)  # fmt: skip


class _World:
    """The labels of one case and the ids and owners behind them."""

    def __init__(self, mem: Engram, case: GoldenCase) -> None:
        self.mem = mem
        self.ids: dict[str, str] = {}
        self.owners: dict[str, Context] = {}
        self.writes: dict[str, str] = {}
        for memory in case.memories:
            result = _write(mem, memory)
            self._note(memory.label, result, _writer_context(memory))
        for action in case.actions:
            ctx = self.owners[action.target]
            target = self.ids[action.target]
            if action.op == "correct":
                result = mem.correct(ctx, target, action.content or "", value=action.value,
                                     now=action.at)  # fmt: skip
            elif action.op == "retract":
                result = mem.retract(ctx, target, action.reason or "wrong", now=action.at)
            else:
                result = mem.expire(ctx, target, now=action.at)
            self._note(action.label or f"{action.op}:{action.target}", result, ctx)

    def _note(self, label: str, result: WriteResult, ctx: Context) -> None:
        self.writes[label] = result.operation.value
        if result.record is not None:
            self.ids.setdefault(label, result.record.id)
            self.owners[label] = ctx

    def label_of(self, record_id: str) -> str:
        """The first label that names ``record_id`` (ids of unknown records are kept)."""
        return next((label for label, i in self.ids.items() if i == record_id), record_id)


def _budget(request: GoldenRequest) -> Budget | None:
    if request.max_items is None and request.max_tokens is None and not request.per_type:
        return None
    default = Budget()
    return Budget(
        max_items=default.max_items if request.max_items is None else request.max_items,
        max_tokens=default.max_tokens if request.max_tokens is None else request.max_tokens,
        per_type=dict(request.per_type) if request.per_type else None,
    )


def visible_to(record: Record, scope: Scope) -> bool:
    """Whether ownership rules let ``scope`` see ``record`` (tenant, user, agent, scope)."""
    if record.tenant_id != scope.tenant_id or record.scope not in scope.visible_scopes:
        return False
    if record.scope == "global":
        return record.user_id is None
    if record.user_id != scope.user_id:
        return False
    return record.agent_id is None or record.agent_id == scope.agent_id


def _observe(case: GoldenCase, world: _World, result: RecallResult, tokens: int) -> CaseResult:
    scope = resolve(Context(**case.request.context))
    items = list(result.items)
    return CaseResult(
        case=case, embedder=world.mem.embedder.model_id, status=result.status.value,
        selected=tuple(world.label_of(i.record.id) for i in items),
        merged={world.label_of(i.record.id): tuple(world.label_of(m) for m in i.merged_from)
                for i in items if i.merged_from},
        types=tuple(i.record.type for i in items), tokens=tokens, prompt=result.prompt,
        clarification=result.clarification, writes=dict(world.writes),
        leaked=tuple(world.label_of(i.record.id) for i in items
                     if not visible_to(i.record, scope)),
        trace=result.trace.to_dict(),
    )  # fmt: skip


def in_memory(embedder: Embedder, clock: FrozenClock) -> Engram:
    """The default ``Opener``: a fresh in-memory SQLite store."""
    return Engram.open("sqlite://:memory:", embedder=embedder, clock=clock)


def run_case(
    case: GoldenCase, embedder: str | Embedder = "hashing", opener: Opener = in_memory
) -> CaseResult:
    """Build the case's world in a fresh store (``opener``), recall once, observe."""
    model = create_embedder(embedder) if isinstance(embedder, str) else embedder
    request = case.request
    mem = opener(model, FrozenClock(request.now))
    try:
        world = _World(mem, case)
        result = mem.recall(Context(**request.context), request.query, intent=request.intent,
                            budget=_budget(request), as_of=request.as_of,
                            now=request.now)  # fmt: skip
        return _observe(case, world, result, mem.token_counter.count(result.prompt))
    finally:
        mem.close()
