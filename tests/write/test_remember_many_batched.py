"""``remember_many`` through ``commit_together`` lands as the one-by-one commits did.

A chunk without passages is decided on one read of its slots and written in one
apply. The outcome must be the one that committing each item in turn gives: same
operations and reasons, same versions, statuses, keys, scopes and contests, on
every backend, for batches that repeat contents and keys, restate a forgotten
content, supersede stored values and mix agents, scopes and retention.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from engram import Context, Engram
from engram.write import batch as batch_module
from engram.write.commit import Owner
from engram.write.path import Prepared, WritePath


def _one_by_one(
    writer: WritePath, jobs: Sequence[tuple[Owner, Prepared]], now: datetime
) -> list[list[Any]]:
    return [writer.commit_prepared(owner, prepared, now) for owner, prepared in jobs]


def _ctx(user: str, agent: str | None = "coder") -> Context:
    return Context(tenant_id="acme", user_id=user, agent_id=agent, repository_id="r1")


def _held(mem: Engram, user: str) -> None:
    """What the user's store holds before the batch."""
    c = _ctx(user)
    mem.remember(c, "The deploy target is Fly.io.", key="deploy.target", value="fly")
    mem.remember(c, "I prefer tabs over spaces.", type="preference")
    gone = mem.remember(c, "My staging password rotates weekly.").record
    assert gone is not None
    mem.forget(c, gone.id)
    mem.remember(c, "Reviewer timeout is 30s.", key="timeout", value=30, scope="repo:r1")
    mem.remember(_ctx(user, "planner"), "The sprint ends on Friday.", type="episode")


ITEMS: list[dict[str, Any]] = [
    {"content": "The deploy target is Render.", "key": "deploy.target", "value": "render"},
    {"content": "I prefer tabs over spaces."},
    {"content": "I prefer tabs over spaces.", "type": "preference"},
    {"content": "My staging password rotates weekly."},
    {"content": "Reviewer timeout is 45s.", "key": "timeout", "value": 45, "scope": "repo:r1"},
    {"content": "Reviewer timeout is 60s.", "key": "timeout", "value": 60, "scope": "repo:r1"},
    {"content": "The sprint ends on Friday.", "type": "episode"},
    {"content": "Lint with ruff before every commit.", "type": "rule"},
    {"content": "Lint with ruff before every commit.", "type": "rule", "scope": "repo:r1"},
    {"content": "A short lived note about the build.", "retention": "short_term"},
    {"content": "Coffee is at ten.", "type": "episode", "private": True},
    {"content": "ok thanks"},
    {"content": "The API port is 9443.", "key": "api.port", "value": 9443},
    {"content": "The API port is 8443.", "key": "api.port", "value": 8443},
]


def _holdings(mem: Engram, user: str) -> list[tuple[Any, ...]]:
    out = []
    for agent in ("coder", "planner", None):
        for r in mem.list(_ctx(user, agent), status=None, limit=500):
            out.append((agent, r.scope, r.type, r.key, r.content, r.status.value,
                        r.authority.value, r.expires_at, r.contested_with is not None,
                        r.version, r.private))  # fmt: skip
    return sorted(out, key=repr)


