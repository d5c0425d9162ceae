"""``GET /v1/whoami``, ``GET /v1/users`` and ``GET /v1/audit``: what each key may see of
its tenant, on every backend, and never anything of another tenant."""

from __future__ import annotations

from rest_support import OTHER, TENANT, Api

from engram import Context


def _seed(api: Api) -> dict[str, str]:
    """u1 and u2 of acme own memories (u1's corrected), u9 of globex owns one: their ids."""
    acme_u1 = Context(tenant_id=TENANT, user_id="u1")
    first = api.mem.remember(acme_u1, "My timezone is Europe/Paris.", type="profile").record
    assert first is not None
    corrected = api.mem.correct(acme_u1, first.id, "My timezone is Asia/Tokyo.").record
    assert corrected is not None
    other = api.mem.remember(Context(tenant_id=TENANT, user_id="u2"), "I like tea.").record
    globex = api.mem.remember(Context(tenant_id=OTHER, user_id="u9"), "I like coffee.").record
    assert other is not None
    assert globex is not None
    return {"first": first.id, "corrected": corrected.id, "u2": other.id, "globex": globex.id}


def test_whoami_names_the_key_and_its_reach_never_the_secret(api: Api) -> None:
    admin = api.call("GET", "/v1/whoami", "admin")
    assert admin.status_code == 200
    body = admin.json()
    assert body["tenant_id"] == TENANT
    assert body["admin"] is True
    assert body["users"] is None
    assert body["agents"] is None
    assert api.keys["admin"].split("_")[1] == body["key_id"]
    assert api.keys["admin"] not in admin.text
    assert api.keys["admin"].split("_", 2)[2] not in admin.text  # nor the secret (it may hold _)
    scoped = api.call("GET", "/v1/whoami", "scoped").json()
    assert (scoped["admin"], scoped["users"], scoped["agents"]) == (False, ["u1"], ["coder"])
    assert api.call("GET", "/v1/whoami", "other").json()["tenant_id"] == OTHER
    assert api.call("GET", "/v1/whoami", None).status_code == 401
    assert api.call("GET", "/v1/whoami", "revoked").status_code == 401


def test_users_are_the_tenants_for_an_admin_and_the_keys_for_a_limited_key(api: Api) -> None:
    _seed(api)
    admin = api.call("GET", "/v1/users", "admin")
    assert admin.status_code == 200
    assert admin.json() == {"users": ["u1", "u2"], "source": "tenant"}
    assert api.call("GET", "/v1/users?limit=1", "admin").json()["users"] == ["u1"]
    assert api.call("GET", "/v1/users", "other").json()["users"] == ["u9"]
    assert api.call("GET", "/v1/users", "scoped").json() == {"users": ["u1"], "source": "key"}
    refused = api.call("GET", "/v1/users", "user")  # neither admin nor limited to users
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert "admin" in refused.json()["detail"]
    assert api.call("GET", "/v1/users?limit=0", "admin").status_code == 422
    assert api.call("GET", "/v1/users", None).status_code == 401


def test_audit_shows_one_users_ids_and_reasons_never_content(api: Api) -> None:
    ids = _seed(api)
    response = api.call("GET", "/v1/audit?user_id=u1", "admin")
    assert response.status_code == 200, response.text
    log = response.json()
    assert log["user_id"] == "u1"
    assert log["total"] == 2
    assert [e["operation"] for e in log["entries"]] == ["ADD", "SUPERSEDE"]
    assert log["entries"][0]["record_ids"] == [ids["first"]]
    assert set(log["entries"][1]["record_ids"]) == {ids["first"], ids["corrected"]}
    assert log["entries"][0]["seq"] < log["entries"][1]["seq"]
    assert "Tokyo" not in response.text
    assert "Paris" not in response.text
    assert ids["u2"] not in response.text
    assert ids["globex"] not in response.text
    newest = api.call("GET", "/v1/audit?user_id=u1&limit=1", "admin").json()
    assert [e["operation"] for e in newest["entries"]] == ["SUPERSEDE"]
    assert newest["total"] == 2
    plain = api.call("GET", "/v1/audit?user_id=u2", "user")  # a key allowed every user
    assert [e["record_ids"] for e in plain.json()["entries"]] == [[ids["u2"]]]


def test_audit_is_refused_outside_the_keys_reach(api: Api) -> None:
    _seed(api)
    assert api.call("GET", "/v1/audit?user_id=u2", "scoped").status_code == 403  # not its user
    limited = api.call("GET", "/v1/audit?user_id=u1", "scoped")  # its user, but agent-limited
    assert limited.status_code == 403
    assert "agents" in limited.json()["detail"]
    assert api.call("GET", "/v1/audit", "admin").status_code == 422  # no user_id
    assert api.call("GET", "/v1/audit?user_id=", "admin").status_code == 422
    assert api.call("GET", "/v1/audit?user_id=u1", None).status_code == 401


def test_another_tenants_key_sees_nothing_of_this_tenant(api: Api) -> None:
    ids = _seed(api)
    foreign = api.call("GET", "/v1/audit?user_id=u1", "other")  # globex has no u1
    assert foreign.status_code == 200
    assert foreign.json()["entries"] == []
    assert foreign.json()["total"] == 0
    own = api.call("GET", "/v1/audit?user_id=u9", "other").json()
    assert [e["record_ids"] for e in own["entries"]] == [[ids["globex"]]]
    assert api.call("GET", "/v1/audit?user_id=u9", "admin").json()["entries"] == []
    named = api.call("GET", f"/v1/audit?user_id=u1&tenant_id={TENANT}", "other")
    assert named.status_code == 403  # naming another tenant is refused, as everywhere


def test_an_erased_users_audit_log_is_empty(api: Api) -> None:
    _seed(api)
    assert api.call("DELETE", "/v1/users/u1", "admin").status_code == 200
    log = api.call("GET", "/v1/audit?user_id=u1", "admin").json()
    assert log["entries"] == []
    assert api.call("GET", "/v1/users", "admin").json()["users"] == ["u2"]
