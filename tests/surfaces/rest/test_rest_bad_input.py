"""Bad input on every route gets a 4xx problem with a clear message, and loses nothing:
the store holds what it held before (records and audit entries)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from numpy.typing import NDArray
from rest_support import Api, build_app, make_keys

from engram import Config, EmbeddingError, Engram
from engram.config import WritePolicy
from engram.embed.base import Wrapped
from engram.embed.hashing import HashingEmbedder

ME = {"user_id": "u1", "agent_id": "coder", "session_id": "s1", "task_id": "t1"}
QUERY = "user_id=u1&agent_id=coder&session_id=s1&task_id=t1"
# (method, path, a valid body): the routes that take a body. {id} is a stored memory.
BODIES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/memories", {**ME, "content": "The build uses Gradle."}),
    ("POST", "/v1/memories:batch", {**ME, "items": [{"content": "The build uses Gradle."}]}),
    ("POST", "/v1/observe", {**ME, "turns": [{"role": "user", "text": "I like tea."}]}),
    ("POST", "/v1/memories:global", {"content": "All laptops use disk encryption."}),
    ("POST", "/v1/memories/{id}/correct", {**ME, "content": "The build uses Maven."}),
    ("POST", "/v1/memories/{id}/retract", {**ME, "reason": "wrong"}),
    ("POST", "/v1/memories/{id}/expire", ME),
    ("POST", "/v1/recall", {**ME, "query": "Which build tool?"}),
    ("POST", "/v1/import", {**ME, "rows": []}),
    ("PUT", "/v1/working/step", {**ME, "value": 3}),
    ("POST", "/v1/memories/{id}/outcome", {**ME, "success": True}),
    ("POST", "/v1/share", {**ME, "ids": ["{id}"], "to_agent_id": "reviewer"}),
    ("POST", "/v1/grants", {"from_agent": "coder", "to_agent": "reviewer", "types": ["fact"]}),
    ("POST", "/v1/consolidate", {"user_id": "u1"}),
    ("POST", "/v1/sweep", {"now": "2024-05-09T09:00:00+00:00"}),
]
# (path, a query missing its user): the routes that take an identity in the query.
QUERIES = [
    "/v1/memories",
    "/v1/memories/{id}",
    "/v1/memories/{id}/history",
    "/v1/export",
    "/v1/working",
    "/v1/working/step",
    "/v1/traces/x",
]
ROUTE_IDS = [f"{m} {p}" for m, p, _ in BODIES]


Seeded = tuple[Api, str, list[str], int]


def seed(api: Api) -> Seeded:
    """``api`` with one stored memory: its id, the stored ids and the audit size."""
    written = api.call(
        "POST",
        "/v1/memories",
        json={**ME, "content": "The build uses Ant.", "key": "build.tool", "value": "ant"},
    )
    assert written.status_code == 200
    return api, written.json()["record"]["id"], api.stored(), api.audit_size()


@pytest.fixture
def seeded(api: Api) -> Seeded:
    """A seeded app on every backend: for refusals the SDK makes."""
    return seed(api)


@pytest.fixture
def transport(sqlite_api: Api) -> Seeded:
    """A seeded app on a SQLite file: for refusals made before the SDK is called (the
    body's syntax, shape, size and media type), which no backend can change."""
    return seed(sqlite_api)


def unchanged(api: Api, stored: list[str], audit: int) -> None:
    assert api.stored() == stored
    assert api.audit_size() == audit


def problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body)
    assert body["status"] == status
    assert body["detail"]
    return body


@pytest.mark.parametrize(("method", "path", "body"), BODIES, ids=ROUTE_IDS)
def test_malformed_json_is_400(
    transport: Seeded, method: str, path: str, body: dict[str, Any]
) -> None:
    api, memory, stored, audit = transport
    response = api.call(
        method,
        path.format(id=memory),
        "admin",
        content=b'{"user_id": "u1",',
        headers={"Content-Type": "application/json"},
    )
    assert "not valid JSON" in problem(response, 400)["detail"]
    unchanged(api, stored, audit)


