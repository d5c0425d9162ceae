"""What happens to a summary when one of its episodes goes away or stops being true.

Forgetting an episode deletes the summaries derived from it (the derived
closure); the group's surviving episodes lose their consolidation marks, so the
next run summarises them again instead of skipping them for good. Retracting
or expiring an episode retracts the summaries and the extracted facts derived
from it (not a fact the user stated), and the rest of its group is summarised
again without it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.conftest import T0
from tests.lifecycle.consolidation_kit import LATER, summaries, write_episodes

from backends import table_rows
from engram import Authority, Context, Engram, Source, SourceKind, Status
from engram.ids import new_id
from engram.store.contract import Insert

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


@pytest.mark.parametrize("change", ["retract", "expire"])
def test_a_retracted_or_expired_episode_takes_its_summary_along(mem: Engram, change: str) -> None:
    episodes, summary = _consolidated(mem)
    if change == "retract":
        mem.retract(CTX, episodes[1], "this never happened")
    else:
        mem.expire(CTX, episodes[1])
    assert mem.get(CTX, summary).status == Status.RETRACTED
    answer = mem.recall(CTX, "migration step failed", intent="past", now=LATER)
    assert summary not in answer.ids
    assert _marked(mem) == set()
    again = mem.consolidate("acme", "u1", now=LATER + timedelta(hours=1), progress=False)
    (fresh,) = again.summary_ids
    assert set(mem.get(CTX, fresh).source.derived_from) == {episodes[0], *episodes[2:]}


def _extracted(mem: Engram, episode: str, authority: Authority) -> str:
    """A fact consolidation extracted from ``episode``, stored with ``authority``."""
    base = mem.get(CTX, episode)
    fact = base.replace(id=new_id(), type="fact", authority=authority,
                        content=f"Extracted ({authority.value}) from {episode}",
                        source=Source(SourceKind.CONSOLIDATION, None, (episode,)))  # fmt: skip
    mem.store.apply([Insert(fact)])
    return fact.id


def test_retracting_an_episode_retracts_inferred_facts_not_stated_ones(mem: Engram) -> None:
    (episode,) = write_episodes(mem, CTX, BILLING[:1], T0)
    inferred = _extracted(mem, episode, Authority.MODEL_INFERENCE)
    stated = _extracted(mem, episode, Authority.EXPLICIT_USER)
    mem.retract(CTX, episode, "wrong")
    assert mem.get(CTX, inferred).status == Status.RETRACTED
    assert mem.get(CTX, stated).status == Status.ACTIVE
