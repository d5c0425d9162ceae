"""Export round trips the random histories once broke, pinned (every backend).

Each builds a history, exports it to a file, imports it into a fresh store and
checks with ``export_kit.round_trip`` that every row came back as it was: the
same contents, statuses, links, times and agent binding.

* An agent's version and the user's own version of one key can both be active
  (the user, through no agent, does not meet the agent's memories). The import
  once wrote the user's rows first and had the agent's row decided against them:
  it superseded the user's value and moved to the user, or confirmed it and was
  lost. The file's rows no longer meet each other (``lifecycle.transfer``).
* A version bound to an agent stays bound even where the importing store holds
  the user's own value of its key.
* The second side of a contested pair came back created at the import, retained
  from then on, or (after a weaker confirmation raised one side's confidence)
  disputed instead of contested.
* A contest one side of which had lapsed was exported as still on.
* A version whose predecessor the export does not name lost its version number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from export_kit import READER, USER, round_trip

from engram import Engram, FrozenClock, Operation

Open = Callable[..., Engram]
WEAK: dict[str, Any] = {"key": "queue", "authority": "tool_observation", "confidence": 0.5}


def _by_key(rows: list[dict[str, Any]], key: str) -> set[tuple[Any, ...]]:
    return {(r["value"], r["agent_id"], r["status"]) for r in rows if r["key"] == key}


@pytest.mark.parametrize("value", ["eu-central", "us-east"])  # the agent's value, another one
def test_an_agents_and_the_users_active_values_of_one_key_both_come_back(
    open_fresh: Open, value: str
) -> None:
    def build(mem: Engram, clock: FrozenClock) -> None:
        mem.remember(USER, "The team lunch is on Fridays.", scope="project:p1")
        first = mem.remember(READER, "Deploy region is eu-west.", key="deploy.region",
                             value="eu-west", scope="project:p1",
                             authority="tool_observation")  # fmt: skip
        assert first.record is not None
        assert first.record.agent_id == "coder"
        clock.advance(minutes=1)
        mem.correct(READER, first.record.id, "Deploy region is eu-central.", value="eu-central")
        clock.advance(minutes=1)
        users = mem.remember(USER, f"Deploy region is {value}.", key="deploy.region",
                             value=value, scope="project:p1")  # fmt: skip
        assert users.operation == Operation.ADD  # the user's slot holds none of the agent's

    trip = round_trip(open_fresh, build)
    assert _by_key(trip.after, "deploy.region") == {
        ("eu-west", "coder", "superseded"), ("eu-central", "coder", "active"),
        (value, None, "active"),
    }  # fmt: skip


def test_a_version_bound_to_an_agent_stays_bound_where_the_user_states_another(
    open_fresh: Open,
) -> None:
    def build(mem: Engram, clock: FrozenClock) -> None:
        mem.remember(USER, "I indent Python with tabs.", type="preference",
                     key="python.indent", value="tabs")  # fmt: skip
        kept = mem.remember(READER, "Indent generated Python with spaces.", type="preference",
                            key="python.indent", value="spaces", agent_scope="agent")  # fmt: skip
        assert kept.record is not None
        assert kept.record.agent_id == "coder"

    trip = round_trip(open_fresh, build)
    expected = {("spaces", "coder", "active"), ("tabs", None, "active")}
    assert _by_key(trip.after, "python.indent") == expected
    bound = [row for row in trip.rows if row["agent_id"] == "coder"]
    with open_fresh() as target:  # the user already states another value there
        target.remember(USER, "I indent Python with tabs.", type="preference",
                        key="python.indent", value="tabs")  # fmt: skip
        report = target.import_records(READER, bound)
        assert [o.operation for o in report.rows] == ["ADD"]
        assert _by_key(target.export(READER), "python.indent") == expected


def _contest(mem: Engram, clock: FrozenClock, retention: str | None = None) -> None:
    mem.remember(READER, "The queue is RabbitMQ.", value="rabbit", retention=retention, **WEAK)
    clock.advance(hours=1)
    contested = mem.remember(READER, "The queue is Kafka.", value="kafka", **WEAK)
    assert contested.operation == Operation.CONTEST
    clock.advance(hours=1)


def test_a_contested_pair_comes_back_with_its_times_and_retention(open_fresh: Open) -> None:
    trip = round_trip(open_fresh, _contest)
    kafka = next(row for row in trip.after if row["value"] == "kafka")
    original = trip.original(kafka)
    assert (kafka["created_at"], kafka["expires_at"]) == (original["created_at"],
                                                          original["expires_at"])  # fmt: skip
    assert kafka["contested_with"] == trip.report.id_map[original["contested_with"]]


def test_a_contested_pair_stays_contested_after_a_weaker_confirmation(open_fresh: Open) -> None:
    def build(mem: Engram, clock: FrozenClock) -> None:
        _contest(mem, clock)
        weaker = mem.remember(
            READER,
            "The queue is RabbitMQ, it seems.",
            value="rabbit",
            **{**WEAK, "authority": "model_inference", "confidence": 0.9},
        )
        assert weaker.operation == Operation.CONFIRM  # raises its confidence, ends nothing
        assert weaker.record is not None
        assert weaker.record.contested_with is not None

    trip = round_trip(open_fresh, build)
    assert [(r["status"], r["confidence"]) for r in sorted(trip.after, key=lambda r: r["value"])
            ] == [("active", 0.5), ("active", 0.9)]  # fmt: skip
    assert all(row["contested_with"] for row in trip.after)


def test_a_contest_one_side_of_which_lapsed_is_exported_as_over(open_fresh: Open) -> None:
    def build(mem: Engram, clock: FrozenClock) -> None:
        _contest(mem, clock, retention="session")
        clock.advance(hours=30)  # the RabbitMQ side's retention runs out

    trip = round_trip(open_fresh, build)
    assert sorted((r["value"], r["status"], r["contested_with"]) for r in trip.rows) == [
        ("kafka", "active", None), ("rabbit", "expired", None),
    ]  # fmt: skip


def test_a_version_whose_predecessor_is_not_named_keeps_its_number(open_fresh: Open) -> None:
    def build(mem: Engram, clock: FrozenClock) -> None:
        mem.remember(READER, "Indent with two spaces.", type="preference", key="indent",
                     value=2, authority="tool_observation", private=True)  # fmt: skip
        stated = mem.remember(READER, "I indent with four spaces.", type="preference",
                              key="indent", value=4, agent_scope="user")  # fmt: skip
        assert stated.record is not None  # the user's own names no private version of an agent's
        assert (stated.record.version, stated.record.supersedes) == (2, None)

    trip = round_trip(open_fresh, build)
    assert sorted((r["value"], r["version"]) for r in trip.after) == [(2, 1), (4, 2)]
