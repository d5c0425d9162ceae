"""What happens to a summary when one of its episodes goes away or stops being true.

Forgetting an episode deletes the summaries derived from it (the derived
closure); the group's surviving episodes lose their consolidation marks, so the
next run summarises them again instead of skipping them for good.
"""

from __future__ import annotations

from datetime import timedelta

from tests.conftest import T0
from tests.lifecycle.consolidation_kit import LATER, summaries, write_episodes

from backends import table_rows
from engram import Context, Engram

CTX = Context(tenant_id="acme", user_id="u1")
BILLING = (
    "Deployed the billing service to staging and ran smoke tests",
    "The billing service staging deploy failed on the migration step",
    "Fixed the billing migration and redeployed billing to staging",
    "Billing staging smoke tests passed after the migration fix",
)


def _consolidated(mem: Engram) -> tuple[list[str], str]:
    """The billing episodes and the id of the one summary consolidation made of them."""
    episodes = write_episodes(mem, CTX, BILLING, T0, timedelta(minutes=5))
    report = mem.consolidate("acme", "u1", now=LATER, progress=False)
    (summary,) = report.summary_ids
    assert set(mem.get(CTX, summary).source.derived_from) == set(episodes)
    return episodes, summary


def _marked(mem: Engram) -> set[str]:
    return {row["episode_id"] for row in table_rows(mem.store, "consolidated")}


def test_forgetting_an_episode_lets_the_rest_of_its_group_be_summarised_again(
    mem: Engram,
) -> None:
    episodes, summary = _consolidated(mem)
    assert _marked(mem) == set(episodes)
    receipt = mem.forget(CTX, episodes[0])
    assert receipt.derived == (summary,)
    assert _marked(mem) == set()
    again = mem.consolidate("acme", "u1", now=LATER + timedelta(hours=1), progress=False)
    (fresh,) = again.summary_ids
    assert set(mem.get(CTX, fresh).source.derived_from) == set(episodes[1:])
    assert [s.id for s in summaries(mem, CTX)] == [fresh]
    assert _marked(mem) == set(episodes[1:])


def test_forgetting_an_unrelated_memory_keeps_every_mark(mem: Engram) -> None:
    episodes, _ = _consolidated(mem)
    other = mem.remember(CTX, "The user prefers tea over coffee", type="fact").record
    assert other is not None
    mem.forget(CTX, other.id)
    assert _marked(mem) == set(episodes)
