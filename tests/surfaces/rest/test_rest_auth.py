"""Identity comes from the API key: no key, a wrong or revoked key, another tenant in the
body, a user or agent outside the key's reach: each refused, and nothing changes."""

from __future__ import annotations

import pytest
from rest_support import OTHER, TENANT, Api

ME = {"user_id": "u1", "agent_id": "coder"}
NOTE = {**ME, "content": "I prefer dark mode in every editor.", "type": "preference"}


@pytest.mark.parametrize("key", [None, "egm_0000000000000000_nope", "not-a-key", "revoked"])
def test_a_missing_wrong_or_revoked_key_is_401_and_stores_nothing(
    api: Api,
    key: str | None,
) -> None:
    response = api.call("POST", "/v1/memories", key, json=NOTE)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"].startswith('Bearer realm="engram"')
    problem = response.json()
    assert problem["type"] == "/problems/unauthorized"
    assert problem["instance"] == "/v1/memories"
    assert api.stored() == []


@pytest.mark.parametrize("key", [None, "egm_0000000000000000_nope", "revoked"])
def test_a_malformed_body_without_a_valid_key_is_401_not_400(api: Api, key: str | None) -> None:
    response = api.call(
        "POST", "/v1/memories", key, content=b'{"user_id": "u1",',
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 401
    assert response.json()["type"] == "/problems/unauthorized"
    assert api.stored() == []


def test_a_key_of_another_scheme_is_401(api: Api) -> None:
    basic = api.call(
        "GET", "/v1/memories?user_id=u1", None, headers={"Authorization": "Basic dTE6cGFzcw=="}
    )
    assert basic.status_code == 401


def test_the_tenant_is_the_keys_and_another_tenants_ids_are_not_found(api: Api) -> None:
    mine = api.call("POST", "/v1/memories", json=NOTE).json()["record"]
    assert mine["tenant_id"] == TENANT
    theirs = api.call("POST", "/v1/memories", "other", json=NOTE).json()["record"]
    assert theirs["tenant_id"] == OTHER
    for path in (
        f"/v1/memories/{mine['id']}?user_id=u1&agent_id=coder",
        f"/v1/memories/{mine['id']}/history?user_id=u1&agent_id=coder",
    ):
        response = api.call("GET", path, "other")
        assert response.status_code == 404
        assert mine["id"] in response.json()["detail"]  # the caller's own words, nothing more
    change = api.call("POST", f"/v1/memories/{mine['id']}/retract", "other", json=ME)
    assert change.status_code == 404
    assert api.call("DELETE", f"/v1/memories/{mine['id']}?user_id=u1", "other").status_code == 404
    assert api.call("DELETE", "/v1/users/u1", "other").json()["records"] == 1  # its own u1 only
    assert api.stored() == [mine["id"]]
    assert (
        api.call("GET", f"/v1/memories/{mine['id']}?user_id=u1&agent_id=coder").json()["status"]
        == "active"
    )


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/memories", {**NOTE, "tenant_id": OTHER}),
        ("POST", "/v1/memories:batch", {**ME, "items": [{"content": "x", "tenant_id": OTHER}]}),
        ("POST", "/v1/recall", {**ME, "query": "theme?", "tenant_id": OTHER}),
        (
            "POST",
            "/v1/memories:global",
            {"content": "All laptops are encrypted.", "tenant_id": OTHER},
        ),
        ("PUT", "/v1/working/step", {**ME, "session_id": "s1", "value": 1, "tenant_id": OTHER}),
    ],
)
def test_a_body_naming_another_tenant_is_403_and_changes_nothing(
    api: Api, method: str, path: str, body: dict[str, object]
) -> None:
    before = api.audit_size()
    response = api.call(method, path, "admin", json=body)
    assert response.status_code == 403, response.text
    assert "tenant" in response.json()["detail"]
    assert api.stored() == []
    assert api.stored(tenant=OTHER) == []
    assert api.audit_size() == before


def test_naming_the_keys_own_tenant_is_still_not_accepted(api: Api) -> None:
    response = api.call("POST", "/v1/memories", json={**NOTE, "tenant_id": TENANT})
    assert response.status_code == 422
    assert "API key decides the tenant" in response.json()["detail"]
    query = api.call("GET", f"/v1/memories?user_id=u1&tenant_id={OTHER}")
    assert query.status_code == 403
    assert api.stored() == []


def test_import_rows_of_another_tenant_are_403(api: Api) -> None:
    rows = [
        {
            "content": "The CI runs on Linux.",
            "tenant_id": OTHER,
            "created_at": "2024-01-01T00:00:00+00:00",
        }
    ]
    response = api.call("POST", "/v1/import", json={**ME, "rows": rows})
    assert response.status_code == 403
    assert api.stored() == []


def test_a_scoped_key_acts_only_for_its_users_and_agents(api: Api) -> None:
    ok = api.call("POST", "/v1/memories", "scoped", json=NOTE)
    assert ok.status_code == 200
    no_agent = {k: v for k, v in NOTE.items() if k != "agent_id"}
    for body in ({**NOTE, "user_id": "u2"}, {**NOTE, "agent_id": "reviewer"}, no_agent):
        refused = api.call("POST", "/v1/memories", "scoped", json=body)
        assert refused.status_code == 403
        detail = refused.json()["detail"]
        assert "may not act for" in detail or "acts only for agents" in detail
    assert api.call("GET", "/v1/memories?user_id=u2", "scoped").status_code == 403
    assert api.call("GET", "/v1/export?user_id=u2", "scoped").status_code == 403
    assert api.stored() == [ok.json()["record"]["id"]]
    assert api.stored("u2") == []


def test_a_revoked_key_stops_working_while_the_server_runs(api: Api, keys_path: object) -> None:
    from engram.surfaces.rest import KeyFile

    assert api.call("GET", "/v1/memories?user_id=u1").status_code == 200
    file = KeyFile(keys_path)  # type: ignore[arg-type]
    user_key = next(k for k in file.read() if api.keys["user"].split("_")[1] == k.key_id)
    file.revoke(user_key.key_id)
    assert api.call("GET", "/v1/memories?user_id=u1").status_code == 401
