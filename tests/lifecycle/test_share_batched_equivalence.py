"""A share through ``commit_together`` lands as the one-by-one commits did."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from engram import Context, Engram
from engram.lifecycle import share as share_module
from engram.write.commit import Owner
from engram.write.path import Prepared, WritePath


def _one_by_one(
    writer: WritePath, jobs: Sequence[tuple[Owner, Prepared]], now: datetime, shape: Any = None
) -> list[list[Any]]:
    return [writer.commit_prepared(owner, prepared, now) for owner, prepared in jobs]


def _ctx(user: str, agent: str) -> Context:
    return Context(tenant_id="acme", user_id=user, agent_id=agent, repository_id="r1")


def _rem(mem: Engram, c: Context, t: str, **f: Any) -> Any:
    return mem.remember(c, t, **{"type": "procedure", **f}).record


def _held(mem: Engram, user: str) -> None:
    reviewer = _ctx(user, "reviewer")
    rem = lambda c, t, **f: _rem(mem, c, t, **f)  # noqa: E731
    # reviewer holdings
    rem(reviewer, "Held text one about linting.", scope="user")
    rem(reviewer, "Old port value 8443.", key="api.port", value=8443, scope="user")
    rem(reviewer, "Soon expired config value.", key="cfg.x", value=1, retention="short_term")
    gone = rem(reviewer, "Forgotten staging password rotates.")
    mem.forget(reviewer, gone.id)
    shared_on = rem(reviewer, "Reviewer timeout is 30s.", key="timeout", value=30)
    mem.share(reviewer, [shared_on.id], "tester")
    team = rem(_ctx(user, "tester"), "The owning team is alpha.", key="owner.team", value="a")
    assert mem.share(_ctx(user, "tester"), [team.id], "reviewer").items[0].outcome == "shared"


def _setup(mem: Engram, user: str, rng: random.Random) -> list[str]:
    coder = _ctx(user, "coder")
    rem = lambda c, t, **f: _rem(mem, c, t, **f)  # noqa: E731
    ids: list[str] = []
    texts = [
        ("Fresh memory about reviews.", {}),
        ("Held text one about linting.", {}),
        ("New port value 9443.", {"key": "api.port", "value": 9443}),
        ("Fresh memory about reviews.", {"scope": "repo:r1"}),
        ("Forgotten staging password rotates.", {}),
        ("Short lived procedure note.", {"retention": "short_term"}),
        ("New config value two.", {"key": "cfg.x", "value": 2}),
        ("Coder timeout is 60s.", {"key": "timeout", "value": 60, "retention": "short_term"}),
        ("Held text one about linting.", {"scope": "repo:r1"}),
        ("The owning team is beta.", {"key": "owner.team", "value": "b"}),
    ]
    for text, fields in texts:
        record = rem(coder, text, **fields)
        assert record is not None, text
        ids.append(record.id)
    rng.shuffle(ids)
    return ids


def _holdings(mem: Engram, user: str) -> list[tuple[Any, ...]]:
    out = []
    for agent in ("reviewer", "tester"):
        for r in mem.list(_ctx(user, agent), status=None, limit=500):
            out.append(
                (
                    agent,
                    r.scope,
                    r.key,
                    r.content,
                    r.status.value,
                    r.expires_at,
                    r.contested_with is not None,
                    r.version,
                )
            )
    return sorted(out, key=repr)


@pytest.mark.parametrize("seed", range(4))
def test_share_batched_equals_one_by_one(
    mem: Engram, clock: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for source, agent in (("coder", "reviewer"), ("reviewer", "tester"), ("tester", "reviewer")):
        mem.grant_share("acme", source, agent, ["procedure"])
    for u in ("batched", "plain"):
        _held(mem, u)
    clock.advance(days=8)
    ids = {u: _setup(mem, u, random.Random(seed)) for u in ("batched", "plain")}
    clock.advance(days=1)
    batched = mem.share(_ctx("batched", "coder"), ids["batched"], "reviewer")
    monkeypatch.setattr(share_module, "commit_together", _one_by_one)
    plain = mem.share(_ctx("plain", "coder"), ids["plain"], "reviewer")
    shape = lambda rep: [(i.outcome, i.code, i.operation) for i in rep.items]  # noqa: E731
    assert shape(batched) == shape(plain)
    assert _holdings(mem, "batched") == _holdings(mem, "plain")
    again = mem.share(_ctx("batched", "coder"), ids["batched"], "reviewer")
    assert {i.outcome for i in again.items} <= {"already_shared", "refused"}