@pytest.mark.parametrize(("method", "path", "body"), BODIES, ids=ROUTE_IDS)
def test_unknown_fields_are_422_naming_them(
    transport: Seeded, method: str, path: str, body: dict[str, Any]
) -> None:
    api, memory, stored, audit = transport
    response = api.call(method, path.format(id=memory), "admin", json={**body, "colour": "red"})
    found = problem(response, 422)
    assert "colour" in found["detail"]
    assert found["errors"][0]["type"] == "extra_forbidden"
    unchanged(api, stored, audit)


@pytest.mark.parametrize(("method", "path", "body"), BODIES, ids=ROUTE_IDS)
def test_a_body_that_is_not_an_object_is_422(
    transport: Seeded, method: str, path: str, body: dict[str, Any]
) -> None:
    api, memory, stored, audit = transport
    for wrong in ([body], "text", 42, None):
        response = api.call(method, path.format(id=memory), "admin", json=wrong)
        problem(response, 422)
    unchanged(api, stored, audit)


@pytest.mark.parametrize(("method", "path", "body"), BODIES, ids=ROUTE_IDS)
def test_a_body_that_is_not_json_is_415(
    transport: Seeded, method: str, path: str, body: dict[str, Any]
) -> None:
    api, memory, stored, audit = transport
    response = api.call(
        method,
        path.format(id=memory),
        "admin",
        content=b"user_id=u1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert "application/json" in problem(response, 415)["detail"]
    unchanged(api, stored, audit)


@pytest.mark.parametrize(("method", "path", "body"), BODIES, ids=ROUTE_IDS)
def test_an_oversized_body_is_413_before_parsing(
    transport: Seeded, method: str, path: str, body: dict[str, Any]
) -> None:
    api, memory, stored, audit = transport
    huge = {**body, "content": "x" * (65 * 1024 * 1024 if path == "/v1/import" else 1_100_000)}
    response = api.call(method, path.format(id=memory), "admin", json=huge)
    assert "exceeds" in problem(response, 413)["detail"]
    unchanged(api, stored, audit)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("confidence", "0.9"),
        ("confidence", True),
        ("private", 1),
        ("private", "yes"),
        ("content", 42),
        ("user_id", 7),
        ("valid_from", 1700000000),
        ("valid_from", "yesterday"),
        ("valid_from", "2024-01-01T00:00:00"),
        ("authority", "root"),
        ("source", "chat"),
        ("source", {"kind": "tool", "extra": 1}),
        ("agent_scope", "everyone"),
        ("importance", []),
    ],
)
def test_wrong_types_are_422_naming_the_field(transport: Seeded, field: str, value: object) -> None:
    api, _, stored, audit = transport
    body = {**ME, "content": "The build uses Gradle.", field: value}
    found = problem(api.call("POST", "/v1/memories", json=body), 422)
    assert field in found["detail"]
    unchanged(api, stored, audit)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({**ME, "content": "x", "type": "gossip"}, "type"),
        ({**ME, "content": "x", "confidence": 3}, "confidence"),
        ({**ME, "content": "x", "key": "has spaces"}, "key"),
        ({**ME, "user_id": "", "content": "x"}, "user_id"),
        ({**ME, "user_id": "u1\n", "content": "x"}, "user_id"),
        ({**ME, "content": "x", "scope": "repo:elsewhere"}, "scope"),
        ({**ME, "content": "x", "authority": "explicit_admin"}, "explicit_admin"),
    ],
)
def test_what_the_sdk_refuses_is_422_with_its_message(
    seeded: Seeded, body: dict[str, Any], words: str
) -> None:
    api, _, stored, audit = seeded
    response = api.call("POST", "/v1/memories", json=body)
    assert response.status_code in (403, 422), response.text
    assert words in response.json()["detail"]
    unchanged(api, stored, audit)


def test_a_bad_batch_item_stores_no_item(seeded: Seeded) -> None:
    api, _, stored, audit = seeded
    items = [{"content": "The CI runs on Linux."}, {"content": "x", "confidence": 7}]
    found = problem(api.call("POST", "/v1/memories:batch", json={**ME, "items": items}), 422)
    assert "confidence" in found["detail"]
    unchanged(api, stored, audit)


