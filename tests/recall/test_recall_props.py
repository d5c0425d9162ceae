"""Properties of one recall and the meaning of its statuses (SPEC sections 1 and 4).

Properties, over random stores and random budgets: the rendered prompt never
exceeds ``max_tokens`` nor holds more than ``max_items`` items or a type's
quota; the prompt is empty exactly when nothing is selected; the trace never
holds stored content. Then one test per status and for the trace and usage side
effects: ``partial`` when the vector channel fails, ``unavailable`` when nothing
can be searched, traces only for their owner, usage counters written after the
read and off its path.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import Budget, Config, Context, Engram, FrozenClock, NotFound
from engram.config import RecallConfig
from engram.embed import HashingEmbedder
from engram.errors import ConfigError

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CTX = Context(tenant_id="acme", user_id="u42", agent_id="coder", session_id="s1",
              project_id="lunest", repository_id="lunest-ios", task_id="net-state")  # fmt: skip
WORDS = ("network", "state", "reachability", "swift", "objective", "release", "branch",
         "timezone", "indentation", "crash", "monitor", "deploy", "staging", "module",
         "summary", "concise", "offline", "binding", "retry", "cache")  # fmt: skip
TYPES = ("constraint", "rule", "preference", "fact", "decision", "episode", "incident",
         "summary", "procedure", "task_state")  # fmt: skip
SCOPES = ("user", "project:lunest", "repo:lunest-ios", "task:net-state", "session:s1")
SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


def _open(url: str = "sqlite://:memory:", **kwargs: Any) -> Engram:
    kwargs.setdefault("embedder", "hashing")
    return Engram.open(url, clock=FrozenClock(NOW), **kwargs)


@st.composite
def memories(draw: st.DrawFn) -> dict[str, Any]:
    """One memory: 3-7 vocabulary words plus a unique tag, a type, a scope, maybe a key."""
    words = draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=7))
    tag = draw(st.integers(min_value=1000, max_value=9999))
    return {
        "content": " ".join(words) + f" item{tag}",
        "type": draw(st.sampled_from(TYPES)),
        "scope": draw(st.sampled_from(SCOPES)),
        "key": draw(st.sampled_from((None, None, "k.one", "k.two"))),
        "confidence": draw(st.sampled_from((1.0, 0.9, 0.6))),
        "observed_at": NOW - timedelta(days=draw(st.integers(0, 400))),
    }


MIN_BLOCK = 124  # the smallest block with the approximate counter (test_budget_fit.py)
budgets = st.builds(
    Budget,
    max_items=st.integers(min_value=0, max_value=8),
    max_tokens=st.one_of(st.integers(MIN_BLOCK, 300), st.integers(300, 1200)),
    per_type=st.one_of(st.none(), st.dictionaries(st.sampled_from(TYPES),
                                                  st.integers(0, 3), max_size=3)),
)  # fmt: skip


def _quota(mem: Engram, budget: Budget, type_name: str) -> int:
    """The caller's quotas are hard; the configuration's only shape the first pass."""
    overrides: Mapping[str, int] = budget.per_type or {}
    return overrides.get(type_name, budget.max_items)


@SETTINGS
@given(
    items=st.lists(memories(), min_size=0, max_size=14),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    budget=budgets,
)
def test_recall_respects_budget_and_hides_content(
    items: list[dict[str, Any]], query: str, budget: Budget
) -> None:
    with _open() as mem:
        results = mem.remember_many(CTX, items, now=NOW) if items else []
        stored = [r.record.content for r in results if r.record is not None]
        result = mem.recall(CTX, query, budget=budget, now=NOW)
        tokens = mem.token_counter.count(result.prompt)
        assert tokens <= budget.max_tokens
        assert result.tokens == tokens
        assert len(result.items) <= budget.max_items
        for type_name, n in Counter(i.record.type for i in result.items).items():
            assert n <= _quota(mem, budget, type_name)
        assert (result.prompt == "") == (not result.items)
        assert result.status in ("ok", "empty", "ambiguous")
        trace = json.dumps(result.trace.to_dict())
        assert not [content for content in stored if content in trace]


# -- statuses --------------------------------------------------------------------------


def _seed(mem: Engram) -> dict[str, str]:
    keyed = mem.remember(CTX, "Use Objective-C for iOS implementation.", type="constraint",
                         scope="repo:lunest-ios", key="ios.language", value="Objective-C",
                         now=NOW)  # fmt: skip
    episode = mem.remember(CTX, "The reachability monitor crashed on airplane-mode toggles.",
                           type="episode", scope="project:lunest", now=NOW)  # fmt: skip
    assert keyed.record is not None
    assert episode.record is not None
    return {"keyed": keyed.record.id, "episode": episode.record.id}


def test_partial_when_the_vector_channel_fails(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'engram.db'}"
    with _open(url) as mem:  # vectors of hashing-v2-384
        ids = _seed(mem)
    with _open(url, embedder=HashingEmbedder(dimension=128)) as mem:
        result = mem.recall(CTX, "Fix the reachability monitor crash in the iOS app.", now=NOW)
    channels = result.trace.to_dict()["channels"]
    assert result.status == "partial"
    assert channels["vector"]["error"] == "IndexMismatch"
    assert all(channels[name]["error"] is None for name in ("key", "lexical", "working"))
    assert channels["key"]["count"] >= 1
    assert channels["lexical"]["count"] >= 1
    assert {ids["keyed"], ids["episode"]} <= set(result.ids)  # key and lexical still answer
    assert result.prompt != ""


def test_unavailable_when_nothing_can_be_searched() -> None:
    mem = _open()
    _seed(mem)
    mem.store.close()  # the database goes away underneath the facade
    try:
        result = mem.recall(CTX, "Add network-state handling to the iOS application.", now=NOW)
        channels = result.trace.to_dict()["channels"]
        assert result.status == "unavailable"
        assert result.items == []
        assert result.prompt == ""
        sources = {"key", "working", "lexical", "vector"}  # every channel that searches
        assert sources <= set(channels)
        assert all(channels[name]["error"] for name in sources)
    finally:
        mem.close()


def test_empty_is_distinct_from_unavailable() -> None:
    with _open() as mem:
        result = mem.recall(CTX, "Add network-state handling to the iOS application.", now=NOW)
    assert result.status == "empty"
    assert all(c["error"] is None for c in result.trace.to_dict()["channels"].values())


# -- trace and usage -------------------------------------------------------------------


@pytest.fixture
def quiet_mem() -> Iterator[Engram]:
    """A store whose usage recorder never flushes on its own during a test."""
    recall = dataclasses.replace(RecallConfig(), usage_flush_seconds=3600.0)
    with _open(config=Config(recall=recall)) as mem:
        yield mem


def test_trace_is_retrievable_only_by_its_owner(quiet_mem: Engram) -> None:
    _seed(quiet_mem)
    result = quiet_mem.recall(CTX, "Fix the reachability monitor crash.", now=NOW)
    trace_id = result.trace.trace_id
    assert quiet_mem.trace(CTX, trace_id)["trace_id"] == trace_id  # pending, from memory
    strangers = (
        dataclasses.replace(CTX, user_id="u43"),
        dataclasses.replace(CTX, tenant_id="other"),
    )
    for stranger in strangers:
        with pytest.raises(NotFound):
            quiet_mem.trace(stranger, trace_id)
    quiet_mem.flush()
    assert quiet_mem.trace(CTX, trace_id) == result.trace.to_dict()  # stored
    for stranger in strangers:
        with pytest.raises(NotFound):
            quiet_mem.trace(stranger, trace_id)


def test_a_trace_stays_retrievable_while_a_flush_writes_it(tmp_path: Path) -> None:
    """Found in review: between leaving the queue and the commit, a trace was in
    neither place another thread looks."""
    recall = dataclasses.replace(RecallConfig(), usage_flush_seconds=3600.0)
    with _open(f"sqlite:///{tmp_path}/t.db", config=Config(recall=recall)) as mem:
        _seed(mem)
        trace_id = mem.recall(CTX, "Fix the reachability monitor crash.", now=NOW).trace.trace_id
        seen: list[object] = []
        real = mem.store.put_traces

        def put_traces(rows: Any, keep: int) -> None:
            reader = threading.Thread(target=lambda: seen.append(mem.trace(CTX, trace_id)))
            reader.start()
            reader.join()
            real(rows, keep)

        mem.store.put_traces = put_traces  # type: ignore[method-assign]
        mem.flush()
    assert len(seen) == 1
    assert isinstance(seen[0], dict)
    assert seen[0]["trace_id"] == trace_id


def test_usage_is_written_after_the_read_and_off_its_path(quiet_mem: Engram) -> None:
    ids = _seed(quiet_mem)
    statements: list[str] = []
    quiet_mem.store.tracer = lambda sql, params: statements.append(sql)
    result = quiet_mem.recall(CTX, "Fix the reachability monitor crash in the iOS app.", now=NOW)
    quiet_mem.store.tracer = None
    assert ids["episode"] in result.ids
    writes = [s for s in statements if s.lstrip().split()[0].upper() in
              ("INSERT", "UPDATE", "DELETE", "BEGIN", "REPLACE")]  # fmt: skip
    assert writes == []  # the read path issues no write at all
    assert quiet_mem.get(CTX, ids["episode"]).access_count == 0  # queued, not yet written
    quiet_mem.flush()
    touched = quiet_mem.get(CTX, ids["episode"])
    assert touched.access_count == 1
    assert touched.last_accessed_at == NOW
    assert all(quiet_mem.get(CTX, i).access_count == 1 for i in result.ids)


@pytest.mark.parametrize(
    "change",
    [{"usage_saturation": 0}, {"lexical_limit": -1}, {"mmr_lambda": 1.5},
     {"usage_flush_seconds": 0.0}, {"usage_flush_seconds": float("inf")},
     {"near_duplicate_cosine": float("nan")}, {"context_window": -2},
     {"context_max_gap_seconds": -1.0}],
)  # fmt: skip
def test_recall_settings_that_would_fail_mid_recall_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="recall"):
        RecallConfig(**change)
