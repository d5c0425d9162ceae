"""Hard deletion: forget one memory with its chain and derived copies; erase a subject."""

from __future__ import annotations

import dataclasses

import pytest
from tests import probes

from engram import Context, Engram, NotFound, Status
from engram.scope import resolve
from engram.store.predicate import Subject, Visibility

ALL = tuple(status.value for status in Status)


def _vector_ids(mem: Engram, ctx: Context, text: str) -> set[str]:
    query = mem.embedder.embed([text])[0]
    vis = Visibility.of(resolve(ctx))
    return {i for i, _ in probes.vector(mem.store, vis, query, mem.embedder.model_id, ALL, 10_000)}


def _lexical_ids(mem: Engram, ctx: Context, text: str) -> set[str]:
    return {i for i, _ in probes.lexical(mem.store, Visibility.of(resolve(ctx)), text, ALL, 10_000)}


def test_forget_deletes_the_chain_derived_copies_and_vectors(mem: Engram, ctx: Context) -> None:
    first = mem.remember(ctx, "Nightly backups run at 02:00.", key="backup.time", value="02:00")
    assert first.record is not None
    second = mem.correct(ctx, first.record.id, "Nightly backups run at 03:00.", value="03:00")
    assert second.record is not None
    chain = [first.record.id, second.record.id]
    summary = mem.remember(ctx, "Summary: backups moved to three in the morning.",
                           type="summary", source={"kind": "consolidation",
                                                   "derived_from": [second.record.id]})  # fmt: skip
    other_user = dataclasses.replace(ctx, user_id="u2")
    copy = mem.remember(other_user, "Shared note: nightly backups happen at 03:00.",
                        source={"kind": "share", "derived_from": [first.record.id]})  # fmt: skip
    keep = mem.remember(ctx, "Backups are stored in the cold bucket.")
    assert summary.record is not None
    assert copy.record is not None
    assert keep.record is not None
    assert set(chain) <= _vector_ids(mem, ctx, "nightly backups")

    receipt = mem.forget(ctx, first.record.id)

    assert receipt.verified is True
    assert set(receipt.deleted) == set(chain)
    assert set(receipt.derived) == {summary.record.id, copy.record.id}
    gone = [*chain, summary.record.id]
    for memory_id in gone:
        with pytest.raises(NotFound):
            mem.get(ctx, memory_id)
    with pytest.raises(NotFound):
        mem.get(other_user, copy.record.id)
    assert [row["id"] for row in mem.export(ctx)] == [keep.record.id]
    assert mem.export(other_user) == []
    assert _vector_ids(mem, ctx, "nightly backups") == {keep.record.id}
    assert _lexical_ids(mem, ctx, "nightly backups") == {keep.record.id}
    assert _lexical_ids(mem, other_user, "nightly backups") == set()
    assert mem.audit_verify().ok


def test_forget_from_any_version_deletes_the_whole_chain(mem: Engram, ctx: Context) -> None:
    first = mem.remember(ctx, "Team size is 5.", key="team.size", value=5).record
    assert first is not None
    latest = mem.correct(ctx, first.id, "Team size is 6.", value=6).record
    assert latest is not None
    receipt = mem.forget(ctx, latest.id)
    assert set(receipt.deleted) == {first.id, latest.id}
    assert receipt.verified
    assert mem.list(ctx, status=None) == []


def _populate(mem: Engram, tenant: str, user: str) -> None:
    base = Context(tenant_id=tenant, user_id=user, agent_id="coder", project_id="p1")
    mem.remember(base, f"{user} prefers vim keybindings.")
    mem.remember(base, f"{user} works on the billing service.", scope="project:p1")
    mem.remember(dataclasses.replace(base, agent_id=None), f"{user} is in the Berlin office.")
    mem.remember(base, f"{user} deploys with helm.", key="deploy.tool", value="helm")
    mem.remember(base, f"{user} deploys with kustomize.", key="deploy.tool", value="kustomize")


