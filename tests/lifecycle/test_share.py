"""Sharing between agents: grants, eligible copies with provenance, refusals, bad input.

Runs on every backend (SQLite file, SQLite in memory, PostgreSQL). What happens
to copies afterwards (revocation, retraction, correction, expiry, forgetting,
races) is in ``test_share_lifecycle.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tests.conftest import T0

from backends import table_rows
from engram import (
    Budget,
    ConfigError,
    Context,
    Engram,
    Forbidden,
    IncompleteIdentity,
    InvalidArgument,
    NotFound,
    Status,
)
from engram.ids import new_id
from engram.store.contract import Insert
from engram.write.proposal import content_hash

CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder", repository_id="r1")
REVIEWER = dataclasses.replace(CODER, agent_id="reviewer")
TESTER = dataclasses.replace(CODER, agent_id="tester")
BIG = Budget(max_items=10, max_tokens=10_000)
DEPLOY = "Deploy the API with the blue-green script in ops/deploy.sh."


def _remember(mem: Engram, ctx: Context, text: str, **fields: Any) -> str:
    fields.setdefault("type", "procedure")
    written = mem.remember(ctx, text, **fields)
    assert written.record is not None, written.reason
    return written.record.id


def _audit(mem: Engram, operation: str) -> list[dict[str, Any]]:
    return [row for row in table_rows(mem.store, "audit") if row["operation"] == operation]


def test_a_share_gives_the_target_agent_a_copy_with_provenance(mem: Engram) -> None:
    original = _remember(mem, CODER, DEPLOY, scope="repo:r1")
    with pytest.raises(NotFound):
        mem.get(REVIEWER, original)  # an agent's procedure is its own
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    report = mem.share(CODER, [original], "reviewer")
    (item,) = report.items
    assert (item.memory_id, item.outcome, item.operation) == (original, "shared", "ADD")
    assert report.shared == (item.copy_id,)
    assert item.copy_id is not None
    copy = mem.get(REVIEWER, item.copy_id)
    assert (copy.tenant_id, copy.user_id, copy.agent_id) == ("acme", "u1", "reviewer")
    assert (copy.content, copy.scope, copy.type) == (DEPLOY, "repo:r1", "procedure")
    assert copy.authority == "shared"
    assert copy.source.kind == "share"
    assert copy.source.derived_from == (original,)
    assert copy.source.ref is not None
    assert original in copy.source.ref
    assert "coder" in copy.source.ref
    assert item.copy_id in mem.recall(REVIEWER, "How do we deploy the API?", budget=BIG).ids
    with pytest.raises(NotFound):
        mem.get(REVIEWER, original)  # the original stays the coder's
    with pytest.raises(NotFound):
        mem.get(TESTER, item.copy_id)  # and the copy is the reviewer's alone
    assert mem.get(CODER, original).status == Status.ACTIVE


def test_without_a_grant_sharing_is_forbidden_and_writes_nothing(mem: Engram) -> None:
    original = _remember(mem, CODER, DEPLOY)
    with pytest.raises(Forbidden, match="no grant to share with agent 'reviewer'"):
        mem.share(CODER, [original], "reviewer")
    mem.grant_share("acme", "reviewer", "coder", ["procedure"])  # the other direction
    mem.grant_share("acme", "coder", "tester", ["procedure"])  # another target
    with pytest.raises(Forbidden, match="grant_share"):
        mem.share(CODER, [original], "reviewer")
    with pytest.raises(Forbidden):
        mem.share(CODER, "how do we deploy?", "reviewer")
    assert mem.list(REVIEWER, status=None) == []
    assert _audit(mem, "SHARE") == []


def test_ineligible_memories_are_refused_one_by_one_with_a_reason(mem: Engram) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure", "preference"])
    eligible = _remember(mem, CODER, DEPLOY)
    private = _remember(mem, CODER, "Rotate the on-call pager on Fridays.", private=True)
    sensitive = _remember(mem, CODER, "Page Dana on +44 7700 900123 for deploy approvals.",
                          consent_basis="contract")  # fmt: skip
    retracted = _remember(mem, CODER, "Deploy from the release branch only.")
    mem.retract(CODER, retracted)
    fact = _remember(mem, CODER, "The API runs on port 8443.", type="fact")
    stated = _remember(mem, CODER, "I prefer squash merges.", type="preference")
    ids = [eligible, private, sensitive, retracted, fact, stated]
    report = mem.share(CODER, ids, "reviewer")
    assert [(i.memory_id, i.outcome, i.code) for i in report.items] == [
        (eligible, "shared", "add"),
        (private, "refused", "private"),
        (sensitive, "refused", "sensitive"),
        (retracted, "refused", "not_active"),
        (fact, "refused", "type_not_granted"),
        (stated, "refused", "visible_to_every_agent"),
    ]
    assert all(i.reason for i in report.items)
    assert [i.memory_id for i in report.refused] == ids[1:]
    assert [r.id for r in mem.list(REVIEWER, type="procedure")] == list(report.shared)


def test_sharing_again_is_idempotent_and_never_revives_a_retracted_copy(mem: Engram) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    original = _remember(mem, CODER, DEPLOY)
    (first,) = mem.share(CODER, [original], "reviewer").items
    (again,) = mem.share(CODER, [original, original], "reviewer").items
    assert (again.outcome, again.copy_id) == ("already_shared", first.copy_id)
    by_query = mem.share(CODER, "How do we deploy the API?", "reviewer", budget=BIG)
    assert [(i.outcome, i.copy_id) for i in by_query.items] == [("already_shared", first.copy_id)]
    assert first.copy_id is not None
    mem.retract(REVIEWER, first.copy_id, reason="the reviewer deploys differently")
    (later,) = mem.share(CODER, [original], "reviewer").items
    assert (later.outcome, later.copy_id) == ("already_shared", first.copy_id)
    assert "retracted" in later.reason
    copies = [r for r in mem.list(REVIEWER, status=None) if r.source.kind == "share"]
    assert [r.id for r in copies] == [first.copy_id]


def test_share_by_query_copies_what_recall_selects(mem: Engram) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    deploy = _remember(mem, CODER, DEPLOY)
    _remember(mem, CODER, "Rotate the TLS certificates every ninety days.")
    report = mem.share(CODER, "How do we deploy the API with blue-green?", "reviewer",
                       budget=Budget(max_items=1, max_tokens=2_000))  # fmt: skip
    assert [(i.memory_id, i.outcome) for i in report.items] == [(deploy, "shared")]
    assert mem.share(CODER, "zebra migration patterns in antarctica", "reviewer").items == ()


def test_ids_of_another_tenant_or_user_are_not_found_and_nothing_is_written(
    mem: Engram,
) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    mine = _remember(mem, CODER, DEPLOY)
    other_user = _remember(mem, dataclasses.replace(CODER, user_id="u2"), "Deploy with Helm.")
    globex = Context(tenant_id="globex", user_id="u1", agent_id="coder", repository_id="r1")
    other_tenant = _remember(mem, globex, "Deploy with Terraform.")
    for foreign in (other_user, other_tenant):
        with pytest.raises(NotFound, match=foreign):
            mem.share(CODER, [mine, foreign], "reviewer")
    assert mem.list(REVIEWER, status=None) == []
    assert _audit(mem, "SHARE") == []
    with pytest.raises(Forbidden):  # grants are per tenant: globex has none
        mem.share(globex, [other_tenant], "reviewer")
    assert mem.list_grants("globex") == []


def test_personal_data_and_secrets_are_redacted_from_the_copy(mem: Engram) -> None:
    """A record the detectors would flag today (stored before they knew the
    pattern) is still shared without the flagged parts."""
    written = mem.remember(CODER, "Deploy notes for the payments API.", type="procedure")
    assert written.record is not None
    content = ("Deploy notes: ask jane.doe@gmail.com, token ghp_1a2B3c4D5e6F7g8H9i0J"
               "1k2L3m4N5o6P7q8R9s0T.")  # fmt: skip
    value = {"owner": "jane.doe@gmail.com", "port": 8443}
    value = {"owner": "jane.doe@gmail.com", "port": 8443}
    legacy = written.record.replace(id=new_id(), content=content,
                                    content_hash=content_hash(content), value=value)  # fmt: skip
    mem.store.apply([Insert(legacy)])
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    (item,) = mem.share(CODER, [legacy.id], "reviewer").items
    assert item.outcome == "shared"
    assert set(item.redacted) >= {"email"}
    assert item.copy_id is not None
    copy = mem.get(REVIEWER, item.copy_id)
    assert "jane.doe@gmail.com" not in copy.content
    assert "ghp_1a2B3c4D5e6F" not in copy.content
    assert "[REDACTED:email]" in copy.content
    assert copy.value == {"owner": "[REDACTED:email]", "port": 8443}
    assert copy.sensitivity == "low"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m.share(dataclasses.replace(CODER, agent_id=None), ["x"], "reviewer"),
         InvalidArgument, "agent_id"),
        (lambda m: m.share(CODER, ["x"], "coder"), InvalidArgument, "must differ"),
        (lambda m: m.share(CODER, [], "reviewer"), InvalidArgument, "non-empty"),
        (lambda m: m.share(CODER, ["x"], " reviewer"), InvalidArgument, "agent_id"),
        (lambda m: m.share(CODER, [7], "reviewer"), InvalidArgument, "memory_ids"),
        (lambda m: m.share(Context(tenant_id="acme"), ["x"], "reviewer"), IncompleteIdentity,
         "user_id"),
        (lambda m: m.grant_share("acme", "coder", "reviewer", ["spells"]), ConfigError,
         "unknown memory type"),
        (lambda m: m.grant_share("acme", "coder", "reviewer", "procedure"), InvalidArgument,
         "list of memory types"),
        (lambda m: m.grant_share("acme", "coder", "reviewer", []), InvalidArgument, "non-empty"),
        (lambda m: m.grant_share("", "coder", "reviewer", ["fact"]), IncompleteIdentity,
         "tenant_id"),
        (lambda m: m.grant_share("acme", "coder", None, ["fact"]), InvalidArgument, "agent"),
        (lambda m: m.revoke_share("acme", "coder", "reviewer"), NotFound, "no grant"),
        (lambda m: m.list_grants(""), IncompleteIdentity, "tenant_id"),
    ],
)  # fmt: skip
def test_bad_input_is_a_clear_error_and_changes_nothing(
    mem: Engram, call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call(mem)
    assert mem.list_grants("acme") == []
    assert table_rows(mem.store, "audit") == []


def test_grants_are_listed_per_tenant_and_granting_twice_changes_nothing(mem: Engram) -> None:
    held = mem.grant_share("acme", "coder", "reviewer", ["procedure", "fact"], now=T0)
    assert [(g.from_agent, g.to_agent, g.type) for g in held] == [
        ("coder", "reviewer", "fact"), ("coder", "reviewer", "procedure"),
    ]  # fmt: skip
    again = mem.grant_share("acme", "coder", "reviewer", ["fact"])
    assert again == held  # same grants, granted_at kept
    mem.grant_share("globex", "coder", "reviewer", ["episode"])
    assert {g.tenant_id for g in mem.list_grants("acme")} == {"acme"}
    assert [g.type for g in mem.list_grants("globex")] == ["episode"]
    assert len(_audit(mem, "GRANT")) == 2  # the repeated grant changed nothing


def test_every_sharing_change_is_audited_with_ids_and_codes(mem: Engram) -> None:
    mem.grant_share("acme", "coder", "reviewer", ["procedure"])
    original = _remember(mem, CODER, DEPLOY)
    (item,) = mem.share(CODER, [original], "reviewer").items
    mem.revoke_share("acme", "coder", "reviewer")
    (grant,) = _audit(mem, "GRANT")
    assert (grant["actor"], grant["record_ids"]) == ("admin", "[]")
    assert "procedure" in grant["reason"]
    (shared,) = _audit(mem, "SHARE")
    assert shared["actor"] == "agent:coder"
    assert original in shared["record_ids"]
    assert str(item.copy_id) in shared["record_ids"]
    assert "agent:reviewer" in shared["reason"]
    assert any(str(item.copy_id) in row["record_ids"] for row in _audit(mem, "ADD"))
    assert len(_audit(mem, "REVOKE")) == 1
    (deleted,) = _audit(mem, "DELETE")
    assert (deleted["reason"], str(item.copy_id) in deleted["record_ids"]) == (
        "share_revoked", True,
    )  # fmt: skip
    every = " ".join(str(v) for row in table_rows(mem.store, "audit") for v in row.values())
    assert "blue-green" not in every  # ids and codes, never content
    assert mem.audit_verify().ok
