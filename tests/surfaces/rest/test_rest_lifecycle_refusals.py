"""The lifecycle routes refuse what they must, on every backend, and nothing changes: a
key that is not an admin (or is limited) on the admin routes, another tenant's ids and
users, bad input, an export file of another tenant or a broken one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rest_support import OTHER, TENANT, Api
from test_rest_lifecycle import DEPLOY, LATER, ME, QUERY, episodes, remember

from engram.surfaces.rest import KeyFile

NDJSON = {"Content-Type": "application/x-ndjson"}
PAIR = {"from_agent": "coder", "to_agent": "reviewer"}


def state(api: Api) -> tuple[Any, ...]:
    """What a refused request must leave as it was: both users' records, the audit
    log's size, both tenants' grants."""
    grants = [api.mem.list_grants(t) for t in (TENANT, OTHER)]
    return api.stored(), api.stored("u2"), api.stored(tenant=OTHER), api.audit_size(), grants


def refused(api: Api, status: int, method: str, path: str, key: str, **kwargs: Any) -> str:
    """Send one request that must be refused with ``status``; its problem's detail."""
    response = api.call(method, path, key, **kwargs)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    detail: str = response.json()["detail"]
    return detail


@pytest.fixture
def seeded(api: Api) -> tuple[Api, str]:
    """A tenant with episodes, a procedure of the coder and a grant coder -> reviewer."""
    episodes(api)
    procedure = remember(api, DEPLOY, type="procedure")
    granted = api.call("POST", "/v1/grants", "admin", json={**PAIR, "types": ["procedure"]})
    assert granted.status_code == 200
    return api, procedure


ADMIN_ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/consolidate", {"json": {"user_id": "u1", "now": LATER}}),
    ("POST", "/v1/consolidate", {"json": {"now": LATER}}),
    ("GET", "/v1/grants", {}),
    ("POST", "/v1/grants", {"json": {**PAIR, "types": ["fact"]}}),
    ("DELETE", "/v1/grants?from_agent=coder&to_agent=reviewer", {}),
    ("POST", "/v1/sweep", {"json": {"now": LATER}}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), ADMIN_ROUTES)
def test_admin_routes_refuse_a_key_that_is_not_an_admin(
    seeded: tuple[Api, str], method: str, path: str, kwargs: dict[str, Any]
) -> None:
    api, _ = seeded
    before = state(api)
    for key in ("user", "scoped"):
        assert "admin key" in refused(api, 403, method, path, key, **kwargs)
    assert state(api) == before


def test_a_limited_admin_key_reaches_only_its_users_and_no_tenant_wide_change(
    seeded: tuple[Api, str], keys_path: Path
) -> None:
    api, _ = seeded
    api.keys["limited"] = KeyFile(keys_path).create(TENANT, admin=True, users=["u1"])[1]
    before = state(api)
    for method, path, kwargs in ADMIN_ROUTES[1:]:
        if method != "GET":  # listing grants is a read of the tenant's policy
            assert "limited" in refused(api, 403, method, path, "limited", **kwargs)
    other_user = {"json": {"user_id": "u2", "now": LATER}}
    assert "may not act for user" in refused(
        api, 403, "POST", "/v1/consolidate", "limited", **other_user
    )
    assert state(api) == before
    mine = api.call("POST", "/v1/consolidate", "limited", json={"user_id": "u1", "now": LATER})
    assert mine.status_code == 200, mine.text
    assert mine.json()["summaries"] == 1


def test_another_tenants_ids_and_users_are_not_found_and_change_nothing(
    seeded: tuple[Api, str],
) -> None:
    api, procedure = seeded
    before = state(api)
    run = {"json": {"user_id": "u1", "now": LATER}}
    refused(api, 404, "POST", "/v1/consolidate", "other", **run)  # globex has no u1
    outcome = {"json": {**ME, "success": True}}
    refused(api, 404, "POST", f"/v1/memories/{procedure}/outcome", "other", **outcome)
    revoke = "/v1/grants?from_agent=coder&to_agent=reviewer"
    assert "no grant" in refused(api, 404, "DELETE", revoke, "other")
    assert api.call("GET", "/v1/grants", "other").json() == {"grants": []}
    theirs = {"json": {**PAIR, "types": ["procedure"]}}
    assert api.call("POST", "/v1/grants", "other", **theirs).status_code == 200
    share = {"json": {**ME, "ids": [procedure], "to_agent_id": "reviewer"}}
    refused(api, 404, "POST", "/v1/share", "other", **share)  # their grant, not our ids
    after = state(api)
    assert after[:3] == before[:3]
    assert after[3] == before[3] + 1  # the one change: globex's own GRANT
    assert after[4][0] == before[4][0]  # acme's grants are as they were
    assert [(g.from_agent, g.to_agent) for g in after[4][1]] == [("coder", "reviewer")]


def test_an_agent_limited_key_shares_only_as_its_agent(seeded: tuple[Api, str]) -> None:
    api, procedure = seeded
    before = state(api)
    as_reviewer = {**ME, "agent_id": "reviewer", "ids": [procedure], "to_agent_id": "coder"}
    assert "may not act for agent" in refused(
        api, 403, "POST", "/v1/share", "scoped", json=as_reviewer
    )
    no_agent = {"user_id": "u1", "ids": [procedure], "to_agent_id": "reviewer"}
    assert "acts only for agents" in refused(api, 403, "POST", "/v1/share", "scoped", json=no_agent)
    no_grant = {**ME, "ids": [procedure], "to_agent_id": "tester"}
    assert "no grant" in refused(api, 403, "POST", "/v1/share", "scoped", json=no_grant)
    assert state(api) == before
    shared = api.call("POST", "/v1/share", "scoped", json={**ME, "ids": [procedure],
                                                            "to_agent_id": "reviewer"})  # fmt: skip
    assert shared.status_code == 200, shared.text