def test_a_bad_import_row_imports_nothing(seeded: Seeded) -> None:
    api, _, stored, audit = seeded
    rows = [
        {"content": "The CI runs on Linux.", "created_at": "2024-01-01T00:00:00+00:00"},
        {"content": "x", "created_at": "never"},
    ]
    found = problem(api.call("POST", "/v1/import", json={**ME, "rows": rows}), 422)
    assert "import row 1" in found["detail"]
    unchanged(api, stored, audit)


@pytest.mark.parametrize("path", QUERIES)
def test_a_query_without_user_or_with_unknown_parameters_is_422(
    transport: Seeded, path: str
) -> None:
    api, memory, stored, audit = transport
    target = path.format(id=memory)
    assert "user_id" in problem(api.call("GET", f"{target}?agent_id=coder"), 422)["detail"]
    assert "colour" in problem(api.call("GET", f"{target}?{QUERY}&colour=red"), 422)["detail"]
    unchanged(api, stored, audit)


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=x", "offset=-1", "status=gone", "status=all&status=active", "type=gossip"],
)
def test_bad_list_parameters_are_422(seeded: Seeded, query: str) -> None:
    api, *_ = seeded
    problem(api.call("GET", f"/v1/memories?{QUERY}&{query}"), 422)


def test_an_unknown_id_is_404_and_a_long_one_422(seeded: Seeded) -> None:
    api, _, stored, audit = seeded
    problem(api.call("GET", f"/v1/memories/01NOSUCHMEMORY?{QUERY}"), 404)
    problem(api.call("POST", "/v1/memories/01NOSUCHMEMORY/retract", json=ME), 404)
    problem(api.call("DELETE", f"/v1/memories/01NOSUCHMEMORY?{QUERY}"), 404)
    problem(api.call("GET", f"/v1/memories/{'x' * 300}?{QUERY}"), 422)
    unchanged(api, stored, audit)


def test_unknown_routes_and_methods_are_problems(transport: Seeded) -> None:
    api, *_ = transport
    assert "no route" in problem(api.call("GET", "/v1/nothing"), 404)["detail"]
    wrong = api.call("PUT", "/v1/recall", json={})
    assert problem(wrong, 405)["detail"].endswith("allowed: POST")
    assert wrong.headers["allow"] == "POST"


def test_working_memory_refuses_a_scope_less_context_and_bad_ttls(
    seeded: Seeded,
) -> None:
    api, *_ = seeded
    bare = {"user_id": "u1", "value": 1}
    assert "session" in problem(api.call("PUT", "/v1/working/k", json=bare), 422)["detail"]
    for ttl in (0, -5, 10**9):
        problem(api.call("PUT", "/v1/working/k", json={**ME, "value": 1, "ttl_seconds": ttl}), 422)
    assert api.call("GET", f"/v1/working?{QUERY}").json()["items"] == []


class FailingEmbedder(Wrapped):
    """The hashing embedder, failing from its ``fail_at``-th call on (a fake model)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__(HashingEmbedder())
        self.calls = 0
        self.fail_at = fail_at

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise EmbeddingError("the embedding endpoint went away")
        return self.inner.embed(texts)


def test_sdk_failures_map_through_the_table(
    sqlite_file_url: str, open_mem: Callable[..., Engram], keys_path: Path
) -> None:
    mem = open_mem(
        sqlite_file_url,
        embedder=FailingEmbedder(fail_at=3),
        config=Config(write=WritePolicy(batch_items=50)),
    )
    keys = make_keys(keys_path)
    with TestClient(build_app(mem, keys_path)) as client:
        api = Api(client.app, mem, keys, client)  # type: ignore[arg-type]
        items = [{"content": f"Queue {i} drains every {i + 1} minutes."} for i in range(120)]
        partial = problem(api.call("POST", "/v1/memories:batch", json={**ME, "items": items}), 500)
        assert partial["type"] == "/problems/partial-write"
        assert len(partial["results"]) == 100
        assert len(api.stored()) == 100
        failed = api.call("POST", "/v1/memories", json={**ME, "content": "The API is slow."})
        assert problem(failed, 503)["type"] == "/problems/embedding-error"
        assert len(api.stored()) == 100
