"""The record model and the scoped reads (SPEC sections 2 and 7), on every backend."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

import engram
from engram import (
    Authority,
    Context,
    Engram,
    NotFound,
    Operation,
    Record,
    Retention,
    Sensitivity,
    Source,
    SourceKind,
    Status,
    Tier,
)

SPEC_FIELDS = {
    "id", "tenant_id", "user_id", "agent_id", "scope", "tier", "type", "key", "value",
    "content", "authority", "confidence", "source", "observed_at", "valid_from", "valid_to",
    "created_at", "updated_at", "status", "version", "supersedes", "superseded_by",
    "sensitivity", "purpose", "consent_basis", "retention", "expires_at", "importance",
    "access_count", "last_accessed_at", "private", "embedding_model",
}  # fmt: skip


def _aware(value: datetime | None) -> bool:
    return value is not None and value.tzinfo is not None and value.utcoffset() is not None


def test_remember_adds_a_record_with_every_spec_field(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    valid_from = datetime(2024, 4, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    w = mem.remember(
        ctx, "Use Objective-C for iOS implementation.", type="constraint", scope="repo:r1",
        key="ios.language", value="Objective-C", authority="explicit_user", confidence=0.9,
        valid_from=valid_from, source={"kind": "conversation", "ref": "D1:3"},
        importance=0.7, purpose="coding",
    )  # fmt: skip
    assert w.operation == Operation.ADD
    assert w.operation == "ADD"
    assert isinstance(w.reason, str)
    assert w.reason
    assert w.superseded == []
    r = w.record
    assert isinstance(r, Record)
    assert {f.name for f in dataclasses.fields(Record)} >= SPEC_FIELDS
    assert isinstance(r.id, str)
    assert r.id
    assert (r.tenant_id, r.user_id, r.agent_id) == ("acme", "u1", None)  # the user's own
    assert r.scope == "repo:r1"
    assert r.tier is Tier.SEMANTIC
    assert r.type == "constraint"
    assert (r.key, r.value) == ("ios.language", "Objective-C")
    assert r.content == "Use Objective-C for iOS implementation."
    assert r.authority is Authority.EXPLICIT_USER
    assert isinstance(r.confidence, float)
    assert r.confidence == 0.9
    assert r.source == Source(SourceKind.CONVERSATION, "D1:3", ())
    assert (r.source.kind, r.source.ref, r.source.derived_from) == ("conversation", "D1:3", ())
    for name in ("observed_at", "valid_from", "created_at", "updated_at"):
        assert _aware(getattr(r, name)), name
    assert r.valid_from == valid_from
    assert r.observed_at == r.created_at == r.updated_at == clock.now()
    assert r.valid_to is None
    assert r.status is Status.ACTIVE
    assert (r.version, r.supersedes, r.superseded_by) == (1, None, None)
    assert r.sensitivity is Sensitivity.LOW
    assert (r.purpose, r.consent_basis) == ("coding", None)
    assert r.retention is Retention.PERMANENT
    assert r.expires_at is None
    assert (r.importance, r.access_count, r.last_accessed_at) == (0.7, 0, None)
    assert r.private is False
    assert r.embedding_model == mem.embedder.model_id
    assert mem.get(ctx, r.id) == r


def test_unknown_valid_time_stays_unknown_and_retention_gives_expiry(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    r = mem.remember(ctx, "Working on the login screen.", type="task_state").record
    assert r is not None
    assert r.valid_from is None
    assert r.valid_to is None
    assert r.tier is Tier.WORKING
    assert r.retention is Retention.SESSION
    assert r.expires_at == clock.now() + timedelta(hours=24)
    short = mem.remember(ctx, "Prefers dark mode.", retention=Retention.SHORT_TERM).record
    assert short is not None
    assert short.expires_at == clock.now() + timedelta(days=7)


def test_enum_members_are_accepted_wherever_strings_are(mem: Engram, ctx: Context) -> None:
    r = mem.remember(
        ctx, "The build uses Bazel.", type="fact", authority=Authority.TOOL_OBSERVATION,
        sensitivity=Sensitivity.LOW, retention=Retention.LONG_TERM,
        source={"kind": SourceKind.CONVERSATION},
    ).record  # fmt: skip
    assert r is not None
    assert r.authority == "tool_observation"
    assert [x.id for x in mem.list(ctx, status=Status.ACTIVE)] == [r.id]
    assert [x.id for x in mem.list(ctx, status=[Status.ACTIVE, "retracted"])] == [r.id]


def test_ids_sort_by_creation(mem: Engram, ctx: Context, clock: engram.FrozenClock) -> None:
    ids = []
    for i in range(12):
        w = mem.remember(ctx, f"Fact number {i} about the deployment pipeline.")
        assert w.record is not None
        ids.append(w.record.id)
        if i % 3 == 0:
            clock.advance(seconds=1)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_list_filters_orders_and_pages(
    mem: Engram, ctx: Context, clock: engram.FrozenClock
) -> None:
    ids = []
    for i in range(5):
        clock.advance(minutes=1)
        kind = "constraint" if i % 2 else "fact"
        w = mem.remember(ctx, f"Statement {i} about the payment service.", type=kind)
        assert w.record is not None
        ids.append(w.record.id)
    mem.retract(ctx, ids[0])
    newest_first = list(reversed(ids))
    assert [r.id for r in mem.list(ctx)] == newest_first[:-1]
    assert [r.id for r in mem.list(ctx, status=None)] == newest_first
    assert [r.id for r in mem.list(ctx, status="retracted")] == [ids[0]]
    assert [r.id for r in mem.list(ctx, type="constraint")] == [ids[3], ids[1]]
    assert [r.id for r in mem.list(ctx, status=None, limit=2)] == newest_first[:2]
    assert [r.id for r in mem.list(ctx, status=None, limit=2, offset=2)] == newest_first[2:4]


def test_export_returns_json_rows_of_every_status(mem: Engram, ctx: Context) -> None:
    first = mem.remember(ctx, "Deploys happen on Tuesdays.", key="deploy.day", value="tue")
    assert first.record is not None
    mem.correct(ctx, first.record.id, "Deploys happen on Thursdays.", value="thu")
    other = mem.remember(ctx, "The staging host is called beta.").record
    assert other is not None
    mem.retract(ctx, other.id)
    rows = mem.export(ctx)
    json.dumps(rows)
    assert [row["status"] for row in rows] == ["superseded", "active", "retracted"]
    assert set(rows[0]) >= SPEC_FIELDS
    assert rows[1]["supersedes"] == rows[0]["id"]
    assert rows[0]["superseded_by"] == rows[1]["id"]
    assert rows[0]["source"] == {"kind": "conversation", "ref": None, "derived_from": []}


def _other_contexts(ctx: Context) -> dict[str, Context]:
    return {
        "other tenant": dataclasses.replace(ctx, tenant_id="globex"),
        "other user": dataclasses.replace(ctx, user_id="u2"),
        "other agent": dataclasses.replace(ctx, agent_id="reviewer"),
        "no agent": dataclasses.replace(ctx, agent_id=None),
        "other project": dataclasses.replace(ctx, project_id="p2"),
        "no project": dataclasses.replace(ctx, project_id=None),
    }


@pytest.mark.parametrize(
    "who", ["other tenant", "other user", "other agent", "no agent", "other project", "no project"]
)
def test_a_record_outside_the_callers_view_is_not_found(
    mem: Engram, ctx: Context, who: str
) -> None:
    r = mem.remember(ctx, "The mobile app targets iOS 17.", scope="project:p1").record
    assert r is not None
    stranger = _other_contexts(ctx)[who]
    before = mem.export(ctx)
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: mem.get(stranger, r.id),
        "history": lambda: mem.history(stranger, r.id),
        "correct": lambda: mem.correct(stranger, r.id, "The mobile app targets iOS 18."),
        "retract": lambda: mem.retract(stranger, r.id),
        "expire": lambda: mem.expire(stranger, r.id),
        "forget": lambda: mem.forget(stranger, r.id),
    }
    for name, call in calls.items():
        with pytest.raises(NotFound):
            call()
        assert mem.export(ctx) == before, name
    assert r.id not in {row["id"] for row in mem.export(stranger)}
    assert mem.list(stranger, status=None) == []
    assert mem.get(ctx, r.id) == r


def test_agent_independent_and_user_scope_records_are_seen_by_every_agent(
    mem: Engram, ctx: Context
) -> None:
    no_agent = dataclasses.replace(ctx, agent_id=None)
    shared = mem.remember(no_agent, "Prefers concise answers.").record
    own = mem.remember(ctx, "The coder agent uses the repo linter.").record
    assert shared is not None
    assert own is not None
    assert shared.agent_id is None
    for reader in (ctx, dataclasses.replace(ctx, agent_id="reviewer"), no_agent):
        assert mem.get(reader, shared.id) == shared
    assert {r.id for r in mem.list(no_agent)} == {shared.id}
    assert {r.id for r in mem.list(ctx)} == {shared.id, own.id}


def test_unknown_ids_are_not_found(mem: Engram, ctx: Context) -> None:
    with pytest.raises(NotFound):
        mem.get(ctx, "01HZZZZZZZZZZZZZZZZZZZZZZZ")
    with pytest.raises(NotFound):
        mem.history(ctx, "nope")