OUTCOME = "/v1/memories/{id}/outcome"
# (path, body, words the problem names); "ID" in a body's ids is the seeded procedure
BAD: list[tuple[str, dict[str, Any], str]] = [
    (OUTCOME, {**ME, "success": True, "reward": 3}, "reward"),
    (OUTCOME, {**ME, "success": "yes"}, "success"),
    (OUTCOME, {**ME, "reward": 0.1}, "success"),
    ("/v1/share", {**ME, "to_agent_id": "reviewer"}, "ids"),
    ("/v1/share", {**ME, "ids": ["ID"], "query": "deploy?", "to_agent_id": "r"}, "not both"),
    ("/v1/share", {**ME, "ids": [], "to_agent_id": "reviewer"}, "ids"),
    ("/v1/share", {"user_id": "u1", "ids": ["ID"], "to_agent_id": "r"}, "agent_id"),
    ("/v1/share", {**ME, "ids": ["ID"], "to_agent_id": "coder"}, "differ"),
    ("/v1/grants", {**PAIR, "types": ["gossip"]}, "gossip"),
    ("/v1/grants", {**PAIR, "types": []}, "types"),
    ("/v1/grants", {"from_agent": "a", "to_agent": "a", "types": ["fact"]}, "differ"),
    ("/v1/consolidate", {"now": "2024-05-09T09:00:00"}, "now"),
    ("/v1/consolidate", {"user_id": "u1", "now": 1715245200}, "now"),
    ("/v1/consolidate", {"user_id": "", "now": LATER}, "user"),
    ("/v1/sweep", {"now": "2024-05-09T09:00:00"}, "now"),
    ("/v1/sweep", {"now": 1715245200}, "now"),
    ("/v1/sweep", {"now": "next week"}, "now"),
    ("/v1/sweep", {"now": "0001-01-01T00:00:00+00:00"}, "now"),
]


@pytest.mark.parametrize(("path", "body", "words"), BAD)
def test_bad_lifecycle_input_is_422_naming_it_and_changes_nothing(
    seeded: tuple[Api, str], path: str, body: dict[str, Any], words: str
) -> None:
    api, procedure = seeded
    before = state(api)
    if "ids" in body:
        body = {**body, "ids": [procedure if i == "ID" else i for i in body["ids"]]}
    assert words in refused(api, 422, "POST", path.format(id=procedure), "admin", json=body)
    assert state(api) == before


def test_a_clock_that_runs_backwards_or_a_fact_is_refused(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    assert api.call("POST", "/v1/consolidate", "admin", json={"now": LATER}).status_code == 200
    before = state(api)
    earlier = {"json": {"user_id": "u1", "now": "2024-05-08T09:00:00+00:00"}}
    refused(api, 422, "POST", "/v1/consolidate", "admin", **earlier)
    fact = remember(api, "The office is on the third floor.", type="fact")
    after_fact = state(api)
    outcome = {"json": {**ME, "success": True}}
    assert "not a procedure" in refused(api, 422, "POST", f"/v1/memories/{fact}/outcome", "user",
                                        **outcome)  # fmt: skip
    assert state(api) == after_fact
    assert before[3] < after_fact[3]  # only the fact's own write


def _export_file(api: Api) -> bytes:
    remember(api, "The build uses Gradle 8.", type="fact", key="build.tool", value="gradle8")
    exported = api.call("GET", f"/v1/export?{QUERY}&format=jsonl")
    assert exported.status_code == 200
    return exported.content


def test_an_export_file_of_another_tenant_user_or_shape_imports_nothing(api: Api) -> None:
    content = _export_file(api)
    header, *lines = content.decode().splitlines()
    foreign = json.dumps({**json.loads(header), "tenant_id": OTHER})
    foreign_file = "\n".join([foreign, *lines]).encode()
    before = state(api)
    for key in ("admin", "other"):
        for rehome in ("false", "true"):
            path = f"/v1/import?user_id=u2&rehome={rehome}"
            body = content if key == "other" else foreign_file
            assert "tenant" in refused(api, 403, "POST", path, key, content=body, headers=NDJSON)
    assert "rehome" in refused(api, 403, "POST", "/v1/import?user_id=u2&agent_id=coder", "user",
                               content=content, headers=NDJSON)  # fmt: skip
    truncated = "\n".join([header]).encode()
    newer = "\n".join([json.dumps({**json.loads(header), "version": 2}), *lines]).encode()
    for body, words in ((truncated, "announces 1 records"), (newer, "version 2"),
                        (b"", "empty"), (b"not json\n", "line 1")):  # fmt: skip
        detail = refused(api, 422, "POST", f"/v1/import?{QUERY}", "user", content=body,
                         headers=NDJSON)  # fmt: skip
        assert words in detail
    assert "user_id" in refused(api, 422, "POST", "/v1/import?agent_id=coder", "user",
                                content=content, headers=NDJSON)  # fmt: skip
    json_body = {"json": {**ME, "rows": []}}
    assert "query" in refused(api, 422, "POST", "/v1/import?user_id=u1", "user", **json_body)
    refused(api, 422, "GET", f"/v1/export?{QUERY}&format=xml", "user")
    assert state(api) == before
