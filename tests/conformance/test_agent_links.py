"""Agents of one user, continued: no write lets one agent's memory show through another's.

A record another agent may read never names (``supersedes``, ``superseded_by``,
``contested_with``) a record that agent may not read; an agent's write never
retires or replaces what the user stated with what only that agent holds; a
private or ``agent_scope="agent"`` write stays with its agent whatever it meets.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import T0, OpenMem

from engram import Context, Engram, NotFound, Operation, Record, Status

CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder")
REVIEWER = dataclasses.replace(CODER, agent_id="reviewer")
KEY = "python.indent"


def _links_visible(mem: Engram, ctx: Context, record: Record) -> None:
    for linked in (record.supersedes, record.superseded_by, record.contested_with):
        if linked is not None:
            mem.get(ctx, linked)  # NotFound: the record names one the reader may not see


def _every_link_visible(mem: Engram) -> None:
    for reader in (CODER, REVIEWER, dataclasses.replace(CODER, agent_id=None)):
        for record in mem.list(reader, status=None, limit=1000):
            _links_visible(mem, reader, record)


def _guess(mem: Engram, value: str) -> Record:
    written = mem.remember(CODER, f"Seems to prefer {value} in Python.", type="preference",
                           key=KEY, value=value, authority="model_inference",
                           confidence=0.7)  # fmt: skip
    assert written.record is not None
    return written.record


def test_an_agents_inference_never_retires_what_the_user_stated(mem: Engram) -> None:
    _guess(mem, "spaces")
    stated = mem.remember(REVIEWER, "I prefer tabs in Python.", type="preference", key=KEY,
                          value="tabs")  # fmt: skip
    assert stated.record is not None
    assert stated.operation == Operation.ADD  # the reviewer never meets the coder's guess
    again = mem.remember(
        CODER,
        "Seems to prefer spaces in Python.",
        type="preference",
        key=KEY,
        value="spaces",
        authority="model_inference",
        confidence=0.7,
    )
    assert stated.record.id not in (again.superseded or [])
    seen = mem.get(REVIEWER, stated.record.id)
    assert seen.status == Status.ACTIVE
    assert seen.superseded_by is None
    _every_link_visible(mem)


@pytest.mark.parametrize("pin", [{"private": True}, {"agent_scope": "agent"}])
def test_a_private_or_agent_bound_write_stays_with_its_agent(
    mem: Engram, pin: dict[str, object]
) -> None:
    stated = mem.remember(CODER, "I prefer tabs in Python.", type="preference", key=KEY,
                          value="tabs")  # fmt: skip
    kept = mem.remember(CODER, "Between us: spaces in Python.", type="preference", key=KEY,
                        value="spaces", **pin)  # fmt: skip
    assert stated.record is not None
    assert kept.record is not None
    assert kept.record.agent_id == "coder"
    with pytest.raises(NotFound):
        mem.get(REVIEWER, kept.record.id)
    assert mem.get(REVIEWER, stated.record.id).status == Status.ACTIVE
    _every_link_visible(mem)


def test_correcting_an_agents_version_never_hides_the_users_behind_it(mem: Engram) -> None:
    guess = mem.remember(CODER, "Guess: wants 100 column lines.", type="preference",
                         key="py.width", value=100, authority="model_inference",
                         confidence=0.9)  # fmt: skip
    stated = mem.remember(REVIEWER, "I want 80 column lines.", type="preference",
                          key="py.width", value=80)  # fmt: skip
    assert guess.record is not None
    assert stated.record is not None
    fixed = mem.correct(CODER, guess.record.id, "Wants 120 column lines.", value=120)
    assert fixed.record is not None
    # the user's correction replaced the user's own version too: every agent reads it
    assert mem.get(REVIEWER, fixed.record.id).value == 120
    _every_link_visible(mem)


def test_the_user_restating_an_agents_copy_names_no_hidden_version(mem: Engram) -> None:
    text = "I always want type hints in Python code."
    mem.remember(CODER, text, type="preference", agent_scope="agent")
    again = mem.remember(CODER, text, type="preference")
    assert again.record is not None
    assert again.record.agent_id is None
    _every_link_visible(mem)


def test_a_user_scoped_guess_never_displaces_a_stronger_statement(mem: Engram) -> None:
    _guess(mem, "spaces")
    stated = mem.remember(REVIEWER, "I prefer tabs in Python.", type="preference", key=KEY,
                          value="tabs")  # fmt: skip
    assert stated.record is not None
    mem.remember(CODER, "Seems to prefer spaces in Python.", type="preference", key=KEY,
                 value="spaces", authority="model_inference", confidence=0.7,
                 agent_scope="user")  # fmt: skip
    assert mem.get(REVIEWER, stated.record.id).status == Status.ACTIVE
    _every_link_visible(mem)


def test_a_user_scoped_write_against_an_agents_own_version_names_none(mem: Engram) -> None:
    mem.remember(CODER, "I prefer tabs in Python.", type="preference", key=KEY, value="tabs",
                 agent_scope="agent")  # fmt: skip
    for value, confidence in (("spaces", 0.7), ("mixed", 0.3)):
        mem.remember(CODER, f"Seems to prefer {value} in Python.", type="preference", key=KEY,
                     value=value, authority="model_inference", confidence=confidence,
                     agent_scope="user")  # fmt: skip
    _every_link_visible(mem)


AGENTS = [None, "coder", "reviewer"]
_QUIET = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=60, deadline=None, suppress_health_check=_QUIET)
@given(writes=st.lists(st.tuples(st.sampled_from(AGENTS), st.sampled_from(["preference", "fact"]),
                                 st.sampled_from([None, "user", "agent"]), st.booleans(),
                                 st.sampled_from(["a", "b"]),
                                 st.sampled_from(["explicit_user", "model_inference"]),
                                 st.sampled_from([0.3, 0.9]), st.booleans()),
                       min_size=1, max_size=10))  # fmt: skip
def test_no_sequence_of_writes_lets_an_agent_read_another_agents_ids(
    open_fresh: OpenMem,
    writes: list[tuple[str | None, str, str | None, bool, str, str, float, bool]],
) -> None:
    with open_fresh() as mem:
        for step, write in enumerate(writes):
            agent, type_name, scope, private, value, authority, confidence, fix = write
            if agent is None and scope == "agent":
                continue
            ctx = dataclasses.replace(CODER, agent_id=agent)
            result = mem.remember(ctx, f"The release train leaves on day {value}.", type=type_name,
                                  agent_scope=scope, private=private, key="release.day",
                                  value=value, authority=authority, confidence=confidence,
                                  now=T0 + timedelta(minutes=step))  # fmt: skip
            for record_id in [*(result.superseded or []), *(result.related or [])]:
                mem.get(ctx, record_id)
            if fix and result.record is not None and result.record.status == Status.ACTIVE:
                mem.correct(
                    ctx,
                    result.record.id,
                    f"The release train leaves on day {step}.",
                    value=f"fixed {step}",
                    now=T0 + timedelta(minutes=step, seconds=30),
                )
        _every_link_visible(mem)
        active = [r for r in mem.list(CODER, status="active", limit=1000) if r.key]
        slots = [(r.agent_id, r.key) for r in active if r.contested_with is None]
        assert len(slots) == len(set(slots))
