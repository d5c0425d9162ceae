"""``write.bulk``: a batch decided on one read lands as one-by-one commits would.

``commit_together`` (a share's copies) reads every slot at once and writes every
copy in one apply. These tests write the same proposals for two users whose
slots hold the same things, one through ``commit_together`` and one through
``commit_prepared`` job by job (the order it replaces), and compare what each
decided and what each store holds afterwards, on every backend. The batch mixes
what the one-read decision must get right (a new memory, a duplicate of what
the slot holds, a new value of a held key, a second scope) with what it must
leave to the one-by-one path (two proposals of one content, a content that meets
a tombstone), and a recording write path checks which ones went that way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from engram import Authority, Context, Engram, Source, SourceKind
from engram.ids import new_id
from engram.store.contract import Insert
from engram.types import Proposal, WriteResult
from engram.write.bulk import commit_together
from engram.write.commit import Owner
from engram.write.path import Prepared, WritePath
from engram.write.slots import lock_in_order

HELD = "Run the linter before every review."
GONE = "The staging password rotates on Fridays."
DUP = "Check the flaky test list before retrying CI."


def _proposal(content: str, scope: str = "user", **fields: object) -> Proposal:
    base = Proposal(content=content, type="fact", scope=scope, authority=Authority.SHARED,
                    source=Source(SourceKind.SHARE, "share:test"), agent_scope="agent")  # fmt: skip
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


BATCH = [
    _proposal("Reviews need two approvals on the main branch."),  # new
    _proposal(HELD),  # the slot holds it: confirmed
    _proposal("The API listens on port 9443.", key="api.port", value=9443),  # a held key
    _proposal(DUP),  # these two meet each other: one by one
    _proposal(DUP),
    _proposal(GONE),  # forgotten by the user: refused, one by one
]
IN_REPO = [_proposal("Release branches are cut on Tuesdays.", scope="repo:r1"),
           _proposal(HELD, scope="repo:r1")]  # fmt: skip


class Recording(WritePath):
    """A write path that notes how many proposals each one-by-one commit was given."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.one_by_one: list[int] = []

    def commit_prepared(self, owner: Owner, prepared: Prepared, now: datetime,
                        unseen: object = None) -> list[WriteResult]:  # fmt: skip
        self.one_by_one.append(len(prepared.proposals))
        return super().commit_prepared(owner, prepared, now, unseen)  # type: ignore[arg-type]


def _held(mem: Engram, user: str) -> None:
    """What the reviewer of ``user`` holds before the batch."""
    reviewer = Context(tenant_id="acme", user_id=user, agent_id="reviewer", repository_id="r1")
    for scope in ("user", "repo:r1"):
        mem.remember(reviewer, HELD, type="fact", scope=scope, agent_scope="agent")
    mem.remember(reviewer, "The API listens on port 8443.", type="fact", key="api.port",
                 value=8443, agent_scope="agent")  # fmt: skip
    gone = mem.remember(reviewer, GONE, type="fact", agent_scope="agent").record
    assert gone is not None
    mem.forget(reviewer, gone.id)


def _jobs(writer: WritePath, user: str) -> list[tuple[Owner, Prepared]]:
    owners = [Owner("acme", user, "reviewer", scope, "agent:coder", "reviewer")
              for scope in ("user", "repo:r1")]  # fmt: skip
    return [(owners[0], writer.prepare(BATCH)), (owners[1], writer.prepare(IN_REPO))]


def _outcomes(results: Sequence[Sequence[WriteResult]]) -> list[tuple[str, str | None, int]]:
    return [(r.operation.value, r.record.content if r.record else None, len(r.superseded))
            for job in results for r in job]  # fmt: skip


def _holdings(mem: Engram, user: str) -> list[tuple[str, str, str]]:
    reviewer = Context(tenant_id="acme", user_id=user, agent_id="reviewer", repository_id="r1")
    return sorted((r.scope, r.content, r.status.value) for r in mem.list(reviewer, status=None))


def test_a_batch_decides_and_writes_what_one_by_one_commits_would(mem: Engram) -> None:
    for user in ("batched", "one_by_one"):
        _held(mem, user)
    now = mem.clock.now()
    writer = Recording(mem.store, mem.embedder, mem.config)
    jobs = _jobs(writer, "batched")
    with mem.store.transaction():
        lock_in_order(
            mem.store,
            [
                (o.slot, p.key, h)
                for o, ready in jobs
                for p, h in zip(ready.proposals, ready.hashes, strict=True)
            ],
        )
        batched = commit_together(writer, jobs, now)
    assert writer.one_by_one == [3]  # the two of one content and the forgotten one
    plain = WritePath(mem.store, mem.embedder, mem.config)
    with mem.store.transaction():
        one_by_one = [plain.commit_prepared(o, p, now) for o, p in _jobs(plain, "one_by_one")]
    assert _outcomes(batched) == _outcomes(one_by_one)
    ops = [op for op, _, _ in _outcomes(batched)]
    assert ops[1] == ops[4] == ops[7] == "CONFIRM"
    assert ops[5] == "REJECT"
    assert _holdings(mem, "batched") == _holdings(mem, "one_by_one")


def test_a_share_with_copies_that_meet_each_other_reports_as_before(mem: Engram) -> None:
    """Two originals of one content in one slot: the first is copied, the second
    meets that copy and is reported as already held by the target agent."""
    coder = Context(tenant_id="acme", user_id="u1", agent_id="coder")
    mem.grant_share("acme", "coder", "reviewer", ["fact"])
    first = mem.remember(coder, DUP, type="fact", agent_scope="agent").record
    assert first is not None
    twin = first.replace(id=new_id())
    mem.store.apply([Insert(twin)])
    other = mem.remember(coder, HELD, type="fact", agent_scope="agent").record
    assert other is not None
    items = mem.share(coder, [first.id, twin.id, other.id], "reviewer").items
    assert [i.outcome for i in items] == ["shared", "already_shared", "shared"]
    assert items[1].code == "already_held"
    assert items[1].copy_id == items[0].copy_id
