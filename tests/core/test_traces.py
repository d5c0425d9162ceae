"""Recall traces: readable only under the visibility they were recorded under, so no
caller learns an id it could not ``get()``; retention is per tenant."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engram import Context, Engram, NotFound
from engram.config import Config, RecallConfig
from engram.store.traces import named_ids

TOPICS = ["deploy", "billing", "kernel", "rota", "vault", "latency"]


def _contexts() -> list[Context]:
    """Several agents and scopes of one user in two tenants, and a second user."""
    out = []
    for tenant in ("acme", "globex"):
        for agent in ("coder", "reviewer", None):
            for project in ("p1", "p2", None):
                out.append(Context(tenant_id=tenant, user_id="u1", agent_id=agent,
                                   project_id=project, session_id="s1"))  # fmt: skip
        out.append(Context(tenant_id=tenant, user_id="u2", agent_id="coder"))
    return out


def _populate(mem: Engram, rng: random.Random, contexts: list[Context]) -> None:
    for ctx in contexts:
        for topic in rng.sample(TOPICS, 3):
            scope = f"project:{ctx.project_id}" if ctx.project_id and rng.random() < 0.5 else "user"
            mem.remember(ctx, f"The {topic} incident seen by {ctx.agent_id} in {scope}.",
                         type="incident", scope=scope)  # fmt: skip


def _foreign(mem: Engram, reader: Context, body: dict[str, Any]) -> set[str]:
    """Ids a trace body names that ``reader`` may not ``get()``."""
    hidden = set()
    for memory_id in named_ids(body) - {body["trace_id"]}:
        try:
            mem.get(reader, memory_id)
        except NotFound:
            hidden.add(memory_id)
    return hidden


@pytest.mark.parametrize("seed", [1, 2])
def test_no_trace_shows_a_reader_an_id_it_cannot_get(
    open_mem: Callable[..., Engram], tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    mem = open_mem(f"sqlite:///{tmp_path}/t{seed}.db")
    contexts = _contexts()
    _populate(mem, rng, contexts)
    traces = []
    for _ in range(30):
        ctx = rng.choice(contexts)
        result = mem.recall(ctx, f"what happened with the {rng.choice(TOPICS)} incident?")
        traces.append((ctx, result.trace.trace_id))
    for flushed in (False, True):  # queued traces first, then stored ones
        if flushed:
            mem.flush()
        reads = exposed = 0
        for reader in contexts:
            for owner, trace_id in traces:
                try:
                    body = mem.trace(reader, trace_id)
                except NotFound:
                    assert reader != owner, "a caller must read its own trace"
                    continue
                reads += 1
                exposed += len(_foreign(mem, reader, body))
        assert reads >= len(traces)
        assert exposed == 0, (flushed, reads, exposed)


def test_another_tenants_flood_of_traces_evicts_none_of_a_tenants(
    open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    config = Config(recall=RecallConfig(trace_retention=5))
    mem = open_mem(f"sqlite:///{tmp_path}/r.db", config=config)
    a = Context(tenant_id="acme", user_id="u1", agent_id="coder")
    b = Context(tenant_id="globex", user_id="u1", agent_id="coder")
    mem.remember(a, "acme runs the nightly deploy.")
    mem.remember(b, "globex runs the nightly deploy.")
    kept = [mem.recall(a, "who runs the deploy?").trace.trace_id for _ in range(3)]
    mem.flush()
    for _ in range(20):
        mem.recall(b, "who runs the deploy?")
    mem.flush()
    assert all(mem.trace(a, trace_id)["trace_id"] == trace_id for trace_id in kept)
    flood = [mem.recall(b, "deploy?").trace.trace_id for _ in range(7)]
    mem.flush()
    with pytest.raises(NotFound):
        mem.trace(b, flood[0])  # b keeps only its newest 5
    assert mem.trace(b, flood[-1])["trace_id"] == flood[-1]
