"""The lifecycle routes do what their SDK calls do, on every backend (PostgreSQL with
Redis too): consolidation, procedure outcomes, grants and sharing, the export file."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from rest_support import TENANT, Api
from tests.conftest import T0

from engram import Context

ME = {"user_id": "u1", "agent_id": "coder"}
QUERY = "user_id=u1&agent_id=coder"
LATER = (T0 + timedelta(days=8)).isoformat()  # episodes written at T0 are old enough
DEPLOY = "Deploy the API with the blue-green script in ops/deploy.sh."
EPISODES = (
    "We decided to move the billing service to Postgres 16.",
    "The first migration failed with a lock timeout on the invoices table.",
    "Adding an index fixed it and the migration passed on staging.",
)


def remember(api: Api, content: str, **fields: Any) -> str:
    response = api.call("POST", "/v1/memories", json={**ME, "content": content, **fields})
    assert response.status_code == 200, response.text
    memory_id: str = response.json()["record"]["id"]
    return memory_id


def episodes(api: Api, user: str = "u1") -> list[str]:
    """The test's episodes, one minute apart from T0 (the SDK: REST takes no clock)."""
    ctx = Context(tenant_id=TENANT, user_id=user, agent_id="coder")
    written = [
        api.mem.remember(ctx, text, type="episode", now=T0 + timedelta(minutes=i))
        for i, text in enumerate(EPISODES)
    ]
    return [w.record.id for w in written if w.record is not None]


def test_consolidate_summarises_old_episodes_once(api: Api) -> None:
    ids = episodes(api)
    run = api.call("POST", "/v1/consolidate", "admin", json={"user_id": "u1", "now": LATER})
    assert run.status_code == 200, run.text
    report = run.json()
    assert (report["tenant_id"], report["user_id"], report["episodes"]) == (TENANT, "u1", 3)
    assert report["groups"] == 1
    assert report["summaries"] == 1
    (summary_id,) = report["summary_ids"]
    summary = api.call("GET", f"/v1/memories/{summary_id}?{QUERY}").json()
    assert summary["type"] == "summary"
    assert summary["source"]["derived_from"] == ids
    again = api.call("POST", "/v1/consolidate", "admin", json={"user_id": "u1", "now": LATER})
    assert (again.json()["groups"], again.json()["summaries"]) == (0, 0)  # idempotent
    tenant = api.call("POST", "/v1/consolidate", "admin", json={"now": LATER})
    assert tenant.status_code == 200, tenant.text
    assert (tenant.json()["user_id"], tenant.json()["users"]) == (None, 1)


def test_record_outcome_counts_successes_and_failures(api: Api) -> None:
    procedure = remember(api, DEPLOY, type="procedure")
    path = f"/v1/memories/{procedure}/outcome"
    first = api.call("POST", path, json={**ME, "success": True, "reward": 0.5})
    assert first.status_code == 200, first.text
    assert first.json() == {
        "procedure_id": procedure,
        "successes": 1,
        "failures": 0,
        "success_rate": 2 / 3,
        "mean_reward": 0.5,
    }
    second = api.call("POST", path, json={**ME, "success": False}).json()
    assert (second["successes"], second["failures"], second["success_rate"]) == (1, 1, 0.5)


def test_grants_then_share_by_ids_and_by_query_then_revoke(api: Api) -> None:
    pair = {"from_agent": "coder", "to_agent": "reviewer"}
    granted = api.call("POST", "/v1/grants", "admin", json={**pair, "types": ["procedure"]})
    assert granted.status_code == 200, granted.text
    assert [g["type"] for g in granted.json()["grants"]] == ["procedure"]
    listed = api.call("GET", "/v1/grants", "admin").json()["grants"]
    assert [(g["tenant_id"], g["from_agent"], g["to_agent"]) for g in listed] == [
        (TENANT, "coder", "reviewer")
    ]
    procedure = remember(api, DEPLOY, type="procedure")
    private = remember(
        api, "Run the smoke tests before every release.", type="procedure", private=True
    )
    body = {**ME, "to_agent_id": "reviewer"}
    shared = api.call("POST", "/v1/share", json={**body, "ids": [procedure, private]})
    assert shared.status_code == 200, shared.text
    report = shared.json()
    assert (report["from_agent"], report["to_agent"]) == ("coder", "reviewer")
    first, second = report["items"]
    assert (first["memory_id"], first["outcome"], first["operation"]) == (
        procedure,
        "shared",
        "ADD",
    )
    assert (second["outcome"], second["code"]) == ("refused", "private")
    assert report["shared"] == [first["copy_id"]]
    copy = api.call("GET", f"/v1/memories/{first['copy_id']}?user_id=u1&agent_id=reviewer")
    assert copy.json()["source"]["derived_from"] == [procedure]
    by_query = api.call(
        "POST",
        "/v1/share",
        json={**body, "query": "How do we deploy the API?", "budget": {"max_items": 4}},
    )
    assert by_query.status_code == 200, by_query.text
    assert [i["outcome"] for i in by_query.json()["items"]][:1] == ["already_shared"]
    revoked = api.call("DELETE", "/v1/grants?from_agent=coder&to_agent=reviewer", "admin")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["deleted"] == [first["copy_id"]]
    assert api.call("GET", "/v1/grants", "admin").json() == {"grants": []}
    gone = api.call("GET", f"/v1/memories/{first['copy_id']}?user_id=u1&agent_id=reviewer")
    assert gone.status_code == 404


def test_the_export_file_streams_and_imports_back(api: Api) -> None:
    first = remember(
        api, "The build uses Gradle 7.", type="fact", key="build.tool", value="gradle7"
    )
    fixed = api.call(
        "POST",
        f"/v1/memories/{first}/correct",
        json={**ME, "content": "The build uses Gradle 8.", "value": "gradle8"},
    )
    assert fixed.status_code == 200
    exported = api.call("GET", f"/v1/export?{QUERY}&format=jsonl")
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in exported.headers["content-disposition"]
    header, *rows = [json.loads(line) for line in exported.text.splitlines()]
    assert (header["format"], header["version"], header["records"]) == ("engram-export", 1, 2)
    assert (header["tenant_id"], header["user_id"], header["agent_id"]) == (TENANT, "u1", "coder")
    assert [r["status"] for r in rows] == ["superseded", "active"]
    ndjson = {"Content-Type": "application/x-ndjson"}
    same = api.call("POST", f"/v1/import?{QUERY}", content=exported.content, headers=ndjson)
    assert same.status_code == 200, same.text
    assert same.json()["imported"] == 0  # its own memories: already stored
    moved = api.call(
        "POST",
        "/v1/import?user_id=u2&agent_id=coder&rehome=true",
        content=exported.content,
        headers=ndjson,
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["imported"] == 2
    chain = api.call("GET", "/v1/memories?user_id=u2&agent_id=coder&status=all").json()["items"]
    assert sorted(r["status"] for r in chain) == ["active", "superseded"]
    as_json = api.call("GET", f"/v1/export?{QUERY}&format=json").json()
    assert [r["id"] for r in as_json["rows"]] == [r["id"] for r in rows]
