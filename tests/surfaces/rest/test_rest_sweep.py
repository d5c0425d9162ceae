"""``POST /v1/sweep`` does what ``Engram.sweep`` does for the key's tenant, and only
for it, on every backend (PostgreSQL with Redis too): what retention ended is gone,
the report says so, another tenant's memories stay, a body naming another tenant
sweeps nothing. (Keys that are not a whole-tenant admin and a bad ``now`` are in
``test_rest_lifecycle_refusals``; malformed bodies in ``test_rest_bad_input``.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_support import OTHER, TENANT, Api
from tests.conftest import T0

ME = {"user_id": "u1", "agent_id": "coder"}
QUERY = "user_id=u1&agent_id=coder"
DUE = (T0 + timedelta(hours=2)).isoformat()  # a transient memory written at T0 is due


def remember(api: Api, key: str, content: str, **fields: object) -> str:
    """A memory written through REST at the test clock's T0; its id."""
    response = api.call("POST", "/v1/memories", key, json={**ME, "content": content, **fields})
    assert response.status_code == 200, response.text
    memory_id: str = response.json()["record"]["id"]
    return memory_id


def found(api: Api, key: str, memory_id: str) -> int:
    """The status of reading ``memory_id`` with ``key`` (200 or 404)."""
    return api.call("GET", f"/v1/memories/{memory_id}?{QUERY}", key).status_code


def test_the_sweep_deletes_what_retention_ended_in_the_keys_tenant_only(
    api: Api, store_url: str
) -> None:
    note = remember(api, "user", "The build cache lives on volume nine.", retention="transient")
    keep = remember(api, "user", "Never deploy on a Friday afternoon.", type="rule")
    theirs = remember(api, "other", "Globex's cache lives on volume two.", retention="transient")

    swept = api.call("POST", "/v1/sweep", "admin", json={"now": DUE})

    assert swept.status_code == 200, swept.text
    report = swept.json()
    assert report["tenants"] == [TENANT]
    assert (report["expired"], report["pruned"], report["versions"]) == (1, 0, 0)
    assert report["deleted"] == {"retention_ended": 1, "decay_pruned": 0}
    assert (report["batches"], report["clock_behind"], report["failed"]) == (1, [], [])
    assert report["now"] == DUE
    assert len(report["audit_ids"]) == 2  # the deletion's entry and the tenant's SWEEP
    if store_url != "sqlite://:memory:":  # a file or a server: a WAL checkpoint or VACUUM
        assert report["checked"]
    assert (found(api, "user", note), found(api, "user", keep)) == (404, 200)
    assert found(api, "other", theirs) == 200  # another tenant is never swept
    assert api.call("GET", "/v1/audit/verify", "admin").json()["ok"] is True
    theirs_swept = api.call("POST", "/v1/sweep", "other", json={"now": DUE}).json()
    assert (theirs_swept["tenants"], theirs_swept["expired"]) == ([OTHER], 1)
    assert found(api, "other", theirs) == 404


def test_without_now_the_sweep_runs_at_the_clock_and_reports_it_behind(api: Api) -> None:
    remember(api, "user", "The build cache lives on volume nine.", retention="transient")
    assert api.call("POST", "/v1/sweep", "admin", json={"now": DUE}).json()["expired"] == 1
    later = remember(api, "user", "The staging cache lives on volume three.",
                     retention="transient")  # fmt: skip

    behind = api.call("POST", "/v1/sweep", "admin", json={})  # the clock: T0, before DUE

    assert behind.status_code == 200, behind.text
    report = behind.json()
    assert (report["now"], report["clock_behind"]) == (T0.isoformat(), [TENANT])
    assert (report["expired"], report["batches"]) == (0, 0)
    assert found(api, "user", later) == 200  # not due at the clock's time


@pytest.mark.parametrize("key", ["admin", "other"])
def test_a_body_naming_another_tenant_is_403_and_sweeps_nothing(api: Api, key: str) -> None:
    mine = remember(api, "user", "The build cache lives on volume nine.", retention="transient")
    theirs = remember(api, "other", "Globex's cache lives on volume two.", retention="transient")
    before = (api.stored(), api.stored(tenant=OTHER), api.audit_size())
    named = OTHER if key == "admin" else TENANT  # the tenant the key does not act for

    refused = api.call("POST", "/v1/sweep", key, json={"now": DUE, "tenant_id": named})

    assert refused.status_code == 403, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert "another tenant" in refused.json()["detail"]
    assert (api.stored(), api.stored(tenant=OTHER), api.audit_size()) == before
    assert (found(api, "user", mine), found(api, "other", theirs)) == (200, 200)


def test_naming_the_keys_own_tenant_is_422_and_sweeps_nothing(api: Api) -> None:
    mine = remember(api, "user", "The build cache lives on volume nine.", retention="transient")
    before = api.audit_size()
    refused = api.call("POST", "/v1/sweep", "admin", json={"now": DUE, "tenant_id": TENANT})
    assert refused.status_code == 422, refused.text
    assert "API key decides the tenant" in refused.json()["detail"]
    assert api.audit_size() == before
    assert found(api, "user", mine) == 200
