"""Per-type quotas are work-conserving: they shape diversity, they do not waste slots."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import Budget, Context, Engram

NOW = datetime(2024, 6, 1, tzinfo=UTC)
CTX = Context(tenant_id="acme", user_id="u1")
TOPICS = ["ferry", "glacier", "violin", "orchard", "lantern", "canyon"]


def _episodes(mem: Engram, n: int, type_name: str = "episode") -> None:
    items = [
        {"content": f"We talked about the ferry trip to the glacier, part {i} of the story.",
         "type": type_name, "observed_at": NOW - timedelta(hours=i)}
        for i in range(n)
    ]  # fmt: skip
    mem.remember_many(CTX, items, now=NOW)


def test_a_store_of_one_type_fills_max_items() -> None:
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        _episodes(mem, 14)
        quota = mem.config.policy("episode").quota
        result = mem.recall(CTX, "What happened on the ferry trip to the glacier?",
                            budget=Budget(max_items=10, max_tokens=10_000), now=NOW)  # fmt: skip
        assert quota < 10
        assert len(result.items) == 10


def test_quotas_still_make_room_for_other_types() -> None:
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        _episodes(mem, 14)
        mem.remember(CTX, "Constraint: never book the ferry trip before checking the glacier "
                     "weather.", type="constraint", now=NOW)  # fmt: skip
        result = mem.recall(CTX, "Plan the ferry trip to the glacier.",
                            budget=Budget(max_items=4, max_tokens=10_000), now=NOW)  # fmt: skip
        assert "constraint" in {i.record.type for i in result.items}


def test_a_callers_quota_is_a_hard_cap() -> None:
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        _episodes(mem, 14)
        result = mem.recall(CTX, "What happened on the ferry trip to the glacier?",
                            budget=Budget(max_items=10, max_tokens=10_000,
                                          per_type={"episode": 2}), now=NOW)  # fmt: skip
        assert len(result.items) == 2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counts=st.dictionaries(st.sampled_from(["episode", "fact", "decision", "incident"]),
                              st.integers(0, 8), min_size=1),
       max_items=st.integers(1, 12))  # fmt: skip
def test_slots_go_unused_only_when_no_candidate_is_left(
    counts: dict[str, int], max_items: int
) -> None:
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        for type_name, n in counts.items():
            items = [{"content": f"The lantern festival by the canyon, {type_name} note {i}.",
                      "type": type_name, "observed_at": NOW - timedelta(minutes=i)}
                     for i in range(n)]  # fmt: skip
            if items:
                mem.remember_many(CTX, items, now=NOW)
        budget = Budget(max_items=max_items, max_tokens=100_000)
        result = mem.recall(CTX, "the lantern festival by the canyon", budget=budget, now=NOW)
        selected = Counter(i.record.type for i in result.items)
        assert len(result.items) == min(max_items, sum(counts.values())), selected
