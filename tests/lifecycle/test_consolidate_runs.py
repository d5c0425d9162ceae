"""Consolidation runs: interrupted and resumed, refused, locked, raced, gone stale.

An interrupted run leaves the groups it finished and nothing of the one it was
in; the next run finishes the rest and the result equals an uninterrupted run.
Bad input is refused before anything changes: a clock earlier than the user's
last run, an unknown user, a naive time, a malformed tenant. A user another
consolidator holds is left alone, and two consolidators racing on one user
never summarise an episode twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from consolidation_kit import LATER, FailingSummariser, snapshot, summaries, write_sessions
from tests.conftest import T0, OpenMem

from backends import FreshUrl
from engram import (
    Context,
    Engram,
    EngramError,
    IncompleteIdentity,
    InvalidArgument,
    NotFound,
    Record,
)
from engram.lifecycle.consolidate import ExtractiveSummariser
from engram.store.predicate import Subject


def _outcome(mem: Engram, ctx: Context) -> list[tuple[str, tuple[str, ...]]]:
    """Each summary's text with the texts of its episodes: comparable across stores."""
    text = {r.id: r.content for r in mem.list(ctx, type="episode", limit=1000)}
    return sorted((s.content, tuple(text[i] for i in s.source.derived_from))
                  for s in summaries(mem, ctx))  # fmt: skip


def test_an_interrupted_run_resumes_with_nothing_duplicated(
    fresh_url: FreshUrl, open_mem: OpenMem, ctx: Context
) -> None:
    with open_mem(fresh_url()) as whole:
        write_sessions(whole, ctx)
        whole.consolidate("acme", "u1", now=LATER)
        expected = _outcome(whole, ctx)
    mem = open_mem(fresh_url())
    write_sessions(mem, ctx)
    with pytest.raises(EngramError, match="stopped"):
        mem.consolidate("acme", "u1", now=LATER, summariser=FailingSummariser(fail_at=3))
    assert len(summaries(mem, ctx)) == 2  # the two groups before the failure committed
    report = mem.consolidate("acme", "u1", now=LATER)  # the lease was given back
    assert report.groups == 2
    assert _outcome(mem, ctx) == expected
    covered = [i for s in summaries(mem, ctx) for i in s.source.derived_from]
    assert len(covered) == len(set(covered)) == 12


def test_a_clock_running_backwards_is_refused_and_changes_nothing(
    mem: Engram, ctx: Context
) -> None:
    write_sessions(mem, ctx)
    mem.consolidate("acme", "u1", now=LATER)
    write_sessions(mem, ctx, [["We decided to rotate the API keys monthly."]],
                   start=T0 + timedelta(hours=14))  # fmt: skip
    before = snapshot(mem)
    with pytest.raises(InvalidArgument, match="clock ran backwards"):
        mem.consolidate("acme", "u1", now=LATER - timedelta(hours=1))
    assert snapshot(mem) == before
    assert mem.consolidate("acme", "u1", now=LATER).groups == 1  # the same clock is fine


@pytest.mark.parametrize(
    ("tenant", "user", "now", "error"),
    [
        ("acme", "nobody", LATER, NotFound),
        ("", "u1", LATER, IncompleteIdentity),
        ("acme", " ", LATER, IncompleteIdentity),
        ("acme", "u1\n", LATER, InvalidArgument),
        ("acme", "u1", datetime(2024, 5, 9, 9, 0), InvalidArgument),  # naive
        ("acme", "u1", "2024-05-09", InvalidArgument),
    ],
)
def test_bad_input_is_refused_before_anything_changes(
    mem: Engram, ctx: Context, tenant: str, user: str, now: object, error: type[Exception]
) -> None:
    write_sessions(mem, ctx)
    before = snapshot(mem)
    with pytest.raises(error):
        mem.consolidate(tenant, user, now=now)  # type: ignore[arg-type]
    assert snapshot(mem) == before


def test_a_summariser_or_proposer_of_the_wrong_shape_is_refused(mem: Engram) -> None:
    with pytest.raises(InvalidArgument, match="summariser"):
        mem.consolidate("acme", "u1", now=LATER, summariser=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="proposer"):
        mem.consolidate("acme", "u1", now=LATER, proposer="rules")  # type: ignore[arg-type]


def test_an_unknown_tenant_has_no_users_to_consolidate(mem: Engram) -> None:
    report = mem.consolidate("nobody-here", now=LATER)
    assert (report.users, report.groups, report.changed) == (0, 0, False)


def test_a_user_another_consolidator_holds_is_left_alone(mem: Engram, ctx: Context) -> None:
    write_sessions(mem, ctx)
    subject = Subject("acme", "u1")
    wall = datetime.now(UTC)
    assert mem.store.take_lease(subject, "someone-else", wall, wall + timedelta(minutes=5)).held
    report = mem.consolidate("acme", "u1", now=LATER)
    assert report.busy_users == ("u1",)
    assert summaries(mem, ctx) == []
    mem.store.end_lease(subject, "someone-else", None)
    assert mem.consolidate("acme", "u1", now=LATER).groups == 4


def test_a_lease_that_ran_out_is_taken_over(mem: Engram, ctx: Context) -> None:
    write_sessions(mem, ctx)
    wall = datetime.now(UTC) - timedelta(hours=1)
    mem.store.take_lease(Subject("acme", "u1"), "crashed", wall, wall + timedelta(minutes=10))
    assert mem.consolidate("acme", "u1", now=LATER).groups == 4


def test_two_consolidators_never_summarise_an_episode_twice(
    shared_url: str, open_mem: OpenMem, ctx: Context
) -> None:
    first, second = open_mem(shared_url), open_mem(shared_url)
    write_sessions(first, ctx)
    results: list[object] = []
    barrier = threading.Barrier(2)

    def run(mem: Engram) -> None:
        barrier.wait()
        try:
            results.append(mem.consolidate("acme", "u1", now=LATER))
        except EngramError as exc:  # the loser may find the lease taken mid-run
            results.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    covered = [i for s in summaries(first, ctx) for i in s.source.derived_from]
    assert len(covered) == len(set(covered))
    first.consolidate("acme", "u1", now=LATER)  # whatever a busy loser left, finished now
    covered = [i for s in summaries(first, ctx) for i in s.source.derived_from]
    assert len(covered) == len(set(covered)) == 12


class _Forgetting(ExtractiveSummariser):
    """Forgets an episode of the first group while that group is being summarised."""

    def __init__(self, forget: Callable[[str], object]) -> None:
        self.forget, self.done = forget, False

    def summarise(self, episodes: Sequence[Record], limit: int) -> str:
        text = super().summarise(episodes, limit)
        if not self.done:
            self.done = True
            self.forget(episodes[1].id)
        return text


def test_a_group_whose_episode_went_away_meanwhile_is_skipped(mem: Engram, ctx: Context) -> None:
    sessions = write_sessions(mem, ctx)
    forgotten = sessions[0][1]
    report = mem.consolidate("acme", "u1", now=LATER,
                             summariser=_Forgetting(lambda i: mem.forget(ctx, i)))  # fmt: skip
    assert report.stale_groups == 1
    assert report.groups == 3
    assert all(forgotten not in s.source.derived_from for s in summaries(mem, ctx))
    assert all("lock timeout" not in s.content for s in summaries(mem, ctx))
    again = mem.consolidate("acme", "u1", now=LATER)  # the rest of that session, next run
    assert again.groups == 1
    assert summaries(mem, ctx)[0].source.derived_from == (sessions[0][0], sessions[0][2])
