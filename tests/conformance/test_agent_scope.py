"""Agents of one user: what the user states is theirs, what an agent does is its own.

A preference, profile fact, constraint or rule the user states (explicit
authority, not private) is written with no agent, so every agent of the user
sees it; an agent's episodes, inferences and task state stay with that agent.
``agent_scope`` overrides either way. A write never meets, and never names,
another agent's memories.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import T0, OpenMem

from engram import Budget, Context, Engram, InvalidArgument, NotFound, Operation, Status

BIG = Budget(max_items=10, max_tokens=10_000)
CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder")
REVIEWER = dataclasses.replace(CODER, agent_id="reviewer")


def test_what_the_user_states_reaches_every_agent(mem: Engram) -> None:
    stated = mem.remember(CODER, "I prefer tabs over spaces in Python files.", type="preference",
                          key="python.indent", value="tabs")  # fmt: skip
    assert stated.record is not None
    assert stated.record.agent_id is None
    assert mem.get(REVIEWER, stated.record.id).content == stated.record.content
    result = mem.recall(REVIEWER, "How should Python files be indented: tabs or spaces?",
                        budget=BIG)  # fmt: skip
    assert stated.record.id in result.ids


def test_an_agents_episodes_and_task_state_stay_with_it(mem: Engram) -> None:
    for type_name in ("episode", "task_state"):
        own = mem.remember(CODER, f"Coder's {type_name}: refactored the payment retry loop.",
                           type=type_name)  # fmt: skip
        assert own.record is not None
        assert own.record.agent_id == "coder"
        with pytest.raises(NotFound):
            mem.get(REVIEWER, own.record.id)
        assert own.record.id not in mem.recall(REVIEWER, "payment retry loop", budget=BIG).ids


@pytest.mark.parametrize(("fields", "owner"), [
    ({"type": "episode", "agent_scope": "user"}, None),
    ({"type": "preference", "agent_scope": "agent"}, "coder"),
    ({"type": "preference", "private": True}, "coder"),
    ({"type": "preference", "authority": "model_inference", "confidence": 0.6}, "coder"),
    ({"type": "fact"}, "coder"),
])  # fmt: skip
def test_agent_scope_and_privacy_override_the_default(
    mem: Engram, fields: dict[str, object], owner: str | None
) -> None:
    written = mem.remember(CODER, "Uses a standing desk in the afternoons.", **fields)
    assert written.record is not None
    assert written.record.agent_id == owner


def test_agent_scope_agent_needs_an_agent(mem: Engram) -> None:
    with pytest.raises(InvalidArgument, match="agent_scope"):
        mem.remember(Context(tenant_id="acme", user_id="u1"), "x y z", agent_scope="agent")
    with pytest.raises(InvalidArgument, match="agent_scope"):
        mem.remember(CODER, "Some memory text.", agent_scope="everyone")


def test_an_agents_inference_meets_what_the_user_stated(mem: Engram) -> None:
    stated = mem.remember(CODER, "I prefer tabs in Python.", type="preference",
                          key="python.indent", value="tabs")  # fmt: skip
    guess = mem.remember(REVIEWER, "Seems to prefer spaces in Python.", type="preference",
                         key="python.indent", value="spaces", authority="model_inference",
                         confidence=0.7)  # fmt: skip
    assert stated.record is not None
    assert guess.operation == Operation.DISPUTE
    assert guess.related == [stated.record.id]
    assert mem.get(REVIEWER, stated.record.id).status == Status.ACTIVE


def test_the_user_replaces_what_their_agent_inferred_for_every_agent(mem: Engram) -> None:
    guess = mem.remember(CODER, "Seems to prefer spaces in Python.", type="preference",
                         key="python.indent", value="spaces", authority="model_inference",
                         confidence=0.7)  # fmt: skip
    stated = mem.remember(CODER, "I prefer tabs in Python.", type="preference",
                          key="python.indent", value="tabs")  # fmt: skip
    assert guess.record is not None
    assert stated.record is not None
    assert stated.operation == Operation.SUPERSEDE
    assert stated.superseded == [guess.record.id]
    assert stated.record.agent_id is None
    assert mem.get(REVIEWER, stated.record.id).value == "tabs"


def test_the_user_restating_an_agents_copy_makes_it_theirs(mem: Engram) -> None:
    text = "I always want type hints in Python code."
    kept = mem.remember(CODER, text, type="preference", agent_scope="agent")
    again = mem.remember(CODER, text, type="preference")
    assert kept.record is not None
    assert again.record is not None
    assert again.operation == Operation.SUPERSEDE
    assert again.record.agent_id is None
    assert mem.get(REVIEWER, again.record.id).content == text


def test_a_write_never_meets_or_names_another_agents_memory(mem: Engram) -> None:
    theirs = mem.remember(REVIEWER, "Seems to prefer spaces in Python.", type="preference",
                          key="python.indent", value="spaces", authority="model_inference",
                          confidence=0.7)  # fmt: skip
    stated = mem.remember(CODER, "I prefer tabs in Python.", type="preference",
                          key="python.indent", value="tabs")  # fmt: skip
    assert theirs.record is not None
    assert stated.operation == Operation.ADD
    assert theirs.record.id not in [*stated.superseded, *stated.related]
    assert mem.get(REVIEWER, theirs.record.id).status == Status.ACTIVE


AGENTS = [None, "coder", "reviewer"]
TYPES = ["preference", "profile", "constraint", "episode", "task_state", "fact"]


_QUIET = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=40, deadline=None, suppress_health_check=_QUIET)
@given(writes=st.lists(st.tuples(st.sampled_from(AGENTS), st.sampled_from(TYPES),
                                 st.sampled_from([None, "user", "agent"]),
                                 st.sampled_from([None, "k.one", "k.two"]),
                                 st.sampled_from(["explicit_user", "model_inference"])),
                       min_size=1, max_size=12))  # fmt: skip
def test_every_write_lands_and_reports_only_what_its_writer_may_see(
    open_fresh: OpenMem, writes: list[tuple[str | None, str, str | None, str | None, str]]
) -> None:
    with open_fresh() as mem:
        for step, (agent, type_name, agent_scope, key, authority) in enumerate(writes):
            if agent is None and agent_scope == "agent":
                continue
            ctx = dataclasses.replace(CODER, agent_id=agent)
            result = mem.remember(ctx, f"Memory {step} about the release train.", type=type_name,
                                  agent_scope=agent_scope, key=key, value=step,
                                  authority=authority, confidence=0.9,
                                  now=T0 + timedelta(minutes=step))  # fmt: skip
            for record_id in [*(result.superseded or []), *(result.related or [])]:
                mem.get(ctx, record_id)  # NotFound would be a foreign id
            if result.record is None:
                continue
            record = result.record
            for reader in AGENTS:
                view = dataclasses.replace(CODER, agent_id=reader)
                visible = record.agent_id is None or record.agent_id == reader
                try:
                    mem.get(view, record.id)
                    assert visible, (reader, record.agent_id)
                except NotFound:
                    assert not visible, (reader, record.agent_id)
        active = [r for r in mem.list(CODER, status="active", limit=1000) if r.key]
        slots = [(r.agent_id, r.key) for r in active if r.contested_with is None]
        assert len(slots) == len(set(slots))