def test_erase_subject_removes_everything_of_one_user_only(mem: Engram) -> None:
    for tenant in ("acme", "globex"):
        for user in ("u1", "u2"):
            _populate(mem, tenant, user)
    g = mem.remember_global("acme", "Company holidays follow the Berlin calendar.").record
    assert g is not None
    victim = Context(tenant_id="acme", user_id="u1", agent_id="coder", project_id="p1")
    others = [
        Context(tenant_id="acme", user_id="u2", agent_id="coder", project_id="p1"),
        Context(tenant_id="globex", user_id="u1", agent_id="coder", project_id="p1"),
        Context(tenant_id="globex", user_id="u2", agent_id="coder", project_id="p1"),
    ]
    before = {o: mem.export(o) for o in others}
    vectors_before = {o: _vector_ids(mem, o, "deploys with helm") for o in others}

    receipt = mem.erase_subject("acme", "u1")

    assert receipt.verified is True
    assert (receipt.tenant_id, receipt.user_id, receipt.records) == ("acme", "u1", 5)
    assert [r.id for r in mem.list(victim, status=None)] == [g.id]
    assert mem.export(victim) == []
    assert _vector_ids(mem, victim, "deploys with helm") == {g.id}
    assert _lexical_ids(mem, victim, "deploys helm vim office") == set()
    assert mem.store.subject_residue(Subject("acme", "u1")) == 0
    for other in others:
        assert mem.export(other) == before[other]
        assert _vector_ids(mem, other, "deploys with helm") == vectors_before[other]
    assert mem.audit_verify().ok


def test_erase_subject_also_removes_derived_copies_elsewhere(mem: Engram) -> None:
    u1 = Context(tenant_id="acme", user_id="u1")
    u2 = Context(tenant_id="acme", user_id="u2")
    source = mem.remember(u1, "u1 owns the release checklist.").record
    assert source is not None
    mem.remember(u2, "Copied: u1 owns the release checklist.",
                 source={"kind": "share", "derived_from": [source.id]})  # fmt: skip
    own = mem.remember(u2, "u2 owns the on-call rota.").record
    assert own is not None
    receipt = mem.erase_subject("acme", "u1")
    assert receipt.verified
    assert receipt.derived == 1
    assert [row["id"] for row in mem.export(u2)] == [own.id]


def test_erasing_an_unknown_subject_is_verified_and_empty(mem: Engram) -> None:
    receipt = mem.erase_subject("acme", "nobody")
    assert receipt.verified
    assert receipt.records == 0


def test_forgetting_one_side_of_a_contest_frees_the_other(mem: Engram, ctx: Context) -> None:
    first = mem.remember(ctx, "The office is in Paris.", key="office.city", value="paris",
                         confidence=0.5)  # fmt: skip
    second = mem.remember(ctx, "The office is in Lyon.", key="office.city", value="lyon",
                          confidence=0.5)  # fmt: skip
    assert first.record is not None
    assert second.record is not None
    assert second.operation.value == "CONTEST"
    receipt = mem.forget(ctx, first.record.id)
    assert receipt.verified
    assert "contest links" in receipt.checked
    survivor = mem.get(ctx, second.record.id)
    assert (survivor.status, survivor.contested_with) == (Status.ACTIVE, None)
    assert mem.recall(ctx, "Where is the office? city").status != "ambiguous"


def test_forgetting_the_value_a_dispute_names_clears_the_link(mem: Engram, ctx: Context) -> None:
    held = mem.remember(ctx, "The office is in Paris.", key="office.city", value="paris")
    doubt = mem.remember(ctx, "The office is in Lyon.", key="office.city", value="lyon",
                         source={"kind": "tool", "ref": "crm"})  # fmt: skip
    assert held.record is not None
    assert doubt.record is not None
    assert doubt.record.contested_with == held.record.id
    mem.forget(ctx, held.record.id)
    assert mem.get(ctx, doubt.record.id).contested_with is None
