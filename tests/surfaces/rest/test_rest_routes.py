"""Every route does what its SDK call does, on every backend (PostgreSQL with Redis too)."""

from __future__ import annotations

from typing import Any

from rest_support import TENANT, Api

ME = {"user_id": "u1", "agent_id": "coder", "session_id": "s1", "task_id": "t1"}
QUERY = "user_id=u1&agent_id=coder&session_id=s1&task_id=t1"


def remember(api: Api, content: str, **fields: Any) -> dict[str, Any]:
    response = api.call("POST", "/v1/memories", json={**ME, "content": content, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_remember_then_recall_explains_the_choice(api: Api) -> None:
    written = remember(
        api,
        "Use Objective-C for iOS implementation.",
        type="constraint",
        key="ios.language",
        value="Objective-C",
    )
    assert written["operation"] == "ADD"
    assert written["record"]["tenant_id"] == TENANT
    response = api.call(
        "POST",
        "/v1/recall",
        json={
            **ME,
            "query": "Which language for the iOS implementation?",
            "budget": {"max_items": 4, "max_tokens": 500},
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "ok"
    assert [i["record"]["id"] for i in result["items"]] == [written["record"]["id"]]
    assert result["items"][0]["components"]
    assert result["items"][0]["reason"]
    assert "Objective-C" in result["prompt"]
    assert result["trace"]["trace_id"] == result["trace_id"]
    trace = api.call("GET", f"/v1/traces/{result['trace_id']}?{QUERY}")
    assert trace.status_code == 200
    assert trace.json()["selected"][0]["id"] == written["record"]["id"]
    assert "Objective-C" not in trace.text  # a trace holds ids and numbers, no content


def test_a_second_statement_of_a_key_supersedes_and_history_shows_both(api: Api) -> None:
    first = remember(
        api,
        "My timezone is Europe/Paris.",
        type="profile",
        key="user.timezone",
        value="Europe/Paris",
    )
    second = remember(
        api, "My timezone is Asia/Tokyo.", type="profile", key="user.timezone", value="Asia/Tokyo"
    )
    assert second["operation"] == "SUPERSEDE"
    assert second["superseded"] == [first["record"]["id"]]
    chain = api.call("GET", f"/v1/memories/{second['record']['id']}/history?{QUERY}").json()
    assert [v["id"] for v in chain["versions"]] == [first["record"]["id"], second["record"]["id"]]
    got = api.call("GET", f"/v1/memories/{first['record']['id']}?{QUERY}").json()
    assert got["status"] == "superseded"


def test_batch_observe_and_list_pages(api: Api) -> None:
    items = [{"content": f"The staging server number {n} runs Debian."} for n in range(3)]
    batch = api.call("POST", "/v1/memories:batch", json={**ME, "items": items})
    assert batch.status_code == 200, batch.text
    assert [r["operation"] for r in batch.json()["results"]] == ["ADD"] * 3
    turns = [{"role": "user", "text": "I prefer tabs over spaces in every project."}]
    observed = api.call("POST", "/v1/observe", json={**ME, "turns": turns})
    assert observed.status_code == 200, observed.text
    page = api.call("GET", f"/v1/memories?{QUERY}&limit=2").json()
    assert len(page["items"]) == 2
    assert page["next_offset"] == 2
    rest = api.call("GET", f"/v1/memories?{QUERY}&limit=2&offset=2").json()
    total = 3 + len(observed.json()["results"])
    assert len(page["items"]) + len(rest["items"]) == min(total, 4)
    everything = api.call("GET", f"/v1/memories?{QUERY}&status=all&limit=100").json()
    assert len(everything["items"]) == len(api.stored())


def test_correct_retract_expire_and_forget(api: Api) -> None:
    one = remember(api, "The build uses Gradle 7.", type="fact", key="build.tool", value="gradle7")
    fixed = api.call(
        "POST",
        f"/v1/memories/{one['record']['id']}/correct",
        json={**ME, "content": "The build uses Gradle 8.", "value": "gradle8"},
    )
    assert fixed.status_code == 200
    assert fixed.json()["operation"] == "SUPERSEDE"
    stale = api.call(
        "POST",
        f"/v1/memories/{one['record']['id']}/correct",
        json={**ME, "content": "The build uses Maven."},
    )
    assert stale.status_code == 409
    assert stale.json()["type"] == "/problems/conflict"
    two = remember(api, "The office is on the third floor.")
    gone = api.call(
        "POST",
        f"/v1/memories/{two['record']['id']}/retract",
        json={**ME, "reason": "the user moved"},
    )
    assert gone.status_code == 200
    assert gone.json()["operation"] == "RETRACT"
    three = remember(api, "The sprint ends on Friday.")
    ended = api.call("POST", f"/v1/memories/{three['record']['id']}/expire", json=ME)
    assert ended.status_code == 200
    assert ended.json()["operation"] == "EXPIRE"
    receipt = api.call("DELETE", f"/v1/memories/{fixed.json()['record']['id']}?{QUERY}")
    assert receipt.status_code == 200, receipt.text
    assert receipt.json()["verified"] is True
    assert set(receipt.json()["deleted"]) == {one["record"]["id"], fixed.json()["record"]["id"]}
    missing = api.call("GET", f"/v1/memories/{one['record']['id']}?{QUERY}")
    assert missing.status_code == 404
    assert missing.json()["type"] == "/problems/not-found"


def test_export_then_import_into_another_user(api: Api) -> None:
    remember(api, "The deploy window is Tuesday morning.", type="decision")
    exported = api.call("GET", f"/v1/export?{QUERY}")
    assert exported.status_code == 200
    rows = exported.json()["rows"]
    assert rows
    assert all(row["tenant_id"] == TENANT for row in rows)
    target = {**ME, "user_id": "u2"}
    report = api.call("POST", "/v1/import", json={**target, "rows": rows})
    assert report.status_code == 200, report.text
    assert report.json()["imported"] == len(rows)
    again = api.call("POST", "/v1/import", json={**target, "rows": rows}).json()
    assert again["imported"] == 0  # idempotent
    assert len(api.stored("u2")) == len(rows)


def test_working_memory_set_get_list_delete_clear(api: Api) -> None:
    put = api.call("PUT", "/v1/working/step", json={**ME, "value": {"done": 3}, "ttl_seconds": 60})
    assert put.status_code == 200, put.text
    assert put.json()["kind"] == "task"
    assert put.json()["scope_id"] == "t1"
    api.call("PUT", "/v1/working/plan/next", json={**ME, "value": ["a", "b"]})
    got = api.call("GET", f"/v1/working/step?{QUERY}")
    assert got.status_code == 200
    assert got.json()["value"] == {"done": 3}
    nested = api.call("GET", f"/v1/working/plan/next?{QUERY}")
    assert nested.json()["value"] == ["a", "b"]
    listed = api.call("GET", f"/v1/working?{QUERY}").json()["items"]
    assert sorted(i["key"] for i in listed) == ["plan/next", "step"]
    session = api.call("GET", f"/v1/working?{QUERY}&kind=session").json()["items"]
    assert session == []  # the session is another scope
    assert api.call("DELETE", f"/v1/working/step?{QUERY}").json() == {"removed": 1}
    assert api.call("GET", f"/v1/working/step?{QUERY}").status_code == 404
    assert api.call("DELETE", f"/v1/working?{QUERY}").json() == {"removed": 1}


def test_admin_routes_need_an_admin_key(api: Api) -> None:
    body = {"content": "All laptops use disk encryption.", "type": "rule"}
    assert api.call("POST", "/v1/memories:global", "user", json=body).status_code == 403
    written = api.call("POST", "/v1/memories:global", "admin", json=body)
    assert written.status_code == 200, written.text
    assert written.json()["record"]["scope"] == "global"
    assert written.json()["record"]["authority"] == "explicit_admin"
    seen = api.call("GET", f"/v1/memories/{written.json()['record']['id']}?user_id=u9")
    assert seen.status_code == 200  # every user of the tenant sees it
    remember(api, "I like green tea.")
    assert api.call("DELETE", "/v1/users/u1", "user").status_code == 403
    erased = api.call("DELETE", "/v1/users/u1", "admin")
    assert erased.status_code == 200, erased.text
    assert erased.json()["verified"] is True
    assert erased.json()["records"] >= 1
    assert api.stored("u1") == []
    assert api.call("GET", "/v1/audit/verify", "user").status_code == 403
    audit = api.call("GET", "/v1/audit/verify", "admin")
    assert audit.status_code == 200
    assert audit.json() == {"ok": True, "detail": "the audit chain verifies"}


def test_health_readiness_schema_and_problem_types(api: Api) -> None:
    assert api.call("GET", "/healthz", None).json() == {"status": "ok"}
    assert api.call("GET", "/readyz", None).json() == {"status": "ready"}
    schema = api.call("GET", "/openapi.json", None).json()
    assert "/v1/recall" in schema["paths"]
    assert "Problem" in schema["components"]["schemas"]
    kind = api.call("GET", "/problems/not-found", None)
    assert kind.json() == {"type": "/problems/not-found", "title": "Not found", "status": 404}


def test_every_declared_503_declares_its_retry_after(api: Api) -> None:
    """Every 503 the server sends carries ``Retry-After`` (``/readyz`` too); the schema
    says so wherever it declares a 503."""
    paths = api.call("GET", "/openapi.json", None).json()["paths"]
    declared = {(path, method): op["responses"]["503"] for path, ops in paths.items()
                for method, op in ops.items() if "503" in op.get("responses", {})}  # fmt: skip
    assert ("/readyz", "get") in declared
    assert [
        key for key, answer in declared.items() if "Retry-After" not in answer.get("headers", {})
    ] == []