def _outcome(results: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [(r.operation.value, r.reason, r.record.content if r.record else None) for r in results]


@pytest.mark.parametrize("seed", range(4))
def test_remember_many_batched_equals_one_by_one(
    mem: Engram, clock: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for user in ("batched", "plain"):
        _held(mem, user)
    clock.advance(days=1)
    items = list(ITEMS)
    random.Random(seed).shuffle(items)
    batched = mem.remember_many(_ctx("batched"), items)
    monkeypatch.setattr(batch_module, "commit_together", _one_by_one)
    plain = mem.remember_many(_ctx("plain"), items)
    assert _outcome(batched) == _outcome(plain)
    assert _holdings(mem, "batched") == _holdings(mem, "plain")
    assert {r.operation.value for r in batched} >= {"ADD", "CONFIRM", "SUPERSEDE", "REJECT"}
    assert mem.audit_verify().ok


def _held_more(mem: Engram, user: str) -> None:
    """A store with a shared record, a keyed record about to expire, a contested key,
    a forgotten content and a keyed record whose content another item restates."""
    c = _ctx(user)
    runner = mem.remember(c, "The CI runner is GitHub Actions.", key="ci.runner", value="gha",
                          type="fact").record  # fmt: skip
    assert runner is not None
    assert runner.agent_id == "coder"
    report = mem.share(c, [runner.id], "planner")
    assert len(report.shared) == 1
    mem.remember(c, "The on-call engineer is Ana.", key="oncall", value="ana",
                 retention="short_term")  # fmt: skip
    mem.remember(c, "The deploy region is eu-west.", key="deploy.region", value="eu-west")
    for value in ("blue", "green"):
        mem.remember(c, f"The build badge is {value}.", key="badge", value=value,
                     authority="tool_observation", confidence=0.5)  # fmt: skip
    gone = mem.remember(c, "My recovery phrase hint is the old street.").record
    assert gone is not None
    mem.forget(c, gone.id)


MORE: list[dict[str, Any]] = [
    # supersedes a record whose share copy the planner holds: the copy is retracted
    {"content": "The CI runner is Buildkite.", "key": "ci.runner", "value": "bk", "type": "fact"},
    # the key of a record past its retention
    {"content": "The on-call engineer is Bo.", "key": "oncall", "value": "bo"},
    # one item confirms what another supersedes; a third restates it without the key
    {"content": "The deploy region is eu-west.", "key": "deploy.region", "value": "eu-west"},
    {"content": "The deploy region is us-east.", "key": "deploy.region", "value": "us-east"},
    {"content": "The deploy region is eu-west."},
    # a contested key
    {"content": "The build badge is red.", "key": "badge", "value": "red"},
    # the forgotten content restated twice, and once by a tool
    {"content": "My recovery phrase hint is the old street."},
    {"content": "My recovery phrase hint is the old street."},
    {"content": "My recovery phrase hint is the old street.", "authority": "tool_observation"},
    # owning agents differ (the user's preference, the agent's private note), scope+key collide
    {
        "content": "I prefer the dark theme.",
        "type": "preference",
        "key": "ui.theme",
        "value": "dark",
    },
    {
        "content": "Screenshots use the light theme.",
        "key": "ui.theme",
        "value": "light",
        "private": True,
    },
    # the same content owned by the user and by the agent
    {"content": "I prefer short commit messages.", "type": "preference"},
    {"content": "I prefer short commit messages.", "type": "preference", "agent_scope": "agent"},
    {"content": "The nightly job starts at two.", "key": "nightly", "value": 2},
]


def _audit(mem: Engram, user: str) -> list[tuple[str, str, str, int]]:
    return sorted((e.actor, e.operation, e.reason, len(e.record_ids))
                  for e in mem.audit_log("acme", user))  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_remember_many_batched_equals_one_by_one_on_harder_chunks(
    mem: Engram, clock: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.grant_share("acme", "coder", "planner", ["fact"])
    for user in ("batched", "plain"):
        _held_more(mem, user)
    clock.advance(days=8)  # past the on-call record's short_term retention
    items = list(MORE)
    random.Random(seed).shuffle(items)
    before = {user: len(mem.audit_log("acme", user)) for user in ("batched", "plain")}
    assert before["batched"] == before["plain"]
    batched = mem.remember_many(_ctx("batched"), items)
    monkeypatch.setattr(batch_module, "commit_together", _one_by_one)
    plain = mem.remember_many(_ctx("plain"), items)
    assert _outcome(batched) == _outcome(plain)
    assert _holdings(mem, "batched") == _holdings(mem, "plain")
    assert _audit(mem, "batched") == _audit(mem, "plain")
    statuses = {r[5] for r in _holdings(mem, "batched") if r[0] == "planner"}
    assert "retracted" in statuses  # the share copy followed its superseded original
    assert {r.operation.value for r in batched} >= {"ADD", "CONFIRM", "SUPERSEDE"}
    assert mem.audit_verify().ok
